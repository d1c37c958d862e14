"""Make what the test suite builds on first use, before pytest starts (``make test`` runs this beside the checks).

Two builds are cached in ``.pytest_cache`` and were made inside a pytest worker on a fresh clone, holding
that worker up for their length: omnigent's Python 3.12 venv for the compat suite (~40 s, mostly pip) and
this machine's build of the Lambda layer for the artifact tests (~10 s). Here they are made by the same
functions the fixtures call, into the same places, so the fixtures find them made; and skyloop's own
modules are compiled once, rather than by each of the first processes the suite starts at once.
Nothing here is needed: without it the fixtures make the same things, later.
"""

from __future__ import annotations

import compileall
import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# pytest's cache directory, and where ``config.cache.mkdir(name)`` puts a fixture's directory under it
PYTEST_CACHE = ROOT / ".pytest_cache"
HOST_BUILD = PYTEST_CACHE / "d" / "skyloop-host-build"  # tests/infra/conftest.py's host_build


def main() -> int:
    sys.path.insert(0, str(ROOT))
    from tests.compat.omnigent_env import ensure_venv

    for folder in ("shared", "functions"):
        compileall.compile_dir(ROOT / folder, quiet=1, workers=0)
    spec = importlib.util.spec_from_file_location("layer_build", ROOT / "layers" / "build.py")
    assert spec is not None
    assert spec.loader is not None
    build = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build)
    HOST_BUILD.mkdir(parents=True, exist_ok=True)
    steps = {
        "the layer for this machine": lambda: build.ensure_host_build(HOST_BUILD),
        "omnigent's venv": lambda: ensure_venv(PYTEST_CACHE),
    }
    for what, step in steps.items():
        try:
            step()
        except (Exception, SystemExit) as exc:  # the fixture that needs it fails on it, with the whole story
            print(
                f"prepare_test_caches: {what} was not made ({exc!r}); the tests that need it say why",
                file=sys.stderr,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
