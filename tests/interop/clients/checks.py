"""What the interop tests compare: records as (partition, offset, key, value, headers) rows, read back with
confluent-kafka (librdkafka, the independent witness), and a group's committed offsets as confluent-kafka sees
them."""

from __future__ import annotations

from confluent_kafka import Consumer, TopicPartition

from tests.integration.test_clients import consume_all

Row = tuple[int, int, str, str, tuple[tuple[str, str], ...]]


def program_rows(records: list[dict]) -> list[Row]:
    """Rows from a Go or Node program's JSON records (their headers as a name -> value object)."""
    return [(r["partition"], r["offset"], r["key"], r["value"], tuple(sorted(r["headers"].items())))
            for r in records]


def confluent_rows(bootstrap: str, topic: str, partitions: int, count: int, **config: object) -> list[Row]:
    """Every partition's records read from offset 0 by confluent-kafka, ordered by (partition, offset)."""
    rows = []
    for partition, records in sorted(consume_all(bootstrap, topic, partitions, count, **config).items()):
        for offset, key, value, headers in records:
            rows.append((partition, offset, key.decode(), value.decode(),
                         tuple(sorted((name, data.decode()) for name, data in headers))))
    return rows


def committed_offsets(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        committed = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=15)
    finally:
        consumer.close()
    return {tp.partition: tp.offset for tp in committed}
