"""Model harnesses: how a turn's model call is made for each ``executor.harness``.

=====================  ==========================================  =============================
harness                module                                      provider
=====================  ==========================================  =============================
``openai-agents``      :mod:`skyloop.harnesses.openai_responses`   OpenAI Responses API (openai SDK)
``chat-completions``   :mod:`skyloop.harnesses.chat_completions`   any Chat Completions server
``bedrock-converse``   :mod:`skyloop.harnesses.bedrock_converse`   Amazon Bedrock Converse (boto3)
=====================  ==========================================  =============================

Each module is imported only when an agent that uses it makes a model call.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from skyloop.harnesses.base import FunctionCall, ModelResult, Usage

if TYPE_CHECKING:
    from skyloop.harnesses.base import ModelCaller

MODULES = {
    "openai-agents": "skyloop.harnesses.openai_responses",
    "chat-completions": "skyloop.harnesses.chat_completions",
    "bedrock-converse": "skyloop.harnesses.bedrock_converse",
}


def caller_for(harness: str) -> ModelCaller:
    """The ``call_model`` of the harness an agent names (imported on first use)."""
    try:
        module = MODULES[harness]
    except KeyError:
        raise ValueError(f"unknown harness {harness!r} (known: {', '.join(MODULES)})") from None
    caller: ModelCaller = importlib.import_module(module).call_model
    return caller


__all__ = ["MODULES", "FunctionCall", "ModelResult", "Usage", "caller_for"]
