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
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from skyloop.client._errors import ConfigError
from skyloop.client._retry import ReconnectPolicy  # re-exported: it used to live here

if TYPE_CHECKING:
    from collections.abc import Mapping

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
