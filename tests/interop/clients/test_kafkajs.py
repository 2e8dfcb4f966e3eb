"""kafkajs (a JavaScript client, no librdkafka) against kfk: it produces keyed records with headers (uncompressed
and gzip, the codec it ships), a consumer group member reads them and records of confluent-kafka's, committing each
offset itself, and confluent-kafka reads back what kafkajs wrote and the offsets its group committed."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.integration.test_clients import create_topic, produce_all
from tests.interop.clients.checks import committed_offsets, confluent_rows, program_rows

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("codec", ["gzip", "none"])
def test_produce_and_consume_in_group(kafkajs: Callable[..., Any], bootstrap: str, topic_name: str,
                                      codec: str) -> None:
    create_topic(bootstrap, topic_name, partitions=3)
    produced = program_rows(kafkajs("produce", bootstrap, topic_name, 90, 3, codec))
    assert [row[:3] for row in produced] == [(i % 3, i // 3, f"key-{i}") for i in range(90)]
    assert produced[4][3:] == ("kafkajs-value-4", (("client", "kafkajs"), ("index", "4")))
    assert confluent_rows(bootstrap, topic_name, 3, 90) == sorted(produced)

    produce_all(bootstrap, topic_name, [(i % 3, f"key-{i}".encode(), f"confluent-value-{i}".encode(),
                                         [("index", str(i).encode()), ("client", b"confluent-kafka")])
                                        for i in range(90, 120)], **{"compression.type": "gzip"})
    everything = confluent_rows(bootstrap, topic_name, 3, 120)
    group = f"kafkajs-{topic_name}"
    consumed = program_rows(kafkajs("group", bootstrap, topic_name, group, 120))
    assert sorted(consumed) == everything, "each record exactly once, as the broker stores it"
    assert committed_offsets(bootstrap, group, topic_name, 3) == {p: 40 for p in range(3)}
