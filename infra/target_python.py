"""The functions' Python on this machine: bytecode for the artifacts, and checks that run them.

Bytecode is version-specific (``__pycache__/<module>.cpython-312.pyc`` carries the
3.12 magic number; any other interpreter ignores it), so it must be written by
CPython ``LAMBDA_PYTHON_VERSION`` itself, not by the development interpreter.
Pure Python (no CDK import): ``layers/build.py``, ``infra/assets.py``, the
infra tests and ``bench/import_time.py`` all use it.

The interpreter is, in order: ``$SKYLOOP_LAMBDA_PYTHON``, ``python3.12`` on
``PATH``, pyenv's 3.12 (``~/.pyenv/versions/3.12*``), ``/usr/bin`` or
``/usr/local/bin``. Each candidate must run and report CPython 3.12 (a pyenv shim
for a version that is not selected does not).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import textwrap
from functools import cache
from pathlib import Path

from infra.constants import LAMBDA_PYTHON_VERSION

ENV = "SKYLOOP_LAMBDA_PYTHON"
HOW_TO_GET = (
    f"install CPython {LAMBDA_PYTHON_VERSION} (`pyenv install {LAMBDA_PYTHON_VERSION}`, or your OS's "
    f"python{LAMBDA_PYTHON_VERSION} package), or point ${ENV} at a python{LAMBDA_PYTHON_VERSION}"
)

# Hash-based pycs that are never checked against their source: the code in /var/task and /opt
# is read-only and immutable, so checking would only cost a read and a hash of every source on
# each cold start; and no timestamps, so the same sources give the same bytes (stable asset hashes).
_COMPILE = textwrap.dedent(
    """
    import compileall, py_compile, sys
    ok = True
    for root, prefix in zip(sys.argv[1::2], sys.argv[2::2]):
        ok &= bool(compileall.compile_dir(
            root, stripdir=root, prependdir=prefix, quiet=1, workers=0,
            invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH,
        ))
    sys.exit(0 if ok else 1)
    """
)


class TargetPythonMissingError(RuntimeError):
    """Raised when no CPython of the functions' version is found on this machine."""


def _candidates() -> list[Path]:
    version = LAMBDA_PYTHON_VERSION
    out: list[Path] = []
    if os.environ.get(ENV):
        out.append(Path(os.environ[ENV]))
    on_path = shutil.which(f"python{version}")
    if on_path:
        out.append(Path(on_path))
    pyenv_root = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv")
    out += sorted((pyenv_root / "versions").glob(f"{version}*/bin/python{version}"), reverse=True)
    out += [Path(f"/usr/bin/python{version}"), Path(f"/usr/local/bin/python{version}")]
    return out


def _is_target(python: Path) -> bool:
    try:
        out = subprocess.run(
            [
                str(python),
                "-c",
                "import sys; print('%s %d.%d' % (sys.implementation.name, *sys.version_info[:2]))",
            ],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except OSError:
        return False
    return out.returncode == 0 and out.stdout.strip() == f"cpython {LAMBDA_PYTHON_VERSION}"


@cache
def find() -> Path | None:
    """The first candidate that is CPython ``LAMBDA_PYTHON_VERSION``, or None."""
    for python in _candidates():
        if python.is_file() and _is_target(python):
            return python
    return None


def require(purpose: str) -> Path:
    """The target interpreter, or an error saying what needs it and how to get it."""
    python = find()
    if python is None:
        raise TargetPythonMissingError(
            f"{purpose} needs CPython {LAMBDA_PYTHON_VERSION} (the Lambda runtime's version) and none was "
            f"found: {HOW_TO_GET}"
        )
    return python


def compile_bytecode(python: Path, trees: list[tuple[Path, str]]) -> None:
    """Write ``__pycache__/*.cpython-312.pyc`` for every ``.py`` of each ``(folder, deployed path)``.

    ``deployed path`` (``/var/task``, ``/opt/python``) replaces the folder in the
    file names recorded in the code objects, so tracebacks name the deployed files
    and the bytes do not depend on where the folder was staged.
    """
    args = [str(part) for tree, prefix in trees for part in (tree, prefix)]
    result = subprocess.run(
        [str(python), "-I", "-c", _COMPILE, *args], capture_output=True, text=True, timeout=600, check=False
    )
    if result.returncode != 0:
        raise RuntimeError(
            f"compileall under {python} failed:\n{result.stdout[-3000:]}{result.stderr[-3000:]}"
        )
