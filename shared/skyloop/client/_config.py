"""Where the client connects and which token it sends.

Precedence, highest first: the constructor's arguments, the environment
(``SKYLOOP_URL``, ``SKYLOOP_TOKEN``), the config file (``url``, ``token``),
then ``http://127.0.0.1:8080`` with no token. The file is
``~/.config/skyloop/config.toml`` (``$XDG_CONFIG_HOME`` respected) or
``$SKYLOOP_CONFIG``. The file's token is sent only to the file's own ``url``
(or anywhere, if the file names no url), so pointing the client at another
endpoint never leaks it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from skyloop.client._errors import ConfigError

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

__all__ = ["DEFAULT_URL", "ReconnectPolicy", "ResolvedConfig", "config_path", "resolve_config"]

DEFAULT_URL = "http://127.0.0.1:8080"
URL_ENV = "SKYLOOP_URL"
TOKEN_ENV = "SKYLOOP_TOKEN"
CONFIG_ENV = "SKYLOOP_CONFIG"


@dataclass(frozen=True)
class ResolvedConfig:
    base_url: str
    token: str | None
    config_file: Path | None = None


@dataclass(frozen=True)
class ReconnectPolicy:
    """How a stream resumes after a drop: exponential backoff, then give up.

    ``max_failures`` counts consecutive failed attempts; any connection that
    delivers its first frame resets the count. ``read_timeout`` must exceed
    the server's heartbeat interval (15 s) so a silent, half-dead connection
    is noticed and replaced.
    """

    initial_delay: float = 0.2
    max_delay: float = 5.0
    max_failures: int = 10
    read_timeout: float = 60.0
    sleep: Callable[[float], Any] | None = field(default=None, compare=False)
    """Injected sleep (``time.sleep``-like for ``Client``, awaitable for ``AsyncClient``); for tests."""

    def delay(self, failures: int) -> float:
        """Seconds to wait before attempt number ``failures + 1``."""
        if failures <= 0:
            return 0.0
        return min(self.initial_delay * (2 ** (failures - 1)), self.max_delay)


def config_path(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    explicit = env.get(CONFIG_ENV)
    if explicit:
        return Path(explicit).expanduser()
    base = env.get("XDG_CONFIG_HOME") or str(Path("~/.config").expanduser())
    return Path(base) / "skyloop" / "config.toml"


def load_config_file(path: Path) -> dict[str, Any]:
    """The file's table, ``{}`` when it does not exist."""
    import tomllib  # stdlib, but only needed when a file is present

    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc}") from exc
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}") from exc
    for key in ("url", "token"):
        if key in data and not isinstance(data[key], str):
            raise ConfigError(f"{path}: '{key}' must be a string")
    return data


def _normalize(url: str) -> str:
    return url.strip().rstrip("/")


def resolve_config(
    base_url: str | None = None, token: str | None = None, env: Mapping[str, str] | None = None
) -> ResolvedConfig:
    env = os.environ if env is None else env
    path = config_path(env)
    file = load_config_file(path)
    file_url = file.get("url") or None
    url = base_url or env.get(URL_ENV) or file_url or DEFAULT_URL
    url = _normalize(url)
    resolved_token = token or env.get(TOKEN_ENV) or None
    same_endpoint = file_url is None or _normalize(file_url) == url
    if resolved_token is None and file.get("token") and same_endpoint:
        resolved_token = file["token"]
    return ResolvedConfig(base_url=url, token=resolved_token, config_file=path if file else None)
