"""Client-side tool sets: tools a client runs on its own machine when the model calls them.

The service parks a client tool call until the client answers it; a tool set
gives the client the schemas to declare (``TOOLS``) and a dispatcher that
always produces an answer (``execute_tool``). Sets are imported lazily so a
client only pays for the one it uses.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import types

__all__ = ["available_tool_sets", "get_tool_set"]

# Known sets, by module name under this package. A fixed list (rather than
# importing whatever name is asked for) keeps user input from importing
# arbitrary modules.
_TOOL_SETS: tuple[str, ...] = ("coding",)


def available_tool_sets() -> list[str]:
    """Names accepted by :func:`get_tool_set`, for help text and error messages."""
    return list(_TOOL_SETS)


def get_tool_set(name: str) -> types.ModuleType:
    """Import the tool set ``name``; raises ``ValueError`` (not ``SystemExit``) so callers decide."""
    if name not in _TOOL_SETS:
        raise ValueError(f"unknown tool set {name!r} (available: {', '.join(_TOOL_SETS)})")
    return importlib.import_module(f"{__name__}.{name}")
