"""The moto versions the local stack is tested with, checked when ``skyloop dev`` starts.

The local stack patches moto's internals (``moto_dynamodb``, ``moto_stepfunctions``,
``lambda_hook``, ``persistence``): another moto may look the same and misbehave.
``pyproject.toml`` pins the same range (``tests/unit/test_local_requirements.py`` keeps them equal).
"""

from __future__ import annotations

import re
from importlib.metadata import PackageNotFoundError, version

MOTO_MIN = (5, 2, 5)  # the first version tested
MOTO_BELOW = (
    5,
    2,
    6,
)  # the first version not tested (5.2.6 changed the handler internals the fast path uses)
MOTO_EXTRAS = "server,dynamodb,stepfunctions,awslambda,iam,s3,secretsmanager"


class MotoVersionError(Exception):
    """The installed moto is not one the local stack is tested with; the message says what to install."""


def _dotted(parts: tuple[int, ...]) -> str:
    return ".".join(map(str, parts))


def moto_requirement() -> str:
    return f"moto[{MOTO_EXTRAS}]>={_dotted(MOTO_MIN)},<{_dotted(MOTO_BELOW)}"


def parse(text: str) -> tuple[int, ...]:
    """The release numbers of a version string (``5.2.5.dev1`` -> ``(5, 2, 5)``)."""
    match = re.match(r"(\d+(?:\.\d+)*)", text)
    if match is None:
        raise ValueError(f"not a version: {text!r}")
    return tuple(int(p) for p in match.group(1).split("."))


def check_moto(installed: str | None = None) -> str:
    """The installed moto's version; :class:`MotoVersionError` if it is outside the tested range."""
    try:
        found = installed or version("moto")
    except PackageNotFoundError:
        raise MotoVersionError(
            f"moto is not installed; the local stack needs it: pip install '{moto_requirement()}'"
        ) from None
    release = parse(found)
    padded = release + (0,) * (3 - len(release))
    if not MOTO_MIN <= padded < MOTO_BELOW:
        raise MotoVersionError(
            f"moto {found} is installed, but the local stack is tested with moto >={_dotted(MOTO_MIN)},"
            f"<{_dotted(MOTO_BELOW)} (it patches moto's internals); install that range: "
            f"pip install '{moto_requirement()}'  (or: make .venv/.local-installed)"
        )
    return found
