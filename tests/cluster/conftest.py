"""The cluster suite runs against brokers with two network processes each (num.network.threads=2,
kfk.server.network_processes): replication, failover, restarts and kills through the network processes, while the
single-process broker, kfk's default, is what every other suite starts (and the integration suite runs against both:
scripts/test.sh). A test that sets num.network.threads itself keeps its own value."""

from __future__ import annotations

import pytest

from kfk.testing.broker import NETWORK_THREADS_VARIABLE


@pytest.fixture(autouse=True)
def network_processes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(NETWORK_THREADS_VARIABLE, "2")
