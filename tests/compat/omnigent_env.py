"""A Python 3.12 venv with omnigent's published package, made once and cached per version.

omnigent needs Python 3.12; skyloop runs on 3.11+. The compat suite therefore
drives omnigent's real SDK and CLI as subprocesses of their own interpreter,
in ``.pytest_cache/omnigent-venv-<version>`` (installed from PyPI the first
time, reused after: delete the directory to rebuild it).
"""

from __future__ import annotations

import fcntl
import glob
import os
import shutil
import subprocess
from pathlib import Path

OMNIGENT_VERSION = "0.19.1"
NO_PYTHON = (
    "omnigent {version} needs Python 3.12 and none was found (looked at $OMNIGENT_PYTHON, "
    "python3.12 on PATH and pyenv's versions). Install one with `pyenv install 3.12` "
    "(or point OMNIGENT_PYTHON at a python3.12), then run the tests again."
)


def find_python312() -> str | None:
    """The first Python 3.12 interpreter found, or None."""
    candidates: list[str] = []
    if os.environ.get("OMNIGENT_PYTHON"):
        candidates.append(os.environ["OMNIGENT_PYTHON"])
    on_path = shutil.which("python3.12")
    if on_path:
        candidates.append(on_path)
    roots = [os.environ.get("PYENV_ROOT") or "", str(Path.home() / ".pyenv")]
    pyenv = shutil.which("pyenv")
    if pyenv:
        out = subprocess.run([pyenv, "root"], capture_output=True, text=True, check=False)
        roots.append(out.stdout.strip())
    for root in filter(None, roots):
        candidates += sorted(glob.glob(f"{root}/versions/3.12*/bin/python3.12"), reverse=True)
    for candidate in candidates:
        out = subprocess.run(
            [candidate, "-c", "import sys; print(sys.version_info[:2] == (3, 12))"],
            capture_output=True,
            text=True,
            check=False,
        )
        if out.stdout.strip() == "True":
            return candidate
    return None


class VenvError(RuntimeError):
    pass


def ensure_venv(cache_dir: Path) -> Path:
    """The venv's directory, created and installed the first time (under a lock)."""
    venv = cache_dir / f"omnigent-venv-{OMNIGENT_VERSION}"
    stamp = venv / ".installed"
    cache_dir.mkdir(parents=True, exist_ok=True)
    with (cache_dir / f"omnigent-venv-{OMNIGENT_VERSION}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if stamp.exists():
            return venv
        python = find_python312()
        if python is None:
            raise VenvError(NO_PYTHON.format(version=OMNIGENT_VERSION))
        shutil.rmtree(venv, ignore_errors=True)
        steps = [
            [python, "-m", "venv", str(venv)],
            [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", f"omnigent=={OMNIGENT_VERSION}"],
        ]
        for step in steps:
            out = subprocess.run(step, capture_output=True, text=True, check=False, timeout=900)
            if out.returncode != 0:
                raise VenvError(f"{' '.join(step)} failed:\n{out.stdout[-2000:]}\n{out.stderr[-4000:]}")
        stamp.write_text(OMNIGENT_VERSION)
        return venv
