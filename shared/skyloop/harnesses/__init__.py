"""Model harnesses: how a turn's model call is made for each ``executor.harness``.

=====================  ==========================================  =============================
harness                module                                      provider
=====================  ==========================================  =============================
``openai-agents``      :mod:`skyloop.harnesses.openai_responses`   OpenAI Responses API (openai SDK)
``chat-completions``   :mod:`skyloop.harnesses.chat_completions`   any Chat Completions server
``bedrock-converse``   :mod:`skyloop.harnesses.bedrock_converse`   Amazon Bedrock Converse (boto3)
``scripted``           :mod:`skyloop.harnesses.scripted`           a script in the agent spec (tests)
=====================  ==========================================  =============================

Each module is imported only when an agent that uses it makes a model call.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from skyloop.harnesses.base import FunctionCall, ModelResult, Usage

if TYPE_CHECKING:
    from skyloop.harnesses.base import ModelCaller
    from skyloop.models.agent import AgentExecutor

MODULES = {
    "openai-agents": "skyloop.harnesses.openai_responses",
    "chat-completions": "skyloop.harnesses.chat_completions",
    "bedrock-converse": "skyloop.harnesses.bedrock_converse",
    "scripted": "skyloop.harnesses.scripted",
}


# Harnesses whose provider cannot fetch an image by URL: they take inline (data:) images only.
INLINE_IMAGES_ONLY = frozenset({"bedrock-converse"})


def image_refusal(executor: AgentExecutor, content: list[dict[str, Any]]) -> str | None:
    """Why a message's images cannot go to this agent's model, or None if they can (or there are none).

    Every harness maps images (Responses ``input_image``, Chat Completions
    ``image_url`` parts, Converse ``image`` blocks); an agent says its model is
    text-only with ``executor.accepts_images: false``, and Bedrock takes inline
    images only.
    """
    urls = [
        str(b.get("image_url", "")) for b in content if isinstance(b, dict) and b.get("type") == "input_image"
    ]
    if not urls:
        return None
    if not executor.accepts_images:
        return (
            f"this agent's model ({executor.model}) does not take images (executor.accepts_images is false)"
        )
    if executor.harness in INLINE_IMAGES_ONLY and any(not u.startswith("data:") for u in urls):
        return f"harness {executor.harness} takes inline images only: send a data:image/...;base64, URL"
    return None


def caller_for(harness: str) -> ModelCaller:
    """The ``call_model`` of the harness an agent names (imported on first use)."""
    try:
        module = MODULES[harness]
    except KeyError:
        raise ValueError(f"unknown harness {harness!r} (known: {', '.join(MODULES)})") from None
    caller: ModelCaller = importlib.import_module(module).call_model
    return caller


__all__ = ["MODULES", "FunctionCall", "ModelResult", "Usage", "caller_for", "image_refusal"]
