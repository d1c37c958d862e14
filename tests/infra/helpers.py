"""Reading a synthesized CloudFormation template: resources by type, ids, policies of a role."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

Template = dict[str, Any]


def resources(template: Template, type_: str) -> dict[str, dict[str, Any]]:
    return {k: r for k, r in template["Resources"].items() if r["Type"] == type_}


def one(template: Template, type_: str) -> tuple[str, dict[str, Any]]:
    found = resources(template, type_)
    assert len(found) == 1, f"expected one {type_}, found {sorted(found)}"
    return next(iter(found.items()))


def by_prefix(template: Template, type_: str, prefix: str) -> tuple[str, dict[str, Any]]:
    """The resource whose logical id is ``<prefix><8-hex hash>`` (CDK's naming)."""
    pattern = re.compile(rf"^{re.escape(prefix)}[0-9A-F]{{8}}$")
    found = {k: r for k, r in resources(template, type_).items() if pattern.match(k)}
    assert len(found) == 1, f"expected one {type_} named {prefix}*, found {sorted(found)}"
    return next(iter(found.items()))


def pascal(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_"))


def function(template: Template, name: str) -> tuple[str, dict[str, Any]]:
    """A manifest function by name (construct ``Functions/<Pascal>``)."""
    return by_prefix(template, "AWS::Lambda::Function", f"Functions{pascal(name)}")


def role_statements(template: Template, role_id: str) -> list[dict[str, Any]]:
    """Every statement of every AWS::IAM::Policy attached to the role."""
    out: list[dict[str, Any]] = []
    for policy in resources(template, "AWS::IAM::Policy").values():
        if {"Ref": role_id} in policy["Properties"].get("Roles", []):
            out.extend(policy["Properties"]["PolicyDocument"]["Statement"])
    return out


def actions(statements: list[dict[str, Any]]) -> set[str]:
    out: set[str] = set()
    for s in statements:
        a = s["Action"]
        out.update([a] if isinstance(a, str) else a)
    return out


def statements_with(statements: list[dict[str, Any]], action: str) -> list[dict[str, Any]]:
    return [
        s for s in statements if action in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])
    ]


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def bytecode_problems(root: Path, magic: bytes, tag: str = "cpython-312") -> list[str]:
    """Sources under ``root`` without an unchecked hash-based ``tag`` pyc, and pycs of any other kind.

    A pyc's header is the magic number (the interpreter version), then 4 bytes of flags:
    bit 0 hash-based, bit 1 check the source. Unchecked hash-based (flags 1) never reads the
    source nor depends on file times.
    """
    problems: list[str] = []
    for source in sorted(root.rglob("*.py")):
        pyc = source.parent / "__pycache__" / f"{source.stem}.{tag}.pyc"
        if not pyc.is_file():
            problems.append(f"no bytecode: {source.relative_to(root)}")
            continue
        header = pyc.read_bytes()[:8]
        if header[:4] != magic or int.from_bytes(header[4:8], "little") != 1:
            problems.append(f"not unchecked-hash {tag} bytecode: {pyc.relative_to(root)}")
    for pyc in sorted(root.rglob("*.pyc")):
        if f".{tag}." not in pyc.name or pyc.parent.name != "__pycache__":
            problems.append(f"foreign bytecode: {pyc.relative_to(root)}")
    return problems
