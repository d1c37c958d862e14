"""Claude ``cloud`` environment configs -> skyloop's hosted environment (what ``docs/anthropic.md`` promises).

``networking: limited`` is ``network: none``, ``unrestricted`` is ``network: public``; ``pip`` and
``npm`` packages are setup commands, which need ``unrestricted`` (a 400 naming the field otherwise).
"""

from __future__ import annotations

import shlex
from typing import Any

import pytest

from skyloop.anthropic_compat import environments as envs
from skyloop.anthropic_compat.errors import UnsupportedFeatureError
from skyloop.anthropic_compat.requests import CloudConfig
from skyloop.errors import InvalidInputError


def _hosted(config: dict[str, Any], old: dict[str, Any] | None = None) -> Any:
    return envs.hosted(envs.cloud_config(CloudConfig.model_validate({"type": "cloud", **config}), old))


def test_limited_networking_is_no_network() -> None:
    hosted = _hosted({"networking": {"type": "limited"}})
    assert (hosted.network, hosted.setup) == ("none", [])


@pytest.mark.parametrize("config", [{"networking": {"type": "unrestricted"}}, {}])
def test_unrestricted_networking_is_the_public_network(config: dict[str, Any]) -> None:
    """Claude's default networking is unrestricted: so is an omitted one."""
    assert _hosted(config).network == "public"


def test_pip_and_npm_packages_are_setup_commands() -> None:
    hosted = _hosted(
        {
            "networking": {"type": "unrestricted"},
            "packages": {"pip": ["rich", "requests==2.32.3"], "npm": ["left-pad"]},
        }
    )
    assert hosted.network == "public"
    assert hosted.setup == [
        f"{envs.PACKAGE_INSTALL['pip']} rich requests==2.32.3",
        f"{envs.PACKAGE_INSTALL['npm']} left-pad",
    ]


def test_a_package_name_is_quoted_in_its_setup_command() -> None:
    name = "rich[jupyter]>=13;python_version>'3'"
    (command,) = _hosted({"packages": {"pip": [name]}}).setup
    assert shlex.split(command)[-1] == name


@pytest.mark.parametrize("manager", ["pip", "npm"])
def test_packages_with_limited_networking_are_a_400_naming_the_field(manager: str) -> None:
    with pytest.raises(InvalidInputError) as err:
        _hosted({"networking": {"type": "limited"}, "packages": {manager: ["x"]}})
    assert err.value.status == 400
    assert err.value.param == f"config.packages.{manager}"
    assert "unrestricted" in err.value.message


def test_an_update_to_limited_networking_checks_the_packages_kept() -> None:
    """An update that sends only networking keeps the stored packages, and is checked with them."""
    old = envs.cloud_config(
        CloudConfig.model_validate({"type": "cloud", "packages": {"pip": ["rich"]}}), None
    )
    with pytest.raises(InvalidInputError):
        envs.cloud_config(
            CloudConfig.model_validate({"type": "cloud", "networking": {"type": "limited"}}), old
        )
    kept = _hosted({"networking": {"type": "unrestricted"}}, old)
    assert kept.setup == [f"{envs.PACKAGE_INSTALL['pip']} rich"]


@pytest.mark.parametrize("name", ["", "-e", "--index-url=http://x", "two words"])
def test_a_package_that_is_not_a_name_is_a_400(name: str) -> None:
    with pytest.raises(InvalidInputError) as err:
        _hosted({"packages": {"pip": ["ok", name]}})
    assert err.value.param == "config.packages.pip[1]"


@pytest.mark.parametrize("manager", envs.UNSUPPORTED_PACKAGES)
def test_packages_the_sandbox_cannot_install_are_unsupported(manager: str) -> None:
    with pytest.raises(UnsupportedFeatureError) as err:
        _hosted({"packages": {manager: ["x"]}})
    assert err.value.param == f"config.packages.{manager}"
