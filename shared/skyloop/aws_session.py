"""One botocore loader per process, shared by every session (no settings, no pydantic: cheap to import).

:func:`skyloop.deps.session` builds the process's one boto3 Session on it;
the local stack's processes also give it to the sessions moto and its Step
Functions interpreter build (:func:`share_loader`).
"""

from __future__ import annotations

import threading
from typing import Any

_loader_lock = threading.Lock()
_loaders: dict[str | None, Any] = {}


class _SearchPaths(list[str]):
    """A shared loader's search paths: every boto3 Session appends its data directory, kept once."""

    def append(self, path: str) -> None:
        if path not in self:
            super().append(path)


def shared_loader(data_path: str | None = None) -> Any:
    """This process's botocore loader (one per ``AWS_DATA_PATH``), so each JSON model is parsed once.

    A loader caches what it parsed (service models, ``endpoints.json``...), but
    every botocore session builds its own: a session per client parsed the
    same files once per client (~6 MB per client here).
    """
    with _loader_lock:
        loader = _loaders.get(data_path)
        if loader is None:
            from botocore.loaders import create_loader

            loader = create_loader(data_path)
            loader._search_paths = _SearchPaths(loader.search_paths)
            _loaders[data_path] = loader
        return loader


def share_loader() -> None:
    """Every botocore session made in this process from now on uses :func:`shared_loader`.

    For the local stack's processes, where moto and the Step Functions
    interpreter build sessions and clients of their own.
    """
    import botocore.session

    def register(self: Any) -> None:
        self._components.lazy_register_component(
            "data_loader", lambda: shared_loader(self.get_config_variable("data_path"))
        )

    botocore.session.Session._register_data_loader = register


def release() -> None:
    """Drop what the shared loaders parsed (a process that builds no more clients: the DynamoDB process).

    Anything asked for again is parsed again; clients already built keep their own models.
    """
    with _loader_lock:
        for loader in _loaders.values():
            loader._cache.clear()
