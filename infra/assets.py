"""Lambda code and layer folders, prepared without Docker.

Each function's asset is ``functions/<name>/`` plus the ``skyloop`` package
next to ``handler.py`` (so ``import skyloop`` works and ``run.sh`` finds it
under ``$LAMBDA_TASK_ROOT``). Third-party dependencies live in one layer
built by ``layers/build.py``; when that has not run, a placeholder layer keeps
synth working (and a warning says the stack is not deployable as is).

The staged code carries its bytecode, compiled by CPython 3.12 (the runtime's
version; ``infra.target_python``): ``/var/task`` is read-only, so Lambda could
never cache what it compiles and would compile every module on every cold
start. Without a local 3.12, synth still works, warns, and ships sources only.

Folders are staged in a temporary directory: CDK copies each asset into the
cloud assembly (``cdk.out/asset.<hash>``) when the construct is created, and
the hash depends only on the content, so staging does not change templates.
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from functools import cache
from pathlib import Path

from infra import target_python
from skyloop.manifest import PROJECT_ROOT, FunctionSpec

PACKAGE_DIR = PROJECT_ROOT / "shared" / "skyloop"
LAYER_BUILD_DIR = PROJECT_ROOT / "layers" / "build"
# Tests point this elsewhere so they never depend on a built (network-fetched) layer.
LAYER_DIR_ENV = "SKYLOOP_LAYER_DIR"
# Development-only parts of the package: the moto-backed local stack and the scripted model.
PACKAGE_EXCLUDES = ("local", "mockllm")
FUNCTION_ROOT = "/var/task"  # where Lambda unpacks a function's code ($LAMBDA_TASK_ROOT)
_IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", ".DS_Store")


@cache
def _staging_root() -> Path:
    root = Path(tempfile.mkdtemp(prefix="skyloop-assets-"))
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    return root


@cache
def bytecode_python() -> Path | None:
    """The CPython 3.12 that compiles the staged code, or None (then sources only, with a warning)."""
    python = target_python.find()
    if python is None:
        print(
            "warning: no CPython 3.12 found: function code ships without bytecode (slower cold "
            f"starts); {target_python.HOW_TO_GET}",
            file=sys.stderr,
        )
    return python


@cache
def _staged_package() -> Path:
    """The ``skyloop`` package once, compiled as ``/var/task/skyloop``; each function gets a copy."""
    out = _staging_root() / "package" / "skyloop"
    shutil.copytree(PACKAGE_DIR, out, ignore=_ignore_in_package)
    python = bytecode_python()
    if python is not None:
        target_python.compile_bytecode(python, [(out.parent, FUNCTION_ROOT)])
    return out


def stage_function(spec: FunctionSpec) -> Path:
    """A folder holding the function's entry point and the ``skyloop`` package, with bytecode."""
    out = _staging_root() / "functions" / spec.name
    if out.exists():
        return out
    shutil.copytree(spec.code_dir, out, ignore=_IGNORE)
    python = bytecode_python()
    if python is not None:
        target_python.compile_bytecode(python, [(out, FUNCTION_ROOT)])
    shutil.copytree(_staged_package(), out / "skyloop")
    return out


def _ignore_in_package(folder: str, names: list[str]) -> set[str]:
    ignored = set(_IGNORE(folder, names))
    if Path(folder) == PACKAGE_DIR:
        ignored.update(n for n in names if n in PACKAGE_EXCLUDES)
    return ignored


def layer_dir() -> tuple[Path, bool]:
    """``(folder, built)``: ``layers/build`` when built, else a placeholder (``built`` False)."""
    built_dir = Path(os.environ.get(LAYER_DIR_ENV) or LAYER_BUILD_DIR)
    if (built_dir / "python").is_dir():
        return built_dir, True
    placeholder = _staging_root() / "layer-placeholder"
    if not placeholder.exists():
        (placeholder / "python").mkdir(parents=True)
        (placeholder / "python" / "PLACEHOLDER.txt").write_text(
            "The dependencies layer was not built. Run `make layer` before `cdk deploy`.\n"
        )
        print(
            f"warning: {built_dir} is missing: using an empty placeholder layer; "
            "run `make layer` before deploying",
            file=sys.stderr,
        )
    return placeholder, False
