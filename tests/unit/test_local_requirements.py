"""The moto range the local stack is tested with: one range in the code and in pyproject, checked at start."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from skyloop.local.requirements import MotoVersionError, check_moto, moto_requirement, parse

ROOT = Path(__file__).resolve().parents[2]


def test_pyproject_pins_the_range_the_stack_checks() -> None:
    local = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["local"]
    assert local == [moto_requirement()]


def test_the_installed_moto_is_in_range() -> None:
    assert check_moto()


@pytest.mark.parametrize("version", ["5.1.9", "5.2.4", "5.2.6", "5.3.0", "6.0.0", "4.2.14"])
def test_a_moto_outside_the_range_is_refused_with_what_to_install(version: str) -> None:
    with pytest.raises(MotoVersionError) as refused:
        check_moto(version)
    message = str(refused.value)
    assert f"moto {version} is installed" in message
    assert f"pip install '{moto_requirement()}'" in message


@pytest.mark.parametrize("version", ["5.2.5", "5.2.5.post1"])
def test_versions_in_range_pass(version: str) -> None:
    assert check_moto(version) == version


def test_parse_reads_release_numbers() -> None:
    assert parse("5.2.5") == (5, 2, 5)
    assert parse("5.2.10rc1") == (5, 2, 10)
    with pytest.raises(ValueError, match="not a version"):
        parse("latest")


def test_constraints_pin_a_moto_inside_the_range() -> None:
    """make installs with -c constraints.txt: its moto must be one the stack accepts at start."""
    pins = dict(
        line.split("==", 1) for line in (ROOT / "constraints.txt").read_text().splitlines() if "==" in line
    )
    assert check_moto(pins["moto"]) == pins["moto"]
