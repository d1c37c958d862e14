"""Runs in the omnigent venv: GET /v1/info and /api/version, validated with omnigent's own models."""

import json
import sys

import httpx
from omnigent.server.app import ServerInfoResponse

base = sys.argv[1]
info = ServerInfoResponse.model_validate(httpx.get(f"{base}/v1/info").json())
version = httpx.get(f"{base}/api/version").json()["version"]
print(json.dumps({"agent_install": info.agent_install, "version": version, "valid": True}))
