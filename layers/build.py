"""Build the Lambda dependencies layer from its lock: wheels for Lambda's platform, no Docker.

    python layers/build.py            # -> layers/build/python/... (arm64, CPython 3.12, with bytecode)
    python layers/build.py --dry-run  # print the pip command only
    python layers/build.py --lock     # re-resolve layers/requirements.txt into the lock files
    python layers/build.py --host --out DIR   # the same lock for this machine (tests, benchmarks)

The layer is exactly ``layers/requirements.lock``: every package pinned, installed
with ``--no-deps`` and ``--only-binary=:all:`` for the functions' runtime (CPython
and architecture from ``infra/constants.py``), so pip never resolves nor compiles
anything for the build machine. ``--lock`` writes that file (pip-compile style)
from ``layers/requirements.txt`` for the same platform. boto3, botocore and what
only they need are left out on purpose: the Lambda runtime provides them, and a
layer copy would shadow the runtime's botocore under its boto3.
``layers/runtime.lock`` pins those for the tests and benchmarks that stand in for
the runtime; Lambda itself uses its own.

Bytecode: ``/opt`` is read-only in Lambda, so the layer carries its own
``cpython-312`` pycs, compiled by a local CPython 3.12 (``infra/target_python.py``).
Without one the build stops, unless ``--no-bytecode`` says to ship sources only.
The CDK stack packages ``layers/build`` as the layer; without it, synth uses a
placeholder and warns.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import platform
import shutil
import subprocess
import sys
from collections import deque
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from infra import target_python  # noqa: E402
from infra.constants import LAMBDA_PYTHON_VERSION, LAYER_IMPLEMENTATION, LAYER_PLATFORM  # noqa: E402

REQUIREMENTS = ROOT / "layers" / "requirements.txt"
LOCK = ROOT / "layers" / "requirements.lock"
RUNTIME_LOCK = ROOT / "layers" / "runtime.lock"
BUILD_DIR = ROOT / "layers" / "build"
LAYER_ROOT = "/opt/python"  # where Lambda mounts a layer's python/ folder
# What the Lambda Python runtime ships: the layer leaves these (and what only they need) out.
RUNTIME_PACKAGES = ("boto3", "botocore", "s3transfer")
# The Linux platform a resolve for LAYER_PLATFORM evaluates markers for.
TARGET_MARKERS = {
    "implementation_name": "cpython",
    "platform_python_implementation": "CPython",
    "python_version": LAMBDA_PYTHON_VERSION,
    "python_full_version": f"{LAMBDA_PYTHON_VERSION}.0",
    "os_name": "posix",
    "sys_platform": "linux",
    "platform_system": "Linux",
    "platform_machine": "aarch64" if "aarch64" in LAYER_PLATFORM else "x86_64",
}


def _target_flags(host: bool) -> list[str]:
    """Wheels for CPython 3.12: on Lambda's platform, or (``host``) on this machine's."""
    flags = [] if host else ["--platform", LAYER_PLATFORM]
    return [
        *flags,
        "--only-binary=:all:",
        "--python-version",
        LAMBDA_PYTHON_VERSION,
        "--implementation",
        LAYER_IMPLEMENTATION,
    ]


def pip_command(target: Path, lock: Path = LOCK, *, host: bool = False) -> list[str]:
    return [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
        "--no-deps",  # the lock is the whole layer: nothing is resolved at build time
        "--no-compile",  # pip would compile for the build interpreter; compile_bytecode does 3.12
        *_target_flags(host),
        "--upgrade",
        "-t",
        str(target),
        "-r",
        str(lock),
    ]


def _prune(site: Path) -> None:
    """Drop bytecode of any other interpreter (pip's, a stray run): only cpython-312 pycs load."""
    tag = f"cpython-{LAMBDA_PYTHON_VERSION.replace('.', '')}"
    for pyc in site.rglob("*.pyc"):
        if tag not in pyc.name:
            pyc.unlink()


def install(out: Path, lock: Path, *, host: bool, bytecode: bool) -> Path:
    """``out/python`` with the lock installed (and compiled), built in a sibling then renamed."""
    staging = out.with_name(out.name + ".tmp")
    shutil.rmtree(staging, ignore_errors=True)
    python = target_python.require("compiling the layer's bytecode") if bytecode else None
    result = subprocess.run(pip_command(staging / "python", lock, host=host), check=False)
    if result.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        raise SystemExit(result.returncode)
    _prune(staging / "python")
    if python is not None:
        target_python.compile_bytecode(python, [(staging / "python", LAYER_ROOT)])
    shutil.rmtree(out, ignore_errors=True)
    staging.rename(out)
    return out


def host_build_key() -> str:
    """Changes with the locks, this script, the target compiler and the machine: a cache key."""
    digest = hashlib.sha256()
    for path in (LOCK, RUNTIME_LOCK, Path(__file__), ROOT / "infra" / "target_python.py"):
        digest.update(path.read_bytes())
    digest.update(f"{platform.machine()} {target_python.find()}".encode())
    return digest.hexdigest()[:16]


def ensure_host_build(cache_root: Path) -> tuple[Path, Path]:
    """``(layer, runtime)`` built from the locks for this machine, reused while the key holds.

    ``layer/python`` is the layer as Lambda mounts it at /opt/python; ``runtime/python``
    stands in for the runtime's own boto3 and botocore. Both carry 3.12 bytecode.
    """
    key = host_build_key()
    layer, runtime = cache_root / f"layer-{key}", cache_root / f"runtime-{key}"
    for stale in [*cache_root.glob("layer-*"), *cache_root.glob("runtime-*")]:
        if stale not in (layer, runtime):
            shutil.rmtree(stale, ignore_errors=True)
    if not (layer / "python").is_dir():
        install(layer, LOCK, host=True, bytecode=True)
    if not (runtime / "python").is_dir():
        install(runtime, RUNTIME_LOCK, host=True, bytecode=True)
    return layer, runtime


# ------------------------------------------------------------------------------ lock
def _resolve(requirements: list[str]) -> list[dict[str, Any]]:
    """pip's resolution for Lambda's platform, installing nothing (``--dry-run --report``)."""
    command = [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--dry-run",
        "--ignore-installed",
        "--quiet",
        "--disable-pip-version-check",
        "--report",
        "-",
        *_target_flags(host=False),
        *requirements,
    ]
    out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    return list(json.loads(out)["install"])


def _closure(roots: list[Any], metadata: dict[str, dict[str, Any]], stop: set[str]) -> dict[str, set[str]]:
    """Package -> what requires it (``-r requirements.txt`` for roots), following active markers."""
    from packaging.markers import default_environment
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    via: dict[str, set[str]] = {}
    queue: deque[tuple[Any, str]] = deque((r, "-r requirements.txt") for r in roots)
    seen: set[tuple[str, frozenset[str]]] = set()
    while queue:
        requirement, parent = queue.popleft()
        name = canonicalize_name(requirement.name)
        if name in stop:
            continue
        via.setdefault(name, set()).add(parent)
        extras = frozenset(requirement.extras)
        if (name, extras) in seen:
            continue
        seen.add((name, extras))
        if name not in metadata:
            raise RuntimeError(f"{name} (required by {parent}) is not in pip's resolution")
        for raw in metadata[name].get("requires_dist") or []:
            dependency = Requirement(raw)
            env = {**default_environment(), **TARGET_MARKERS}
            active = dependency.marker is None or any(
                dependency.marker.evaluate({**env, "extra": extra}) for extra in (extras or {""})
            )
            if active:
                queue.append((dependency, name))
    return via


def _render(
    header: str, via: dict[str, set[str]], versions: dict[str, str], extras: dict[str, set[str]]
) -> str:
    lines = [header.rstrip(), ""]
    for name in sorted(via):
        extra = f"[{','.join(sorted(extras[name]))}]" if extras.get(name) else ""
        lines.append(f"{name}{extra}=={versions[name]}")
        lines.append(f"    # via {', '.join(sorted(via[name]))}")
    return "\n".join(lines) + "\n"


def write_locks() -> None:
    """Resolve requirements.txt (with the runtime's packages, so versions agree) for Lambda's platform."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    roots = [
        Requirement(line.split("#", 1)[0].strip())
        for line in REQUIREMENTS.read_text().splitlines()
        if line.split("#", 1)[0].strip()
    ]
    installs = _resolve([str(r) for r in roots] + list(RUNTIME_PACKAGES))
    metadata = {canonicalize_name(i["metadata"]["name"]): i["metadata"] for i in installs}
    versions = {name: m["version"] for name, m in metadata.items()}
    runtime_roots = {canonicalize_name(n) for n in RUNTIME_PACKAGES}
    layer = _closure(roots, metadata, stop=runtime_roots)
    runtime = _closure([Requirement(n) for n in RUNTIME_PACKAGES], metadata, stop=set())
    runtime = {
        n: {p.replace("-r requirements.txt", "the Lambda runtime") for p in v} for n, v in runtime.items()
    }
    extras = {canonicalize_name(r.name): set(r.extras) for r in roots if r.extras}
    platform_note = f"CPython {LAMBDA_PYTHON_VERSION} on {LAYER_PLATFORM}"
    LOCK.write_text(
        _render(
            f"""\
# The dependencies layer, every package pinned. Generated by `make lock`
# (python layers/build.py --lock) from layers/requirements.txt for {platform_note};
# do not edit by hand. layers/build.py installs exactly these, with --no-deps.
# Left out: {", ".join(RUNTIME_PACKAGES)} and what only they need (the Lambda runtime has them).""",
            layer,
            versions,
            extras,
        )
    )
    RUNTIME_LOCK.write_text(
        _render(
            f"""\
# What the Lambda Python runtime itself provides and the layer leaves out, pinned at the
# versions resolved together with layers/requirements.txt ({platform_note}). Only tests and
# benchmarks install it, to stand in for the runtime; Lambda uses its own versions.
# Generated by `make lock` (python layers/build.py --lock); do not edit by hand.""",
            runtime,
            versions,
            {},
        )
    )
    print(
        f"{LOCK.relative_to(ROOT)}: {len(layer)} packages; {RUNTIME_LOCK.relative_to(ROOT)}: {len(runtime)}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="print the pip command and exit")
    parser.add_argument("--out", type=Path, default=BUILD_DIR, help="layer folder (default: layers/build)")
    parser.add_argument("--lock", action="store_true", help="re-resolve requirements.txt into the lock files")
    parser.add_argument(
        "--host", action="store_true", help="wheels for this machine instead of Lambda's (tests, benchmarks)"
    )
    parser.add_argument(
        "--no-bytecode", action="store_true", help="ship sources only (when no CPython 3.12 is at hand)"
    )
    args = parser.parse_args(argv)

    if args.lock:
        write_locks()
        return 0
    command = pip_command(args.out / "python", host=args.host)  # Lambda puts /opt/python on sys.path
    if args.dry_run:
        print(" ".join(command))
        return 0
    try:
        install(args.out, LOCK, host=args.host, bytecode=not args.no_bytecode)
    except target_python.TargetPythonMissingError as exc:
        print(f"error: {exc}; or pass --no-bytecode", file=sys.stderr)
        return 2
    size = sum(f.stat().st_size for f in args.out.rglob("*") if f.is_file())
    where = args.out.relative_to(ROOT) if args.out.is_relative_to(ROOT) else args.out
    print(f"layer built in {where} ({size / 1e6:.1f} MB unzipped)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
