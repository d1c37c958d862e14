"""The web console's files (``console/dist``, built by ``make console``) as ``skyloop dev`` serves them.

The cloud serves the same files from S3 behind CloudFront (``infra/constructs/console.py``),
with the same rules: API paths keep their meaning, hashed assets are cached for a year,
``index.html`` never, and any other path without a file extension is a client route that
gets ``index.html`` (the single-page app's fallback).
"""

from __future__ import annotations

import mimetypes
import os
from pathlib import Path

from skyloop.manifest import PROJECT_ROOT

CONSOLE_DIR_ENV = "SKYLOOP_CONSOLE_DIR"
DEFAULT_DIR = PROJECT_ROOT / "console" / "dist"
# Paths the API owns (the API function's 404 JSON answers unknown ones), as CloudFront routes them.
API_PREFIXES = ("/v1/", "/openai/", "/anthropic/", "/api/")
API_PATHS = frozenset({"/v1", "/openai", "/anthropic", "/api", "/health", "/healthz", "/openapi.json"})
IMMUTABLE = "public, max-age=31536000, immutable"  # Vite names assets by content hash
NO_CACHE = "no-cache"
HOW_TO_BUILD = "make console  (npm ci and vite build in console/, into console/dist)"
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; connect-src 'self' https: http://127.0.0.1:* http://localhost:*; img-src 'self' data:; style-src 'self'; "
    "script-src 'self'; frame-ancestors 'none'; base-uri 'self'; form-action 'self' https:"
)


def console_dir() -> Path:
    return Path(os.environ.get(CONSOLE_DIR_ENV) or DEFAULT_DIR)


def is_api_path(path: str) -> bool:
    return path in API_PATHS or path.startswith(API_PREFIXES)


def resolve(root: Path, path: str) -> tuple[Path, str] | None:
    """The file for a console ``path`` and its Cache-Control, or None (404).

    Never leaves ``root`` (``..`` and absolute parts are refused); a path without an
    extension that names no file is a client route: ``index.html``.
    """
    index = root / "index.html"
    relative = path.lstrip("/")
    if not relative:
        return (index, NO_CACHE) if index.is_file() else None
    candidate = (root / relative).resolve()
    if not candidate.is_relative_to(root.resolve()):
        return None
    if candidate.is_file():
        cache = IMMUTABLE if relative.startswith("assets/") else NO_CACHE
        return candidate, cache
    if "." in relative.rsplit("/", 1)[-1]:
        return None
    return (index, NO_CACHE) if index.is_file() else None


# Fixed for what Vite writes, so the answer never depends on the machine's mime.types.
CONTENT_TYPES = {
    ".html": "text/html",
    ".js": "text/javascript",
    ".css": "text/css",
    ".json": "application/json",
    ".svg": "image/svg+xml",
}


def content_type(path: Path) -> str:
    guessed = (
        CONTENT_TYPES.get(path.suffix) or mimetypes.guess_type(path.name)[0] or "application/octet-stream"
    )
    return (
        f"{guessed}; charset=utf-8"
        if guessed.startswith("text/") or guessed.endswith("javascript")
        else guessed
    )
