"""Outbound URL safety: the stack's own network is off limits to agents' URLs unless allowed."""

from __future__ import annotations

import pytest

from skyloop.outbound import OutboundUrlError, check_url
from skyloop.settings import Settings

CLOUD = Settings.model_validate({"SKYLOOP_OUTBOUND_ALLOW_LOOPBACK": "false"})


@pytest.mark.parametrize(
    ("url", "kind"),
    [
        ("http://127.0.0.1:8080/v1", "loopback"),
        ("http://localhost/v1", "loopback"),
        ("http://[::1]/v1", "loopback"),
        ("http://169.254.169.254/latest/meta-data/", "link-local"),
        ("http://[fe80::1]/", "link-local"),
        ("http://10.1.2.3/v1", "private"),
        ("http://172.16.0.9/v1", "private"),
        ("https://192.168.1.1/v1", "private"),
        ("http://[fd00::1]/", "private"),
        ("http://100.64.0.1/", "shared (carrier-grade NAT)"),
        ("http://0.0.0.0/", "reserved"),
        ("http://[::ffff:169.254.169.254]/", "link-local"),
        ("http://224.0.0.1/", "multicast"),
    ],
)
def test_internal_addresses_are_refused_in_the_cloud(url: str, kind: str) -> None:
    with pytest.raises(OutboundUrlError) as exc:
        check_url(url, CLOUD, what="executor.auth.base_url")
    assert f"a {kind} address" in exc.value.message
    assert exc.value.status == 400
    assert exc.value.code == "url_not_allowed"


def test_public_addresses_pass() -> None:
    check_url("https://93.184.215.14/v1", CLOUD, what="x")
    check_url("https://[2606:4700::1111]/", CLOUD, what="x")


def test_the_local_stack_allows_loopback_only() -> None:
    local = Settings.model_validate({"SKYLOOP_OUTBOUND_ALLOW_LOOPBACK": "true"})
    check_url("http://127.0.0.1:8089/v1", local, what="x")
    check_url("http://localhost:8089/v1", local, what="x")
    with pytest.raises(OutboundUrlError):
        check_url("http://169.254.169.254/", local, what="x")


def test_an_allow_list_admits_named_hosts_and_networks() -> None:
    allowed = Settings.model_validate({"SKYLOOP_OUTBOUND_ALLOW": "10.0.0.0/8, localhost ,fd00::/8"})
    check_url("http://10.9.9.9/v1", allowed, what="x")
    check_url("http://localhost:11434/v1", allowed, what="x")  # e.g. Ollama beside the function
    check_url("http://[fd00::5]/", allowed, what="x")
    with pytest.raises(OutboundUrlError):
        check_url("http://192.168.0.1/", allowed, what="x")


def test_non_http_urls_are_refused_and_unresolvable_names_wait_for_the_call() -> None:
    check_url("http://no-such-host.invalid/", CLOUD, what="x")  # reaches nothing; checked again per call
    with pytest.raises(OutboundUrlError, match="not an http"):
        check_url("file:///etc/passwd", CLOUD, what="x")
