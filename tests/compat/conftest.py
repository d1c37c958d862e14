"""Compat fixtures: omnigent's real SDK and CLI (a cached Python 3.12 venv) against ``skyloop dev``.

The local stack and the scripted model are the e2e suite's fixtures, imported
here so both suites read the same. Without a Python 3.12 the suite fails,
saying how to get one: compatibility unchecked is not compatibility.
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.compat.omnigent_env import VenvError, ensure_venv
from tests.compat.tty import Tty
from tests.e2e.conftest import (  # noqa: F401  (fixtures shared with the e2e suite)
    http_client,
    live_runner_id,
    live_server,
    live_server_process,
    mock_llm_server_url,
)

HERE = Path(__file__).parent


@dataclass
class Omnigent:
    """The omnigent venv: run its CLI and Python with an isolated HOME."""

    venv: Path
    home: Path

    @property
    def python(self) -> str:
        return str(self.venv / "bin" / "python")

    def env(self, **extra: str) -> dict[str, str]:
        keep = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "LC_ALL", "TMPDIR", "TERM")}
        return {
            **keep,
            "HOME": str(self.home),
            "NO_PROXY": "127.0.0.1,localhost",
            "OMNIGENT_DISABLE_UPDATE_CHECK": "1",
            "PYTHONUNBUFFERED": "1",
            "COLUMNS": "400",  # rich folds long names in narrow tables
            **extra,
        }

    def cli(
        self, *args: str, cwd: Path | None = None, timeout: float = 60, stdin: str = ""
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.venv / "bin" / "omnigent"), *args],
            input=stdin,
            capture_output=True,
            text=True,
            cwd=cwd or self.home,
            env=self.env(),
            timeout=timeout,
            check=False,
        )

    def tty(self, *args: str, **env: str) -> Tty:
        """The CLI on a pseudo-terminal, for its interactive REPL (close it, or use ``with``).

        A theme is preset: on a first launch the REPL otherwise stops at its theme picker.
        """
        config = self.home / ".omnigent" / "config.yaml"
        if not config.exists():
            config.parent.mkdir(exist_ok=True)
            config.write_text("tui:\n  theme: light\n")
        return Tty([str(self.venv / "bin" / "omnigent"), *args], env=self.env(**env), cwd=self.home)

    def script(self, name: str, *args: str, timeout: float = 90, cwd: Path | None = None) -> Any:
        """Run ``tests/compat/<name>`` in the venv; it prints one JSON document last."""
        out = subprocess.run(
            [self.python, str(HERE / name), *args],
            capture_output=True,
            text=True,
            cwd=cwd or self.home,
            env=self.env(),
            timeout=timeout,
            check=False,
        )
        assert out.returncode == 0, (
            f"{name} failed ({out.returncode}):\n{out.stdout[-3000:]}\n{out.stderr[-5000:]}"
        )
        return json.loads(out.stdout.strip().splitlines()[-1])

    def validate_events(self, events: list[dict[str, Any]]) -> list[str | None]:
        out = subprocess.run(
            [self.python, str(HERE / "validate_events.py")],
            input=json.dumps(events),
            capture_output=True,
            text=True,
            env=self.env(),
            timeout=60,
            check=False,
        )
        assert out.returncode == 0, out.stderr[-4000:]
        return list(json.loads(out.stdout))


@pytest.fixture(scope="session")
def omnigent_venv(request: pytest.FixtureRequest) -> Path:
    try:
        return ensure_venv(Path(str(request.config.rootpath)) / ".pytest_cache")
    except VenvError as exc:
        pytest.fail(str(exc), pytrace=False)


@pytest.fixture
def omnigent(omnigent_venv: Path, tmp_path: Path) -> Omnigent:
    home = tmp_path / "home"
    home.mkdir()
    return Omnigent(omnigent_venv, home)
