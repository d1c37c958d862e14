"""The live channel's functions start small: their import graphs leave out the model SDK, the web stack
and the turn engine (cold starts run on every new WebSocket burst and every fan-out scale-out)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from skyloop import manifest

HEAVY = (
    "openai",
    "starlette",
    "uvicorn",
    "httpx",
    "websockets",
    "yaml",
    "mcp",
    "skyloop.turns",
    "skyloop.api",
)
CHECK = """
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("handler", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
from skyloop import deps
deps.store(), deps.live_records()
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in {h.split(".")[0] for h in json.loads(sys.argv[2])})))
"""


@pytest.mark.parametrize("name", ["live", "push_fanout"])
def test_live_functions_import_no_heavy_module(name: str) -> None:
    # Given the function's handler file, imported in a fresh interpreter, with its store built
    env = {**os.environ, "AWS_DEFAULT_REGION": "us-east-1", "SKYLOOP_TABLE_NAME": "t"}
    proc = subprocess.run(
        [sys.executable, "-c", CHECK, str(manifest.by_name(name).handler_file), json.dumps(HEAVY)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=True,
    )
    loaded = set(json.loads(proc.stdout.strip().splitlines()[-1]))
    # Then none of the heavy packages was loaded on the way
    assert [h for h in HEAVY if h in loaded] == []
