"""The TLS tests' certificates (kfk.testing.certificates, made per session) and their broker."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kfk.testing.broker import BrokerProcess
from kfk.testing.certificates import CLIENT_DN, KEY_PASSWORD, Certificates, make_certificates

__all__ = ["CLIENT_DN", "KEY_PASSWORD", "Certificates", "tls_address"]


@pytest.fixture(scope="session")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="package")
def tls_broker(tmp_path_factory: pytest.TempPathFactory, certificates: Certificates) -> Iterator[BrokerProcess]:
    """One broker for the TLS tests: listener SSL (ssl.client.auth=requested) and listener MTLS, an SSL listener too
    (listener.security.protocol.map) whose listener.name.mtls.ssl.client.auth=required: the per-listener prefix at
    work. It logs at DEBUG, where each TLS connection's principal shows."""
    overrides = {
        "offsets.topic.replication.factor": "1", "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1", "group.initial.rebalance.delay.ms": "0",
        "listener.security.protocol.map": "SSL:SSL,MTLS:SSL",
        **certificates.broker_overrides("requested"),
        "listener.name.mtls.ssl.client.auth": "required",
    }
    directory = tmp_path_factory.mktemp("tls-broker")
    broker = BrokerProcess(log_dir=directory / "data", overrides=overrides, log_path=directory / "broker.log",
                           listener_name="SSL", extra_listeners=["MTLS://127.0.0.1:0"],
                           extra_args=["--log-level", "debug"])
    broker.start()
    yield broker
    if broker.stop() != 0:
        print(broker.output()[-20000:])


def tls_address(broker: BrokerProcess, listener: str) -> str:
    return f"127.0.0.1:{broker.ports[listener]}"
