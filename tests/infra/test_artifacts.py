"""The built artifacts, run as Lambda runs them: function assets from synth, the layer from its lock.

The layer is built for this machine from ``layers/requirements.lock`` (the same
lock, wheels for the host instead of arm64; ``layers/build.py --host``), with a
stand-in for the runtime's own boto3 and botocore from ``layers/runtime.lock``,
and cached under ``.pytest_cache`` while the locks are unchanged (the first
build downloads about 40 MB of wheels). Each handler is then imported by an
isolated CPython 3.12 (``-I -S``: no site-packages, no venv, no PYTHON*
variables; ``-B``: read-only, as /var/task and /opt are) whose ``sys.path`` is
what Lambda's is: the function's asset, the layer, the runtime's packages and
the standard library.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from infra import constants as C
from skyloop import manifest
from tests.infra.helpers import bytecode_problems, function

if TYPE_CHECKING:
    from tests.infra.conftest import Synth, TargetPython

ROOT = manifest.PROJECT_ROOT

# Run by the target interpreter: put the artifacts on sys.path in Lambda's order, import the entry
# point, and report where every module came from and whether its bytecode was there to load.
LAMBDA_IMPORT = """
import importlib, json, sys, sysconfig
task, layer, runtime, targets = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
ours = [task, f"{layer}/python/lib/python3.12/site-packages", f"{layer}/python", f"{runtime}/python"]
sys.path[:0] = ours
for target in targets:
    module, _, attr = target.partition(":")
    loaded = importlib.import_module(module)
    if attr:
        assert callable(getattr(loaded, attr)), target
stdlib = (sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["platstdlib"])
files = {n: getattr(m, "__file__", None) for n, m in list(sys.modules.items())}
observability = sys.modules.get("skyloop.observability")
print(json.dumps({
    "sys_path": sys.path,
    "outside": sorted(f for f in files.values() if f and not f.startswith((*ours, *stdlib))),
    "uncached": sorted(
        m.__file__ for m in list(sys.modules.values())
        if getattr(m, "__file__", "") and m.__file__.endswith(".py") and m.__file__.startswith(tuple(ours))
        and not (getattr(m, "__cached__", None) and __import__("os").path.exists(m.__cached__))
    ),
    "skyloop": files.get("skyloop"),
    "tracer": type(observability.tracer).__name__ if observability else None,
    "xray": "aws_xray_sdk.core" in sys.modules,
    "modules": sorted(sys.modules),
}))
"""


# Packages no handler may import at module level: each costs a cold start tens to hundreds of
# milliseconds and is imported where it is first used (the model call, an MCP tool, a JWT, a bundle).
_HEAVY = frozenset(
    {"openai", "httpx", "mcp", "jwt", "cryptography", "websockets", "yaml", "uvicorn", "starlette"}
)
DEFERRED: dict[str, frozenset[str]] = {
    f.name: _HEAVY
    - ({"uvicorn", "starlette", "anyio"} if f.streaming else set())
    - ({"yaml"} if f.name == "api" else set())
    for f in manifest.FUNCTIONS
}


def _entry_points(code: Path, spec: manifest.FunctionSpec) -> list[str]:
    """What Lambda imports: ``handler`` (then its attribute), or what run.sh's ``python -m`` runs."""
    if spec.handler.endswith(".sh"):
        text = (code / spec.handler).read_text()
        runner = re.search(r"exec python -m ([\w.]+)", text)
        app = re.search(r"\b([a-z_][\w.]*):([a-z_]\w*)\s*$", text.strip())
        assert runner, "run.sh runs no `python -m` module"
        assert app, "run.sh names no ASGI app"
        return [runner[1], f"{app[1]}:{app[2]}"]
    module, attr = spec.handler.rsplit(".", 1)
    return [f"{module}:{attr}"]


def _lambda_environment(
    synth: Synth, spec: manifest.FunctionSpec, code: Path, tracer: bool
) -> dict[str, str]:
    """The function's variables from the template (references as placeholders), plus Lambda's own."""
    variables = function(synth.template, spec.name)[1]["Properties"]["Environment"]["Variables"]
    env = {k: v if isinstance(v, str) else f"placeholder-{k.lower()}" for k, v in variables.items()}
    env.pop(
        "SKYLOOP_PREWARM", None
    )  # an import test: no warm-up invocations (tests/integration/test_prewarm)
    if tracer:  # what -c powertoolsTracer=true sets (tests/infra/test_context.py)
        env["POWERTOOLS_TRACE_DISABLED"] = "false"
    return {
        **env,
        "PATH": "/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "TZ": ":UTC",
        "AWS_REGION": "us-east-1",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_EXECUTION_ENV": f"AWS_Lambda_python{C.LAMBDA_PYTHON_VERSION}",
        "AWS_LAMBDA_FUNCTION_NAME": f"Skyloop-{spec.name}",
        "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(spec.memory_mb),
        "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
        "LAMBDA_TASK_ROOT": str(code),
        "_HANDLER": spec.handler,
    }


@pytest.mark.parametrize("tracer", [False, True], ids=["tracer-off", "tracer-on"])
@pytest.mark.parametrize("spec", manifest.FUNCTIONS, ids=lambda f: f.name)
def test_handler_imports_from_the_artifacts_alone(
    synth: Synth,
    target_python: TargetPython,
    host_build: tuple[Path, Path],
    spec: manifest.FunctionSpec,
    tracer: bool,
) -> None:
    # Given the function's asset from synth and the layer built from the lock
    code = synth.asset_dir(function(synth.template, spec.name)[1]["Properties"]["Code"]["S3Key"])
    layer, runtime = host_build
    # When an isolated CPython 3.12 imports the entry point with the function's environment
    proc = subprocess.run(
        [
            *(str(target_python.path), "-I", "-S", "-B", "-c", LAMBDA_IMPORT),
            *(str(code), str(layer), str(runtime)),
            *_entry_points(code, spec),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=_lambda_environment(synth, spec, code, tracer),
        cwd=code,
        check=False,
    )
    # Then it imports, with the Powertools tracer on as well (its X-Ray SDK comes from the layer)
    assert proc.returncode == 0, proc.stderr[-4000:]
    report = json.loads(proc.stdout)
    # And nothing came from outside the artifacts and the standard library (no site-packages)
    assert report["outside"] == []
    assert not [p for p in report["sys_path"] if "site-packages" in p and not p.startswith(str(layer))]
    # And the package is the function's own copy
    assert report["skyloop"].startswith(str(code))
    # And every module of the artifacts found its 3.12 bytecode
    assert report["uncached"] == []
    # And the import stays within the function's budget: no package its cold start defers, and no more
    # modules than the manifest allows (a new import at module level shows up here, not in production)
    if not tracer:
        loaded = {m.split(".")[0] for m in report["modules"]}
        assert not loaded & DEFERRED[spec.name], sorted(loaded & DEFERRED[spec.name])
        print(f"{spec.name}: {len(report['modules'])} modules at import (budget {spec.import_budget})")
        assert len(report["modules"]) <= spec.import_budget, (len(report["modules"]), spec.import_budget)
    # And the handlers' tracer is Powertools' (X-Ray SDK loaded) exactly when the switch is on;
    # the stream app traces through Lambda's active tracing only
    if spec.streaming:
        assert report["tracer"] is None
    else:
        assert report["tracer"] == ("Tracer" if tracer else "_NoTracer")
        assert report["xray"] is tracer


def test_layer_carries_unchecked_312_bytecode(
    host_build: tuple[Path, Path], target_python: TargetPython
) -> None:
    layer, _ = host_build
    assert bytecode_problems(layer / "python", target_python.magic) == []
    # And the code objects name the files where Lambda mounts the layer
    pyc = layer / "python" / "pydantic" / "__pycache__" / "__init__.cpython-312.pyc"
    assert b"/opt/python/pydantic/__init__.py" in pyc.read_bytes()


def _distributions(folder: Path) -> dict[str, Any]:
    from importlib.metadata import distributions

    from packaging.utils import canonicalize_name

    return {canonicalize_name(d.metadata["Name"]): d for d in distributions(path=[str(folder)])}


def test_layer_is_exactly_the_lock_and_needs_nothing_else(host_build: tuple[Path, Path]) -> None:
    from packaging.markers import default_environment
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    layer, runtime = host_build
    installed = _distributions(layer / "python")
    provided = {**_distributions(runtime / "python"), **installed}
    # Then the layer holds the lock's packages at the lock's versions, nothing more
    lines = [
        line.split("#", 1)[0].strip()
        for line in (ROOT / "layers" / "requirements.lock").read_text().splitlines()
    ]
    locked = {canonicalize_name(r.name): r for r in map(Requirement, filter(None, lines))}
    assert {n: d.version for n, d in installed.items()} == {
        n: next(iter(r.specifier)).version for n, r in locked.items()
    }
    # And every requirement of every package (with the extras the lock asks for) is met by the
    # layer or the runtime, for CPython 3.12 on this platform
    env = {**default_environment(), "python_version": C.LAMBDA_PYTHON_VERSION}
    missing = []
    for name, dist in installed.items():
        for raw in dist.requires or []:
            needed = Requirement(raw)
            extras = locked[name].extras or {""}
            if needed.marker and not any(needed.marker.evaluate({**env, "extra": e}) for e in extras):
                continue
            have = provided.get(canonicalize_name(needed.name))
            if have is None or not needed.specifier.contains(have.version, prereleases=True):
                missing.append(f"{name} needs {needed}, has {have.version if have else None}")
    assert missing == []


def test_a_missing_target_python_fails_with_how_to_get_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from infra import target_python as tp

    monkeypatch.setattr(tp, "find", lambda: None)
    with pytest.raises(tp.TargetPythonMissingError, match=r"pyenv install 3\.12"):
        tp.require("the artifact checks")


def test_target_python_is_cpython_of_the_lambda_version(target_python: TargetPython) -> None:
    out = subprocess.run(
        [
            str(target_python.path),
            "-I",
            "-c",
            "import sys; print(sys.implementation.name, sys.version_info[:2])",
        ],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout.strip()
    assert out == f"cpython ({C.LAMBDA_PYTHON_VERSION.replace('.', ', ')})"
    assert os.path.realpath(target_python.path) != os.path.realpath(sys.executable)
