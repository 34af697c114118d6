"""The client's address, which the sign-in lockout counts per (`REMOTE_ADDR`, django-axes).

`X-Forwarded-For` is believed only from a proxy named in `TRUSTED_PROXIES` (addresses, CIDR
networks or host names; empty on `make up`, where browsers reach uvicorn directly): then the client is
the right-most address in the header that is not itself a trusted proxy. From anyone else the header
is ignored, so a client cannot pick a new address per attempt. uvicorn's own proxy-header handling is
off everywhere (`--no-proxy-headers`, scripts/web.sh): this is the one place the header is read.
"""

from __future__ import annotations

import ipaddress
import socket
import time
from collections.abc import Callable
from functools import lru_cache

from django.conf import settings
from django.http import HttpRequest, HttpResponse

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
_RESOLVE_EVERY_S = 60.0  # a proxy named by host name (compose: nginx) may change address on restart


def _ip(value: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(value.strip().strip("[]"))
    except ValueError:
        return None


@lru_cache(maxsize=64)
def _resolve(name: str, epoch: int) -> tuple[Network, ...]:
    """The addresses of a host name (cached per `_RESOLVE_EVERY_S` epoch); none if it does not resolve."""
    try:
        infos = socket.getaddrinfo(name, None)
    except OSError:
        return ()
    return tuple(ipaddress.ip_network(info[4][0]) for info in infos)


def trusted_networks(entries: list[str]) -> list[Network]:
    epoch = int(time.monotonic() // _RESOLVE_EVERY_S)
    networks: list[Network] = []
    for entry in entries:
        try:
            networks.append(ipaddress.ip_network(entry, strict=False))
        except ValueError:
            networks.extend(_resolve(entry, epoch))
    return networks


def client_address(remote_addr: str, forwarded_for: str, trusted: list[str]) -> str:
    """`remote_addr`, or when it is a trusted proxy the right-most untrusted address it forwarded."""
    if not trusted or not forwarded_for:
        return remote_addr
    networks = trusted_networks(trusted)

    def is_trusted(value: str) -> bool:
        ip = _ip(value)
        return ip is not None and any(ip in net for net in networks)

    if not is_trusted(remote_addr):
        return remote_addr
    for hop in reversed(forwarded_for.split(",")):
        ip = _ip(hop)
        if ip is None:
            return remote_addr  # a malformed hop: believe nothing further left
        if not is_trusted(str(ip)):
            return str(ip)
    return remote_addr


class ClientAddressMiddleware:
    """Sets `REMOTE_ADDR` to `client_address(...)`; first in MIDDLEWARE, before anything reads it."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        meta = request.META
        meta["REMOTE_ADDR"] = client_address(
            meta.get("REMOTE_ADDR", ""), meta.get("HTTP_X_FORWARDED_FOR", ""), settings.TRUSTED_PROXIES
        )
        return self.get_response(request)
