"""Token usage reaches CloudWatch as embedded-metric-format lines with an ``agent`` dimension."""

from __future__ import annotations

import json

import pytest

from skyloop.harnesses.base import Usage
from skyloop.observability import token_metrics


def test_each_model_calls_tokens_are_metrics_per_agent(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "false")
    token_metrics("coder", Usage(input_tokens=120, output_tokens=9))
    blobs = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.strip()]
    values = {name: blob[name] for blob in blobs for name in ("InputTokens", "OutputTokens") if name in blob}
    assert values == {"InputTokens": [120.0], "OutputTokens": [9.0]}
    for blob in blobs:
        (directive,) = blob["_aws"]["CloudWatchMetrics"]
        assert directive["Namespace"] == "skyloop"
        assert directive["Dimensions"] == [["agent", "service"]]
        assert blob["agent"] == "coder"


def test_disabled_metrics_write_nothing(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")
    token_metrics("coder", Usage(input_tokens=1, output_tokens=1))
    assert capsys.readouterr().out == ""
