"""Ports for servers whose address must be known before they start (KRaft voters, ZooKeeper, a second listener).

Asking the kernel for port 0 and closing the probe is a race when tests run in parallel: that port comes from the
ephemeral range, where every other process's outgoing connections and port-0 listeners draw theirs too, so between
the probe and the server's bind someone else may take it (a broker that binds port 0 and listens seconds later then
fails with EADDRINUSE). The ports here come from outside the ephemeral range, which the kernel never hands out
unasked, and each pytest-xdist worker draws from its own slice of it, so two workers never pick the same one.
"""

from __future__ import annotations

import itertools
import os
import random
import re
import socket
import threading
from collections.abc import Iterator

#: The lowest port handed out: below it live well-known services (and, on many machines, ZooKeeper's 2181).
LOWEST_PORT = 10000
#: Linux's default net.ipv4.ip_local_port_range, when /proc cannot be read.
DEFAULT_EPHEMERAL_RANGE = (32768, 60999)
#: pytest-xdist's slices: a worker's index modulo this picks its slice (more workers share slices, still randomly).
SLICES = 16


def ephemeral_range() -> tuple[int, int]:
    """The kernel's ephemeral port range (inclusive)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as handle:
            low, high = handle.read().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return DEFAULT_EPHEMERAL_RANGE


def _candidate_ports() -> list[int]:
    """This process's slice of the ports outside the ephemeral range."""
    low, high = ephemeral_range()
    ports = [port for port in range(LOWEST_PORT, 65536) if not low <= port <= high]
    match = re.fullmatch(r"gw(\d+)", os.environ.get("PYTEST_XDIST_WORKER", ""))
    if match:
        ports = ports[int(match.group(1)) % SLICES::SLICES]
    return ports


def _cycle() -> Iterator[int]:
    ports = _candidate_ports()
    start = random.SystemRandom().randrange(len(ports))  # processes in one slice start far apart
    return itertools.cycle(ports[start:] + ports[:start])


_lock = threading.Lock()
_ports: Iterator[int] | None = None


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing is bound to now on `host`, outside the ephemeral range; not handed out again by this process
    until it has gone through its whole slice."""
    global _ports
    with _lock:
        if _ports is None:
            _ports = _cycle()
        for port in itertools.islice(_ports, 65536):
            with socket.socket() as probe:
                try:
                    probe.bind((host, port))
                except OSError:
                    continue
                return port
    raise OSError(f"no free port on {host} outside the ephemeral range")


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """`count` distinct free ports (see free_port)."""
    return [free_port(host) for _ in range(count)]
