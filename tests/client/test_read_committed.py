"""read_committed against a real broker before the broker can run transactions itself.

The partition is written as a follower would have copied it from its leader: with the broker stopped, kfk.storage
appends transactional batches and their COMMIT / ABORT control batches (and a transaction still open) to the
partition's log, then the broker starts again on that log dir. Its Fetch answers then carry the aborted
transactions and stop at the last stable offset, and the consumers must filter accordingly: kfk's, and
confluent-kafka's (librdkafka) as the reference. Nothing is simulated: real files, a real broker process, real
clients.
"""

from __future__ import annotations

import time
import uuid

import pytest

from kfk.client import Admin, Consumer, NewTopic, TopicPartition
from kfk.config import LogConfig
from kfk.records import (
    ControlRecordType,
    EndTransactionMarker,
    MemoryRecordsBuilder,
    build_end_transaction_marker_batch,
)
from kfk.storage.log import Log
from kfk.testing.broker import BrokerProcess

confluent_kafka = pytest.importorskip("confluent_kafka")

pytestmark = pytest.mark.integration

LEADER_EPOCH = 0


def data_batch(base_offset: int, values: list[bytes], producer_id: int = -1, transactional: bool = False) -> bytes:
    builder = MemoryRecordsBuilder(base_offset=base_offset, producer_id=producer_id,
                                   producer_epoch=0 if producer_id >= 0 else -1,
                                   base_sequence=0 if producer_id >= 0 else -1, is_transactional=transactional,
                                   partition_leader_epoch=LEADER_EPOCH)
    for value in values:
        builder.append(int(time.time() * 1000), None, value)
    return bytes(builder.close())


def marker(offset: int, producer_id: int, kind: ControlRecordType) -> bytes:
    return build_end_transaction_marker_batch(base_offset=offset, timestamp=int(time.time() * 1000),
                                              partition_leader_epoch=LEADER_EPOCH, producer_id=producer_id,
                                              producer_epoch=0, marker=EndTransactionMarker(kind, 0))


# offset: 0-1 aborted (producer 7), 2 ABORT, 3-4 plain, 5-6 committed (producer 8), 7 COMMIT, 8 open (producer 9)
PARTITION = [
    data_batch(0, [b"aborted-0", b"aborted-1"], producer_id=7, transactional=True),
    marker(2, 7, ControlRecordType.ABORT),
    data_batch(3, [b"plain-3", b"plain-4"]),
    data_batch(5, [b"committed-5", b"committed-6"], producer_id=8, transactional=True),
    marker(7, 8, ControlRecordType.COMMIT),
    data_batch(8, [b"open-8"], producer_id=9, transactional=True),
]
COMMITTED = [b"plain-3", b"plain-4", b"committed-5", b"committed-6"]
EVERYTHING = [b"aborted-0", b"aborted-1", b"plain-3", b"plain-4", b"committed-5", b"committed-6", b"open-8"]


@pytest.fixture
def transactional_partition(kfk_broker_process: BrokerProcess) -> tuple[str, str]:
    """A one-partition topic holding PARTITION; returns (bootstrap, topic)."""
    bootstrap = kfk_broker_process.bootstrap_servers
    topic = f"t-{uuid.uuid4().hex[:10]}"
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        assert admin.create_topics([NewTopic(topic, 1, 1, {})]) == {topic: None}
    assert kfk_broker_process.stop() == 0
    log = Log.open(str(kfk_broker_process.log_dir / f"{topic}-0"), LogConfig(), now_ms=int(time.time() * 1000),
                   had_clean_shutdown=True)
    try:
        for batch in PARTITION:
            log.append_as_follower(batch, int(time.time() * 1000))
        log.flush()
    finally:
        log.close()
    kfk_broker_process.start()
    return bootstrap, topic


def kfk_values(bootstrap: str, topic: str, isolation_level: str, expected: int) -> tuple[list[bytes], int, int]:
    """The values kfk's consumer returns, its end offset and its position when done."""
    tp = TopicPartition(topic, 0)
    with Consumer({"bootstrap.servers": bootstrap, "isolation.level": isolation_level}) as consumer:
        consumer.assign([tp])
        consumer.seek_to_beginning()
        values: list[bytes] = []
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and len(values) < expected:
            values.extend(record.value for record in consumer.poll(0.5))
        values.extend(record.value for record in consumer.poll(1.0))  # anything hidden would come now
        return values, consumer.end_offsets([tp])[tp], consumer.position(tp)


def confluent_values(bootstrap: str, topic: str, isolation_level: str, expected: int) -> list[bytes]:
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex}",
                                         "auto.offset.reset": "earliest", "isolation.level": isolation_level,
                                         "enable.auto.commit": False})
    try:
        consumer.assign([confluent_kafka.TopicPartition(topic, 0, confluent_kafka.OFFSET_BEGINNING)])
        values: list[bytes] = []
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and len(values) < expected:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                values.append(message.value())
        while (message := consumer.poll(1.0)) is not None:
            if message.error() is None:
                values.append(message.value())
        return values
    finally:
        consumer.close()


def test_read_committed_skips_aborted_records_and_markers_and_stops_at_the_open_transaction(
        transactional_partition: tuple[str, str]) -> None:
    bootstrap, topic = transactional_partition
    values, end_offset, position = kfk_values(bootstrap, topic, "read_committed", len(COMMITTED))
    assert values == COMMITTED
    assert end_offset == 8  # the last stable offset: the first offset of the open transaction
    assert position == 8
    assert confluent_values(bootstrap, topic, "read_committed", len(COMMITTED)) == COMMITTED


def test_read_uncommitted_returns_every_data_record_but_no_markers(transactional_partition: tuple[str, str]) -> None:
    bootstrap, topic = transactional_partition
    values, end_offset, position = kfk_values(bootstrap, topic, "read_uncommitted", len(EVERYTHING))
    assert values == EVERYTHING
    assert end_offset == 9 and position == 9  # the high watermark
    assert confluent_values(bootstrap, topic, "read_uncommitted", len(EVERYTHING)) == EVERYTHING
