"""The runners a deployment offers to sessions (omnigent's notion): one Step Functions turn machine."""

from __future__ import annotations

from typing import Any


class Runners:
    """The runners of this deployment: one Step Functions turn machine, always online."""

    def __init__(self, default_runner_id: str, *, online: bool = True) -> None:
        self.default_runner_id = default_runner_id
        self.online = online

    def is_registered(self, runner_id: str) -> bool:
        return runner_id == self.default_runner_id

    def is_online(self, runner_id: str | None) -> bool:
        return bool(runner_id) and self.is_registered(runner_id or "") and self.online

    def list(self) -> dict[str, Any]:
        return {
            "object": "list",
            "data": [
                {
                    "runner_id": self.default_runner_id,
                    "online": self.online,
                    "kind": "stepfunctions",
                    "harnesses": ["openai-agents"],
                }
            ],
        }
