"""Cold-import cost of each Lambda handler, as a ratio to a bare interpreter start.

Three ways, each against its own bare start (``python -c pass`` with the same flags):

* ``venv``: the handler file imported by this interpreter from the development
  venv (the working tree's ``skyloop``, the venv's site-packages).
* ``built``: the deployable artifacts, as Lambda runs them: the function's staged
  asset (``infra.assets``) and the dependencies layer built from
  ``layers/requirements.lock`` for this machine (``layers/build.py --host``), plus
  a stand-in for the runtime's boto3, on ``sys.path`` of an isolated CPython 3.12
  (``-I -S``: no venv, no site-packages; ``-B``: read-only, as /var/task and /opt
  are), with their 3.12 bytecode.
* ``built_source_only``: the same artifacts with the layer's and the asset's
  bytecode removed (what was shipped before): every module compiles on every
  start. The runtime stand-in keeps its bytecode in both (AWS's runtime ships its own).
* ``built_turn_steps_combined``: what one function serving every turn step would import on its
  cold start: every step handler (``asl_key`` entries of the manifest), loaded from its staged
  asset into one isolated CPython 3.12, against ``built``'s per-step figures (their sum is what
  a turn whose every step starts cold pays with one function per step).

Each start is the minimum of N runs, so other load on the machine mostly drops
out. Writes JSON to ``bench/results/import_time.json``.

    .venv/bin/python bench/import_time.py --runs 7
    .venv/bin/python bench/import_time.py --runs 7 --tracer   # with -c powertoolsTracer=true
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "shared"), str(ROOT)]

from infra import assets, target_python  # noqa: E402
from skyloop import manifest  # noqa: E402

LOADER = (
    "import importlib.util as u; s = u.spec_from_file_location('h', {path!r}); "
    "m = u.module_from_spec(s); s.loader.exec_module(m)"
)
# Lambda's sys.path order: the task root, the layer, the runtime's packages, the standard library.
BUILT_LOADER = (
    "import importlib, sys; task, layer, runtime = sys.argv[1:4]; "
    "sys.path[:0] = [task, layer + '/python/lib/python3.12/site-packages', layer + '/python', runtime + '/python']; "
    "[importlib.import_module(m) for m in sys.argv[4:]]"
)
# Every step handler in one interpreter: each handler.py under its own module name, the package once.
COMBINED_LOADER = (
    "import importlib.util as u, sys; task, layer, runtime = sys.argv[1:4]; "
    "sys.path[:0] = [task, layer + '/python/lib/python3.12/site-packages', layer + '/python', runtime + '/python']; "
    "[u.spec_from_file_location(f'h{i}', p).loader.exec_module(u.module_from_spec(u.spec_from_file_location(f'h{i}', p))) "
    "for i, p in enumerate(sys.argv[4:])]"
)


def _environment(tracer: bool) -> dict[str, str]:
    """The deployed configuration (infra/constructs/functions.py): the Powertools tracer is opt-in."""
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_REGION": "us-east-1",
        "AWS_LAMBDA_FUNCTION_NAME": "bench",
        "LAMBDA_TASK_ROOT": "/var/task",
        "SKYLOOP_TABLE_NAME": "bench",
        "POWERTOOLS_SERVICE_NAME": "skyloop",
        "POWERTOOLS_METRICS_NAMESPACE": "skyloop",
        "POWERTOOLS_TRACE_DISABLED": "false" if tracer else "true",
    }


def _best(cmd: list[str], runs: int, env: dict[str, str], cwd: Path | None = None) -> float:
    best = float("inf")
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True, env=env, cwd=cwd)
        best = min(best, time.perf_counter() - start)
    return best


def _modules(spec: manifest.FunctionSpec) -> list[str]:
    """What Lambda imports for the function: ``handler``, or run.sh's uvicorn and the ASGI app."""
    return ["uvicorn", "skyloop.stream"] if spec.streaming else [spec.handler.rsplit(".", 1)[0]]


def _without_bytecode(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return dst


def _host_build() -> tuple[Path, Path]:
    spec = importlib.util.spec_from_file_location("skyloop_layer_build", ROOT / "layers" / "build.py")
    assert spec
    assert spec.loader
    build = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build)
    return build.ensure_host_build(ROOT / "bench" / "results" / "host-build")  # type: ignore[no-any-return]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--tracer", action="store_true", help="with the Powertools tracer on")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "import_time.json")
    args = parser.parse_args()
    env = _environment(args.tracer)
    python312 = target_python.require("measuring the built artifacts")

    results: dict[str, dict[str, object]] = {}
    # venv: this interpreter, the working tree's package and the venv's site-packages
    venv_env = {**os.environ, **env, "PYTHONPATH": str(ROOT / "shared")}
    bare = _best([sys.executable, "-c", "pass"], args.runs, venv_env)
    venv = {}
    for fn in manifest.FUNCTIONS:
        target = (
            "import uvicorn, skyloop.stream" if fn.streaming else LOADER.format(path=str(fn.handler_file))
        )
        venv[fn.name] = _best([sys.executable, "-c", target], args.runs, venv_env)
    results["venv"] = {"python": sys.executable, "bare_s": round(bare, 4), "handlers": _ratios(venv, bare)}

    # built: the staged assets and the host layer, under an isolated CPython 3.12
    layer, runtime = _host_build()
    flags = [str(python312), "-I", "-S", "-B"]
    bare_built = _best([*flags, "-c", "pass"], args.runs, env)
    with tempfile.TemporaryDirectory(prefix="skyloop-bench-") as tmp:
        source_layer = _without_bytecode(layer, Path(tmp) / "layer")
        for mode, layer_dir in (("built", layer), ("built_source_only", source_layer)):
            rows = {}
            for fn in manifest.FUNCTIONS:
                task = assets.stage_function(fn)
                if mode == "built_source_only":
                    task = _without_bytecode(task, Path(tmp) / "functions" / fn.name)
                cmd = [*flags, "-c", BUILT_LOADER, str(task), str(layer_dir), str(runtime), *_modules(fn)]
                rows[fn.name] = _best(cmd, args.runs, {**env, "LAMBDA_TASK_ROOT": str(task)}, cwd=task)
            results[mode] = {
                "python": str(python312),
                "bare_s": round(bare_built, 4),
                "handlers": _ratios(rows, bare_built),
            }

    steps = [fn for fn in manifest.FUNCTIONS if fn.asl_key]
    first = assets.stage_function(steps[0])
    handler_files = [str(assets.stage_function(fn) / "handler.py") for fn in steps]
    combined = _best(
        [*flags, "-c", COMBINED_LOADER, str(first), str(layer), str(runtime), *handler_files],
        args.runs,
        {**env, "LAMBDA_TASK_ROOT": str(first)},
        cwd=first,
    )
    built_rows = results["built"]["handlers"]
    separate = {fn.name: built_rows[fn.name]["seconds"] for fn in steps}  # type: ignore[index]
    results["built_turn_steps_combined"] = {
        "steps": [fn.name for fn in steps],
        "combined_s": round(combined, 4),
        "separate_sum_s": round(sum(separate.values()), 4),
        "separate_max_s": round(max(separate.values()), 4),
        "bare_s": round(bare_built, 4),
    }

    report = {
        "date": time.strftime("%Y-%m-%d"),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
        "runs": args.runs,
        "powertools_tracer": args.tracer,
        **results,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(
        f"bare interpreter: venv {results['venv']['bare_s'] * 1000:.0f} ms, "  # type: ignore[operator]
        f"isolated 3.12 {bare_built * 1000:.0f} ms; tracer {'on' if args.tracer else 'off'}"
    )
    print(f"{'':14s} {'venv':>16s} {'built (bytecode)':>18s} {'built (source)':>18s}")
    for fn in manifest.FUNCTIONS:
        cells = []
        for mode in ("venv", "built", "built_source_only"):
            row = results[mode]["handlers"][fn.name]  # type: ignore[index]
            cells.append(f"{row['seconds'] * 1000:6.0f} ms x{row['ratio_to_bare']:<5}")
        print(f"{fn.name:14s} {cells[0]:>16s} {cells[1]:>18s} {cells[2]:>18s}")
    c = results["built_turn_steps_combined"]
    print(
        f"every turn step in one function: {c['combined_s'] * 1000:.0f} ms (separate: "  # type: ignore[operator]
        f"sum {c['separate_sum_s'] * 1000:.0f} ms, largest {c['separate_max_s'] * 1000:.0f} ms)"  # type: ignore[operator]
    )
    return 0


def _ratios(rows: dict[str, float], bare: float) -> dict[str, dict[str, float]]:
    return {n: {"seconds": round(s, 4), "ratio_to_bare": round(s / bare, 2)} for n, s in rows.items()}


if __name__ == "__main__":
    sys.exit(main())
