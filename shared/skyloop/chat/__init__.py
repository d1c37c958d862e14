"""The terminal client: ``skyloop chat``, ``skyloop sessions`` and ``skyloop agents``.

Built on the SDK (:mod:`skyloop.client`): a chat is a session whose turns run
through ``Session.send`` with a client-side tool set, rendered live. The
``skyloop`` command imports this package only when one of these commands
runs, so ``skyloop dev`` never pays for it.
"""

from __future__ import annotations

from skyloop.chat._commands import agents_command, chat_command, run, sessions_command
from skyloop.chat._render import Renderer, Style
from skyloop.chat._repl import ChatRepl

__all__ = ["ChatRepl", "Renderer", "Style", "agents_command", "chat_command", "run", "sessions_command"]
