"""pytest plugin (entry point `pytest11`): fixtures that start real kfk brokers.

- `kfk_broker`: the bootstrap address ("127.0.0.1:PORT") of a fresh single-node broker, stopped after the test.
- `kfk_broker_process`: the BrokerProcess itself, for tests that stop, kill or restart the broker.
- `kfk_broker_factory`: start more brokers with your own `--override` properties.
- `zookeeper_server`: a real ZooKeeper server (the one installed on the machine), one per test session;
  `zookeeper_connect`: a connect string with a fresh chroot on it, per test; `kfk_cluster_factory`: brokers on
  ZooKeeper or on a KRaft quorum (`kfk_metadata_mode`), as separate processes (kfk.testing.cluster).
- `apache_kafka` (one per session and xdist worker), `apache_kafka_factory` (started per test with your config),
  `kafka_classpath_fixture`: Apache Kafka itself (kfk.testing.apache_kafka), the oracle for interoperability tests.
  They fail, never skip, when it cannot be resolved: CI installs Java and Maven.
- kfk.testing.certificates (not a fixture; needs the `cryptography` test dependency): a CA and certificates for TLS
  brokers and clients, made at run time.
If a test fails, the broker's log is attached to the report.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterator

import pytest

from kfk.testing.apache_kafka import ApacheKafka, ApacheKafkaStartError, ApacheKafkaUnavailable, kafka_classpath
from kfk.testing.broker import BrokerProcess, start_broker
from kfk.testing.cluster import KfkCluster, start_cluster
from kfk.testing.zookeeper import ZooKeeperNotInstalledError, ZooKeeperServer

# Settings that suit one broker on a laptop (Kafka's own sample server.properties makes the same choices).
TEST_OVERRIDES = {
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    "group.initial.rebalance.delay.ms": "0",
}


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    if report.when == "call":
        item.stash[_CALL_FAILED] = report.failed


_CALL_FAILED = pytest.StashKey[bool]()


@pytest.fixture
def kfk_broker_factory(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Callable[..., BrokerProcess]]:
    started: list[BrokerProcess] = []

    def factory(overrides: dict[str, str] | None = None, listener_name: str = "PLAINTEXT") -> BrokerProcess:
        merged = dict(TEST_OVERRIDES)
        merged.update(overrides or {})
        broker = start_broker(tmp_path_factory.mktemp("kfk-broker"), merged, listener_name=listener_name)
        started.append(broker)
        return broker

    yield factory
    for broker in started:
        broker.stop()
        if request.node.stash.get(_CALL_FAILED, False):
            print(f"--- kfk broker log ({broker.log_path}) ---\n{broker.output()[-20000:]}")


@pytest.fixture
def kfk_broker_process(kfk_broker_factory: Callable[..., BrokerProcess]) -> BrokerProcess:
    return kfk_broker_factory()


@pytest.fixture
def kfk_broker(kfk_broker_process: BrokerProcess) -> str:
    return kfk_broker_process.bootstrap_servers


@pytest.fixture(scope="session")
def zookeeper_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    """A standalone ZooKeeper (tickTime 500 ms: sessions of 1-10 s) for the whole test session. Without ZooKeeper
    installed the tests that need it are skipped, except under CI=true, where that is a failure."""
    import os

    try:
        server = ZooKeeperServer(tmp_path_factory.mktemp("zookeeper")).start()
    except ZooKeeperNotInstalledError as error:
        if os.environ.get("CI") == "true":
            pytest.fail(str(error))
        pytest.skip(str(error))
    yield server
    server.stop()


@pytest.fixture
def zookeeper_connect(zookeeper_server: ZooKeeperServer, request: pytest.FixtureRequest) -> str:
    """host:port/chroot: a chroot of its own per test, so tests never see each other's znodes."""
    import re
    import uuid

    name = re.sub(r"[^A-Za-z0-9_.-]", "_", request.node.name)[:60]
    return f"{zookeeper_server.connect_string}/kfk-test-{name}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def kfk_metadata_mode() -> str:
    """Where `kfk_cluster_factory`'s clusters keep their metadata: "zookeeper" (the default here) or "kraft". A test
    module overrides this fixture, parametrised, to run the same tests on both (one suite, not a copy)."""
    return "zookeeper"


@pytest.fixture
def kfk_cluster_factory(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
                        kfk_metadata_mode: str) -> Iterator[Callable[..., KfkCluster]]:
    """`factory(size=3, overrides=None, controllers=None, combined=False, listener_name="PLAINTEXT",
    format_args=None, controller_overrides=None)`: brokers 1..size, each a separate process (kill -9 and SIGSTOP are
    real), on the test's ZooKeeper chroot or, in "kraft" mode, on a KRaft quorum of `controllers` controller-only
    nodes (ids 101.., default 1; `controller_overrides` for them alone) or of the brokers themselves (`combined`),
    every node formatted with `format_args` more; all are killed after the test, their logs printed if it failed."""
    started: list[KfkCluster] = []
    zookeeper_connect = request.getfixturevalue("zookeeper_connect") if kfk_metadata_mode == "zookeeper" else None

    def factory(size: int = 3, overrides: dict[str, str] | None = None, *, controllers: int | None = None,
                combined: bool = False, listener_name: str = "PLAINTEXT",
                format_args: list[str] | None = None,
                controller_overrides: dict[str, str] | None = None) -> KfkCluster:
        if zookeeper_connect is None and controllers is None and not combined:
            controllers = 1
        cluster = start_cluster(tmp_path_factory.mktemp("kfk-cluster"), zookeeper_connect, size, overrides,
                                controllers=controllers or 0, combined=combined, listener_name=listener_name,
                                format_args=format_args, controller_overrides=controller_overrides)
        started.append(cluster)
        return cluster

    yield factory
    for cluster in started:
        cluster.shutdown()
        if request.node.stash.get(_CALL_FAILED, False):
            print(cluster.logs())


@pytest.fixture
def kfk_cluster(kfk_cluster_factory: Callable[..., KfkCluster]) -> KfkCluster:
    """Three brokers (on ZooKeeper unless the module's kfk_metadata_mode says "kraft")."""
    return kfk_cluster_factory()


def _started_apache_kafka(data_dir: Path, config: dict[str, str] | None = None) -> ApacheKafka:
    """A started ApacheKafka, or the test fails (not skips) with the reason: CI always has Java and Maven."""
    try:
        return ApacheKafka(data_dir, config=config).start()
    except (ApacheKafkaUnavailable, ApacheKafkaStartError) as error:
        pytest.fail(f"Apache Kafka could not be started: {error}")


@pytest.fixture(scope="session")
def kafka_classpath_fixture() -> str:
    """The classpath of Apache Kafka (kfk.testing.apache_kafka.APACHE_KAFKA_VERSION): broker, tools, clients."""
    try:
        return kafka_classpath()
    except ApacheKafkaUnavailable as error:
        pytest.fail(f"Apache Kafka could not be resolved: {error}")


@pytest.fixture(scope="session")
def apache_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApacheKafka]:
    """One Apache Kafka node for the session (per xdist worker). Shared: tests use topic names of their own."""
    node = _started_apache_kafka(tmp_path_factory.mktemp("apache-kafka"))
    yield node
    node.stop()


@pytest.fixture
def apache_kafka_factory(request: pytest.FixtureRequest,
                         tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., ApacheKafka]]:
    """`factory(config=None)`: a started Apache Kafka node with `config` added to its server.properties; stopped
    after the test, its log printed if the test failed."""
    started: list[ApacheKafka] = []

    def factory(config: dict[str, str] | None = None) -> ApacheKafka:
        node = _started_apache_kafka(tmp_path_factory.mktemp("apache-kafka"), config)
        started.append(node)
        return node

    yield factory
    for node in started:
        node.stop()
        if request.node.stash.get(_CALL_FAILED, False):
            print(f"--- Apache Kafka log ({node.data_dir}) ---\n{node.output()[-20000:]}")
