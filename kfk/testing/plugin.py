"""pytest plugin (entry point `pytest11`): fixtures that start real kfk brokers.

- `kfk_broker`: the bootstrap address ("127.0.0.1:PORT") of a fresh single-node broker, stopped after the test.
- `kfk_broker_process`: the BrokerProcess itself, for tests that stop, kill or restart the broker.
- `kfk_broker_factory`: start more brokers with your own `--override` properties.
If a test fails, the broker's log is attached to the report.
"""

from __future__ import annotations

from typing import Callable, Iterator

import pytest

from kfk.testing.broker import BrokerProcess, start_broker

# Settings that suit one broker on a laptop (Kafka's own sample server.properties makes the same choices).
TEST_OVERRIDES = {
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
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

    def factory(overrides: dict[str, str] | None = None) -> BrokerProcess:
        merged = dict(TEST_OVERRIDES)
        merged.update(overrides or {})
        broker = start_broker(tmp_path_factory.mktemp("kfk-broker"), merged)
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
