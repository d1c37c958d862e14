"""How the console's files are chosen for a path (skyloop dev and the cloud answer alike)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from skyloop import console

if TYPE_CHECKING:
    from pathlib import Path


def _dist(tmp_path: Path) -> Path:
    (tmp_path / "assets").mkdir()
    (tmp_path / "index.html").write_text("<!doctype html>")
    (tmp_path / "assets" / "app-1234.js").write_text("x")
    (tmp_path / "prices.json").write_text("{}")
    (tmp_path.parent / "secret.txt").write_text("no")
    return tmp_path


def test_files_routes_and_misses(tmp_path: Path) -> None:
    root = _dist(tmp_path)
    assert console.resolve(root, "/") == (root / "index.html", console.NO_CACHE)
    assert console.resolve(root, "/assets/app-1234.js") == (
        root / "assets" / "app-1234.js",
        console.IMMUTABLE,
    )
    assert console.resolve(root, "/prices.json") == (root / "prices.json", console.NO_CACHE)
    assert console.resolve(root, "/sessions/abc") == (root / "index.html", console.NO_CACHE)
    assert console.resolve(root, "/assets/gone-999.js") is None
    assert console.resolve(root, "/../secret.txt") is None
    assert console.resolve(root, "/assets/../../secret.txt") is None


def test_api_paths_are_never_the_consoles() -> None:
    for path in (
        "/v1/sessions",
        "/v1",
        "/api/version",
        "/health",
        "/openapi.json",
        "/openai/v1/x",
        "/anthropic",
        "/anthropic/v1/nothing",
    ):
        assert console.is_api_path(path), path
    for path in ("/", "/sessions/x", "/inbox", "/agents", "/v1x", "/healthy", "/anthropics"):
        assert not console.is_api_path(path), path


def test_content_types() -> None:
    from pathlib import Path

    assert console.content_type(Path("a.js")) == "text/javascript; charset=utf-8"
    assert console.content_type(Path("a.html")) == "text/html; charset=utf-8"
    assert console.content_type(Path("a.png")) == "image/png"
