"""Outbound URL safety: agents may not point our functions at the deployment's own network.

``executor.auth.base_url`` and MCP server URLs are called from inside the
stack, with its role and its network position. A URL whose host resolves to
a loopback, private (RFC 1918, ULA), link-local (the instance metadata
service at 169.254.169.254), carrier-grade NAT, multicast, reserved or
unspecified address is refused, unless ``SKYLOOP_OUTBOUND_ALLOW`` names the
host or a network holding the address (comma-separated hostnames and CIDRs).
The local stack sets ``SKYLOOP_OUTBOUND_ALLOW_LOOPBACK``, since its mock
model and test servers live on 127.0.0.1.

Checked when an agent is registered (400, nothing stored) and again just
before each call (a name can be re-pointed after registration); every
address the name resolves to must pass. A name that does not resolve (yet)
passes: it reaches nothing, and the next check runs before it is called.

The HTTP clients that make those calls connect to the address that passed
(:mod:`skyloop.pinned_http`): the name is resolved once per connection,
checked, and connected to by that address, with the original host kept for
TLS and ``Host``. A name re-pointed between a check and the connection (DNS
rebinding) cannot reach an address the check refused.
"""

from __future__ import annotations

import ipaddress
import socket
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from skyloop.errors import InvalidInputError

if TYPE_CHECKING:
    from skyloop.settings import Settings

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
_CGNAT = ipaddress.ip_network("100.64.0.0/10")


class OutboundUrlError(InvalidInputError):
    """The URL would reach an address the deployment does not let agents call."""

    code = "url_not_allowed"


def check_url(url: str, settings: Settings, *, what: str) -> None:
    """Raise :class:`OutboundUrlError` unless every address ``url``'s host resolves to may be called."""
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    if parts.scheme not in ("http", "https") or not host:
        raise OutboundUrlError(f"{what}: '{url}' is not an http(s) URL with a host")
    allowed_addresses(host, parts.port, settings, what=what)


def allowed_addresses(host: str, port: int | None, settings: Settings, *, what: str) -> list[str] | None:
    """``host``'s addresses, resolved once, each checked; None when the allow list names the host
    (connect by name). Raises :class:`OutboundUrlError` when any address may not be called."""
    host = host.lower()
    hosts, networks = _allow_list(settings.outbound_allow)
    if host in hosts:
        return None
    addresses = _addresses(host, port)
    for address in addresses:
        if any(address in network for network in networks if network.version == address.version):
            continue
        if address.is_loopback and settings.outbound_allow_loopback:
            continue
        reason = _forbidden(address)
        if reason:
            raise OutboundUrlError(
                f"{what}: '{host}' resolves to {address}, a {reason} address agents may not call "
                "(an operator can allow it with SKYLOOP_OUTBOUND_ALLOW)"
            )
    return [str(address) for address in addresses]


def _forbidden(address: IPAddress) -> str | None:
    mapped = getattr(address, "ipv4_mapped", None)
    if mapped is not None:
        return _forbidden(mapped)
    if address.is_unspecified:
        return "reserved"
    if address.is_loopback:
        return "loopback"
    if address.is_link_local:
        return "link-local"
    if address.version == 4 and address in _CGNAT:
        return "shared (carrier-grade NAT)"
    if address.is_private:
        return "private"
    if address.is_multicast:
        return "multicast"
    if address.is_reserved:
        return "reserved"
    return None


def _addresses(host: str, port: int | None) -> list[IPAddress]:
    try:
        return [ipaddress.ip_address(host.strip("[]"))]
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, port or 443, proto=socket.IPPROTO_TCP)
    except (socket.gaierror, UnicodeError):
        # Nothing to reach yet: the check runs again before every call, when the name must resolve.
        return []
    return [ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in infos]


def _allow_list(raw: str) -> tuple[set[str], list[IPNetwork]]:
    hosts: set[str] = set()
    networks: list[IPNetwork] = []
    for entry in (e.strip() for e in raw.split(",")):
        if not entry:
            continue
        try:
            networks.append(ipaddress.ip_network(entry, strict=False))
        except ValueError:
            hosts.add(entry.lower())
    return hosts, networks
