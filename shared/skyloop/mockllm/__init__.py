"""A scripted, OpenAI-compatible model server for tests and the offline local stack.

Compatible with omnigent's test mock control API and routing
(``/mock/configure``, ``/mock/reset``, ``/mock/set_fallback``,
``/mock/requests``, ``/gate/*``, ``/stats``), but its ``/v1/responses`` stream
is a real Responses event stream that the official ``openai`` SDK parses into
typed events.
"""

from __future__ import annotations

import uvicorn

from skyloop.mockllm._app import create_app
from skyloop.mockllm._state import MockState, QueuedResponse, ToolCall

__all__ = ["MockState", "QueuedResponse", "ToolCall", "create_app", "serve"]


def serve(host: str = "127.0.0.1", port: int = 8089) -> None:
    """Run the mock in the foreground until interrupted (what ``skyloop mock-llm`` calls)."""
    uvicorn.run(create_app(), host=host, port=port, log_level="warning")
