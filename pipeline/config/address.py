"""A Ray cluster's address, checked before any work: an address nothing answers at is one line and
exit 2, not a Ray traceback after outputs are made. Only a TCP connection is tried (a cluster given
by its address is the user's: nothing is started or stopped here)."""

from __future__ import annotations

import socket

from paraeval.pipeline.errors import ConfigError

# long enough for a head node across a data centre, short enough not to stall a typo
CONNECT_TIMEOUT_S = 3.0
# Ray's own words for "start one here" and "find the running one": nothing to check beforehand
NOT_AN_ADDRESS = ("", "auto", "local")


def host_and_port(address: str, key: str) -> tuple[str, int] | None:
    """``host:port`` or ``ray://host:port`` (an IPv6 host in brackets); None for what is not
    an address to connect to (``auto``, an interpolation, a sweep over addresses)."""
    address = address.strip().strip("'\"")
    if address.lower() in NOT_AN_ADDRESS or "${" in address or "," in address:
        return None
    host, sep, port = address.removeprefix("ray://").rpartition(":")
    if not sep or not port.isdigit():
        raise ConfigError(
            f"{key}='{address}' is not a Ray cluster address; give host:port (the "
            "address 'ray start --head' prints), ray://host:10001, auto or null"
        )
    return host.strip("[]"), int(port)


def check_reachable(address: str | None, key: str) -> None:
    """A ConfigError naming the address and ``key`` when a TCP connection to it fails."""
    target = None if address is None else host_and_port(address, key)
    if target is None:
        return
    try:
        with socket.create_connection(target, timeout=CONNECT_TIMEOUT_S):
            pass
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        if isinstance(exc, TimeoutError):  # socket.timeout is TimeoutError
            reason = f"no answer in {CONNECT_TIMEOUT_S:g} s"
        raise ConfigError(
            f"cannot reach the Ray cluster at {key}='{address}' ({reason}); start it "
            "with 'ray start --head' or give the address it prints"
        ) from None
