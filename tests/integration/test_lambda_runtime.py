"""The local Lambda runtime's worker pool leaves nothing behind, even when its stack is killed."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from skyloop.local.lambda_runtime import ProcessRuntime


def _entries() -> set[str]:
    return {p.name for p in Path(tempfile.gettempdir()).iterdir() if p.name.startswith("skyloop-lambda")}


def test_the_worker_socket_is_not_on_disk(monkeypatch: pytest.MonkeyPatch) -> None:
    """A stack killed with SIGKILL never runs ``close``; an abstract socket has no file to leak."""
    for name, value in (
        ("AWS_DEFAULT_REGION", "us-east-1"),
        ("AWS_ACCESS_KEY_ID", "x"),
        ("AWS_SECRET_ACCESS_KEY", "x"),
    ):
        monkeypatch.setenv(name, value)  # the workers build (and warm) their clients at start
    before = _entries()
    runtime = ProcessRuntime(["turn"], max_environments=2)
    try:
        assert _entries() == before
    finally:
        runtime.close()


def test_a_fork_server_that_cannot_start_fails_fast(monkeypatch: pytest.MonkeyPatch) -> None:
    """No credentials: the fork server's warm-up raises; the stack says so at once, not after a minute."""
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE", "AWS_SHARED_CREDENTIALS_FILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    with pytest.raises(RuntimeError, match="exited with status"):
        ProcessRuntime(["turn"], max_environments=2)
