"""The functions' IAM policies, as the synthesized template deploys them, for the local stack to enforce.

moto accepts every call, so a function that calls what its role does not
allow works locally and fails on AWS. The local stack therefore checks every
AWS call a function makes against that function's policy
(:mod:`skyloop.local.iam`), and the policy it checks is the one the stack
deploys: this module reads the synthesized template and writes each manifest
function's statements, intrinsics and all, to ``skyloop/local/iam_policies.json``
(``make iam-policies``; ``tests/infra/test_iam_export.py`` fails when the
committed file is not what the current stack synthesizes).

What the local stack needs to resolve the statements' intrinsics is recorded
beside them, from the template itself:

* a function (``AWS::Lambda::Function``) is the manifest entry with its description;
* any other resource is named by a function's environment variable whose value is
  its ``Ref`` or one of its ``Fn::GetAtt`` attributes (``SKYLOOP_TABLE_NAME`` is the
  table's ``Ref``), or a URL joined around its ``Ref`` (``SKYLOOP_LIVE_ENDPOINT``, read
  back with a regular expression): the local stack sets the same variables to its own;
* a literal that comes from a function's ``*_PREFIX`` variable (the secrets prefix,
  ``<stack>/agents``) is written as that variable, since the local stack's differs;
* a grant whose resources are a deploy context value (``bedrockModelArns``: the turn's
  model calls) is absent from a template synthesized without it, so it is recorded as
  ``context_grants`` (``C.CONTEXT_GRANTS``, which the stack grants from): the local stack
  reads the value from the developer's ``cdk.json``, as ``cdk deploy`` would.

Anything else a statement names (log groups, the table's stream, the WebSocket API)
stays unresolved locally: it matches no call, so a call that needs it is refused.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

from infra import constants as C

ROOT = Path(__file__).resolve().parents[1]
OUTPUT = ROOT / "shared" / "skyloop" / "local" / "iam_policies.json"
PREFIX_SUFFIX = "_PREFIX"


def _functions_by_logical_id(resources: dict[str, Any]) -> dict[str, str]:
    """Logical id -> manifest function name (matched by the description the stack gives each)."""
    from skyloop import manifest

    by_description = {spec.description: spec.name for spec in manifest.FUNCTIONS}
    out: dict[str, str] = {}
    for logical_id, resource in resources.items():
        if resource["Type"] != "AWS::Lambda::Function":
            continue
        description = resource["Properties"].get("Description")
        name = by_description.get(description) if isinstance(description, str) else None
        if name is not None:
            out[logical_id] = name
    return out


def _locators(resources: dict[str, Any], functions: dict[str, str]) -> dict[str, dict[str, Any]]:
    """How the local stack finds each resource: a manifest function, or the environment variables
    that name it (``from``: the first one set in the calling function's environment is used)."""
    out: dict[str, dict[str, Any]] = {
        logical_id: {"type": "AWS::Lambda::Function", "function": name}
        for logical_id, name in functions.items()
    }
    for logical_id in sorted(functions):
        variables = resources[logical_id]["Properties"].get("Environment", {}).get("Variables", {})
        for variable, value in sorted(variables.items()):
            if not isinstance(value, dict):
                continue
            pattern = None
            if set(value) == {"Ref"} and isinstance(value["Ref"], str):
                target, attribute = value["Ref"], "Ref"
            elif set(value) == {"Fn::GetAtt"}:
                target, attribute = value["Fn::GetAtt"][0], value["Fn::GetAtt"][1]
            else:
                joined = _joined_ref(value)
                if joined is None:
                    continue
                (target, pattern), attribute = joined, "Ref"
            if target not in resources or "function" in out.get(target, {}):
                continue
            found = {"env": variable, "attribute": attribute, **({"pattern": pattern} if pattern else {})}
            locator = out.setdefault(target, {"type": resources[target]["Type"], "from": []})
            if found not in locator["from"]:
                locator["from"].append(found)
    return out


def _joined_ref(value: dict[str, Any]) -> tuple[str, str] | None:
    """A variable joined around one resource's ``Ref`` (``wss://<Ref LiveApi>.execute-api.<region>...``):
    the resource, and a regular expression whose group ``ref`` takes its ``Ref`` out of the value."""
    join = value.get("Fn::Join")
    if set(value) != {"Fn::Join"} or not isinstance(join, list) or join[0] != "":
        return None
    refs = [p["Ref"] for p in join[1] if isinstance(p, dict) and isinstance(p.get("Ref"), str)]
    targets = [r for r in refs if not r.startswith("AWS::")]
    if len(targets) != 1 or any(isinstance(p, dict) and "Ref" not in p for p in join[1]):
        return None
    pattern = ""
    for part in join[1]:
        if isinstance(part, str):
            pattern += re.escape(part)
        elif part["Ref"] == targets[0]:
            pattern += "(?P<ref>[^./]+)"
        else:
            pattern += ".+?"  # a pseudo parameter (the region, the URL suffix)
    return targets[0], pattern


def _prefixes(resources: dict[str, Any], functions: dict[str, str]) -> dict[str, str]:
    """Literal ``*_PREFIX`` values of the functions' environments -> the variable (longest first)."""
    found: dict[str, str] = {}
    for logical_id in functions:
        variables = resources[logical_id]["Properties"].get("Environment", {}).get("Variables", {})
        for variable, value in variables.items():
            if variable.endswith(PREFIX_SUFFIX) and isinstance(value, str) and value:
                found[value] = variable
    return dict(sorted(found.items(), key=lambda kv: -len(kv[0])))


def _parameterize(node: Any, prefixes: dict[str, str]) -> Any:
    """Literals carrying a ``*_PREFIX`` value become ``Fn::Join`` parts with ``{"Env": variable}``."""
    if isinstance(node, list):
        return [_parameterize(item, prefixes) for item in node]
    if isinstance(node, dict):
        return {key: _parameterize(value, prefixes) for key, value in node.items()}
    if not isinstance(node, str):
        return node
    for value, variable in prefixes.items():
        if value in node:
            head, _, tail = node.partition(value)
            parts = [
                p
                for p in (_parameterize(head, prefixes), {"Env": variable}, _parameterize(tail, prefixes))
                if p != ""
            ]
            return {"Fn::Join": ["", parts]}
    return node


def _statements_of_roles(resources: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """Role logical id -> every statement of the inline policies attached to it (own and ``AWS::IAM::Policy``)."""
    out: dict[str, list[dict[str, Any]]] = {}
    for logical_id, resource in resources.items():
        if resource["Type"] == "AWS::IAM::Role":
            for policy in resource["Properties"].get("Policies") or []:
                out.setdefault(logical_id, []).extend(policy["PolicyDocument"]["Statement"])
    for resource in resources.values():
        if resource["Type"] != "AWS::IAM::Policy":
            continue
        for role in resource["Properties"].get("Roles") or []:
            if isinstance(role, dict) and "Ref" in role:
                out.setdefault(role["Ref"], []).extend(resource["Properties"]["PolicyDocument"]["Statement"])
    return out


def _referenced(node: Any, into: set[str]) -> None:
    if isinstance(node, list):
        for item in node:
            _referenced(item, into)
    elif isinstance(node, dict):
        if isinstance(node.get("Ref"), str) and not node["Ref"].startswith("AWS::"):
            into.add(node["Ref"])
        getatt = node.get("Fn::GetAtt")
        if isinstance(getatt, list) and getatt:
            into.add(getatt[0])
        for value in node.values():
            _referenced(value, into)


def export(template: dict[str, Any]) -> dict[str, Any]:
    """Each manifest function's role statements and how to resolve what they name, from ``template``."""
    resources: dict[str, Any] = template["Resources"]
    functions = _functions_by_logical_id(resources)
    locators = _locators(resources, functions)
    prefixes = _prefixes(resources, functions)
    statements_of = _statements_of_roles(resources)
    policies: dict[str, Any] = {}
    for logical_id, name in sorted(functions.items(), key=lambda kv: kv[1]):
        properties = resources[logical_id]["Properties"]
        role = properties["Role"]["Fn::GetAtt"][0]
        managed = resources[role]["Properties"].get("ManagedPolicyArns") or []
        policies[name] = {
            "role": role,
            "managed_policies": managed,
            "statements": _parameterize(statements_of.get(role, []), prefixes),
        }
    named: set[str] = set()
    _referenced(policies, named)
    return {
        "about": "generated by infra/iam_export.py from the synthesized template (make iam-policies): do not edit",
        "functions": policies,
        "context_grants": {
            function: [{"context": key, "Action": list(actions)} for key, actions in grants]
            for function, grants in sorted(C.CONTEXT_GRANTS.items())
        },
        "resources": {k: locators[k] for k in sorted(named) if k in locators},
        "unresolved": sorted(named - set(locators)),
    }


def render(template: dict[str, Any]) -> str:
    return json.dumps(export(template), indent=1, sort_keys=True) + "\n"


def main(argv: list[str]) -> int:
    template_path = Path(argv[0]) if argv else ROOT / "cdk.out" / "Skyloop.template.json"
    OUTPUT.write_text(render(json.loads(template_path.read_text())))
    print(f"{OUTPUT.relative_to(ROOT)} <- {template_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
