"""kfk.testing.ports: ports chosen before a server starts never come from the kernel's ephemeral range (where
other processes' port-0 binds and outgoing connections would race for them), and pytest-xdist workers draw from
disjoint slices."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

from kfk.testing.ports import ephemeral_range, free_ports


def test_free_ports_are_distinct_bindable_and_outside_the_ephemeral_range() -> None:
    low, high = ephemeral_range()
    ports = free_ports(50)
    assert len(set(ports)) == 50
    assert not [port for port in ports if low <= port <= high]
    for port in ports[:5]:
        with socket.socket() as server:
            server.bind(("127.0.0.1", port))


def test_two_xdist_workers_never_pick_the_same_port() -> None:
    program = "from kfk.testing.ports import free_ports; print(*free_ports(300))"

    def drawn(worker: str) -> set[int]:
        env = dict(os.environ, PYTEST_XDIST_WORKER=worker)
        output = subprocess.run([sys.executable, "-c", program], env=env, check=True, capture_output=True, text=True)
        return set(map(int, output.stdout.split()))

    assert not drawn("gw0") & drawn("gw1")
