"""One broker per test module for the client's integration tests (each test uses its own topics and groups), so
that the suite does not pay a broker start per test."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from kfk.testing.broker import BrokerProcess, start_broker
from kfk.testing.plugin import TEST_OVERRIDES


@pytest.fixture(scope="module")
def shared_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    broker = start_broker(tmp_path_factory.mktemp("client-broker"), dict(TEST_OVERRIDES, **{"num.partitions": "1"}))
    yield broker
    broker.stop()


@pytest.fixture
def bootstrap(shared_broker: BrokerProcess) -> str:
    return shared_broker.bootstrap_servers


@pytest.fixture
def topic_name() -> str:
    return f"t-{uuid.uuid4().hex[:10]}"
