"""Infra fixtures: the CDK app synthesized once, offline, exactly as ``make synth`` runs it.

``synth`` (session scope) runs ``python infra/app.py`` in a subprocess into a
temporary cloud assembly, with cdk-nag attached as in production and the
dependencies layer pointed at a missing folder, so the suite needs neither
network nor a built layer (synth then uses the placeholder and warns). Test
modules read the template, the validation report and the staged assets from it.
``host_build`` (session scope) is the dependencies layer built from the lock for
this machine, cached in ``.pytest_cache``: the artifact tests run the handlers on it.
"""

from __future__ import annotations

import fcntl
import importlib.util
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from types import ModuleType

    from aws_cdk.assertions import Template

ROOT = Path(__file__).resolve().parents[2]
STACK_NAME = "Skyloop"

# Set before the first `import aws_cdk` starts the jsii kernel (node reads them at start), as
# infra/app.py does: silence the Node 20 end-of-life banner, skip construct stack traces, and skip
# CDK's built-in template validation (slow, warnings only; test_checks runs cfn-lint instead).
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
os.environ.setdefault("CDK_DISABLE_STACK_TRACE", "1")
os.environ.setdefault("CDK_VALIDATION", "false")


@dataclass(frozen=True)
class Synth:
    outdir: Path
    returncode: int
    stderr: str
    seconds: float

    @property
    def template_path(self) -> Path:
        return self.outdir / f"{STACK_NAME}.template.json"

    @property
    def template(self) -> dict[str, Any]:
        return json.loads(self.template_path.read_text())

    @property
    def validation_report(self) -> dict[str, Any]:
        return json.loads((self.outdir / "validation-report.json").read_text())

    @property
    def metadata(self) -> dict[str, Any]:
        return json.loads((self.outdir / f"{STACK_NAME}.metadata.json").read_text())

    def asset_dir(self, s3_key: str) -> Path:
        return self.outdir / f"asset.{s3_key.removesuffix('.zip')}"


@pytest.fixture(scope="session")
def synth(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """One synthesis per run: the pytest-xdist workers share it (the first one to ask runs it, under a lock;
    the tests only read the assembly)."""
    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent  # the run's directory, above each worker's own
    outdir = shared / "cdk.out"
    record = shared / "cdk.out.json"
    with (shared / "cdk.out.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not record.exists():
            result = _synthesize(outdir)
            record.write_text(
                json.dumps(
                    {"returncode": result.returncode, "stderr": result.stderr, "seconds": result.seconds}
                )
            )
    done = json.loads(record.read_text())
    result = Synth(outdir, done["returncode"], done["stderr"], done["seconds"])
    if not result.template_path.exists():
        pytest.fail(f"synth wrote no template (rc={result.returncode}):\n{result.stderr[-4000:]}")
    return result


def _synthesize(outdir: Path) -> Synth:
    outdir.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "CDK_OUTDIR": str(outdir),
        "SKYLOOP_LAYER_DIR": str(outdir / "no-layer-here"),
        # nor on a built console (npm): synth uploads a placeholder page and says so
        "SKYLOOP_CONSOLE_DIR": str(outdir / "no-console-here"),
    }
    env.pop("CDK_CONTEXT_JSON", None)  # the app reads cdk.json's context, as `cdk synth` would pass it
    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, str(ROOT / "infra" / "app.py")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    result = Synth(outdir, proc.returncode, proc.stderr, time.perf_counter() - started)
    print(f"\nsynth: {result.seconds:.1f} s (rc={proc.returncode})")
    return result


@dataclass(frozen=True)
class TargetPython:
    """The local CPython of the functions' version: runs the artifacts as Lambda would."""

    path: Path
    magic: bytes  # importlib.util.MAGIC_NUMBER of that version: the first 4 bytes of its pycs


@pytest.fixture(scope="session")
def target_python() -> TargetPython:
    """Fails (never skips) without it: the artifact checks are the point of this suite."""
    from infra import target_python as tp

    python = tp.find()
    if python is None:
        pytest.fail(
            f"tests/infra runs the built artifacts under CPython 3.12 and found none: {tp.HOW_TO_GET}"
        )
    out = subprocess.run(
        [str(python), "-I", "-c", "import importlib.util as u; print(u.MAGIC_NUMBER.hex())"],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    return TargetPython(python, bytes.fromhex(out.stdout.strip()))


def _load_build_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("skyloop_layer_build", ROOT / "layers" / "build.py")
    assert spec
    assert spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def host_build(request: pytest.FixtureRequest, target_python: TargetPython) -> tuple[Path, Path]:
    """``(layer, runtime)`` for this machine, from the locks, cached in .pytest_cache."""
    build = _load_build_script()
    cache_root = Path(request.config.cache.mkdir("skyloop-host-build"))
    try:
        return build.ensure_host_build(cache_root)  # type: ignore[no-any-return]
    except SystemExit as exc:  # pip failed
        pytest.fail(
            f"building the layer from layers/requirements.lock failed (pip exit {exc.code}; network?)"
        )


@pytest.fixture(scope="module")
def template_json(synth: Synth) -> dict[str, Any]:
    return synth.template


@pytest.fixture(scope="module")
def template(template_json: dict[str, Any]) -> Template:
    from aws_cdk.assertions import Template

    return Template.from_json(template_json)
