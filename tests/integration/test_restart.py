"""Durability across restarts: what a client was told is acknowledged (acks=all) is there after a clean stop and
after kill -9."""

from __future__ import annotations

import pytest

from tests.integration.test_clients import consume_all, create_topic, expected_by_partition, messages_for, \
    produce_all

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("stop", ["sigterm", "kill-9"])
def test_acknowledged_records_survive_a_restart(kfk_broker_process, stop: str) -> None:
    bootstrap = kfk_broker_process.bootstrap_servers
    create_topic(bootstrap, "durable", partitions=2)
    messages = messages_for(2, 2_000, stop)
    produce_all(bootstrap, "durable", messages, acks="all")
    if stop == "sigterm":
        assert kfk_broker_process.stop() == 0
    else:
        kfk_broker_process.kill()
    kfk_broker_process.start()
    assert dict(consume_all(bootstrap, "durable", 2, len(messages))) == expected_by_partition(messages)
    # And the log goes on from where it ended.
    more = messages_for(2, 10, "after")
    produce_all(bootstrap, "durable", more, acks="all")
    received = consume_all(bootstrap, "durable", 2, 10, start=1_000)
    assert [offset for offset, *_ in received[0]] == list(range(1_000, 1_005))
