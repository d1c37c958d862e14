"""Lambda tools for the local stack, from Python files the user names (``skyloop dev --lambda-tools``).

Every public function of such a file that takes ``(event, context)`` becomes a
local Lambda function of the same name: an agent declares it as
``{type: lambda, function: <name>}``, and the turn's state machine invokes it
through moto exactly as it invokes a deployed function in the cloud. The file
is loaded by each local execution environment that runs one of its tools, so
a tool keeps module state between invocations the way a warm Lambda does.
"""

from __future__ import annotations

import importlib.util
import inspect
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable

ENV = "SKYLOOP_LAMBDA_TOOLS"  # os.pathsep-separated file paths, set by ``skyloop dev`` for its workers
_loaded: dict[str, dict[str, Callable[[dict[str, Any], Any], Any]]] = {}
_lock = threading.Lock()


def paths() -> list[Path]:
    return [Path(p) for p in os.environ.get(ENV, "").split(os.pathsep) if p]


def tools_in(path: Path) -> dict[str, Callable[[dict[str, Any], Any], Any]]:
    """The file's Lambda-shaped functions by name (the file is imported once per process)."""
    key = str(path.resolve())
    with _lock:
        if key not in _loaded:
            spec = importlib.util.spec_from_file_location(f"skyloop_lambda_tools_{len(_loaded)}", key)
            if spec is None or spec.loader is None:
                raise ImportError(f"cannot load Lambda tools from {path}")
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            _loaded[key] = {
                name: fn
                for name, fn in vars(module).items()
                if not name.startswith("_")
                and inspect.isfunction(fn)
                and fn.__module__ == module.__name__
                and len(inspect.signature(fn).parameters) == 2
            }
        return _loaded[key]


def all_tools() -> dict[str, Callable[[dict[str, Any], Any], Any]]:
    found: dict[str, Callable[[dict[str, Any], Any], Any]] = {}
    for path in paths():
        for name, fn in tools_in(path).items():
            if name in found:
                raise ValueError(f"two Lambda tool files define '{name}'")
            found[name] = fn
    return found


def handler(name: str) -> Callable[[dict[str, Any], Any], Any] | None:
    return all_tools().get(name)
