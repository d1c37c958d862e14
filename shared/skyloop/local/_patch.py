"""Replace an attribute of a third-party class or module (the local stack's patches of moto)."""

from __future__ import annotations


def replace(owner: object, name: str, value: object) -> object:
    """Set ``owner.name`` to ``value`` and return what it was (for the undo)."""
    previous = getattr(owner, name)
    setattr(owner, name, value)
    return previous
