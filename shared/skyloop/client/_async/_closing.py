"""``async with`` for everything the client hands out that holds a connection: leaving the block closes it."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from types import TracebackType
    from typing import Self

__all__ = ["AsyncClosing"]


class AsyncClosing:
    """A context manager that calls :meth:`aclose` on the way out, however the block ends."""

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        raise NotImplementedError
