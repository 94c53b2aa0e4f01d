"""A Ray cluster address checked before Ray is asked to connect to it (imports no Ray).

`ray.init(address="HOST:PORT")` with nothing answering there waits about two minutes for the
cluster's control service before it gives up (measured with Ray 2.x on an unused local port),
and a malformed address fails with Ray's own words. So an address is checked in two steps, each
with a message a researcher can act on: `check_ray_address` (its form, at once: the command
line and the studio's Start form refuse a malformed one before anything starts) and
`probe_ray_address` (something accepts a TCP connection at HOST:PORT within `PROBE_TIMEOUT_S`;
`RayExecutor.start` calls it before `ray.init`).
"""

from __future__ import annotations

import re
import socket

from core.errors import EvaluationError

__all__ = ["PROBE_TIMEOUT_S", "check_ray_address", "probe_ray_address"]

PROBE_TIMEOUT_S = 3.0
"""Seconds `probe_ray_address` waits for a TCP connection."""

_HOST_PORT = re.compile(
    r"(?:ray://)?(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+):(?P<port>\d{1,5})"
)

_FORMS = "'auto', HOST:PORT (e.g. 10.0.0.5:6379) or ray://HOST:PORT (e.g. ray://head:10001)"


def check_ray_address(address: str) -> tuple[str, int] | None:
    """Check the form of a Ray address.

    Args:
        address: `"auto"` (the cluster this machine belongs to, found by Ray), `"HOST:PORT"`
            (a head node's control service, 6379 by default) or `"ray://HOST:PORT"` (Ray
            Client, 10001 by default).

    Returns:
        (host, port) to probe, or None for `"auto"`.

    Raises:
        EvaluationError: any other text, or a port outside 1-65535; the message names the
            forms accepted.
    """
    text = address.strip()
    if text == "auto":
        return None
    m = _HOST_PORT.fullmatch(text)
    if m is None:
        raise EvaluationError(f"not a Ray address: {address!r}; expected {_FORMS}")
    port = int(m["port"])
    if not 1 <= port <= 65535:
        raise EvaluationError(f"not a Ray address: {address!r} (port {port} is not 1-65535)")
    return m["host"].strip("[]"), port


def probe_ray_address(address: str, timeout_s: float = PROBE_TIMEOUT_S) -> None:
    """Check that something accepts a TCP connection at the address (nothing for `"auto"`).

    Raises:
        EvaluationError: a malformed address (`check_ray_address`), or no connection within
            `timeout_s` (refused, unknown host, timed out); the message says how to start a
            cluster or to leave the address out for a private local Ray.
    """
    where = check_ray_address(address)
    if where is None:
        return
    host, port = where
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            pass
    except OSError as exc:
        reason = "timed out" if isinstance(exc, TimeoutError) else (exc.strerror or str(exc))
        raise EvaluationError(
            f"no Ray cluster answers at {address!r} ({reason}): start one there "
            "(`ray start --head` on the head node) or leave the address empty for a private "
            "local Ray"
        ) from None
