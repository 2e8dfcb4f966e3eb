"""Log directories written by a real broker, kfk's or Apache Kafka's, for the files-both-ways tests.

The same workload (WORKLOAD below: every codec, a log of two segments with index entries, a compacted topic, a
committed and an aborted transaction, a consumer group's committed offsets) runs against a kfk broker and against
Apache Kafka; each broker is then stopped cleanly and its log dir is read by the other side's tools and broker.

Each directory is written once per test run and shared by the xdist workers (built under a file lock in the run's
common temporary directory). Tests only read it; a test that starts a broker on it works on a copy.
"""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kfk.common.features import FEATURES
from kfk.controller.features import METADATA_VERSION_NAME, supported_features
from kfk.testing.apache_kafka import ApacheKafka, file_lock
from kfk.testing.broker import start_broker
from kfk.testing.plugin import TEST_OVERRIDES

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
RECORDS_PER_CODEC = 10
#: Two segments (segment.bytes is at its 1 MiB floor on both brokers) of ~20 KB batches: each batch is bigger than
#: index.interval.bytes (4096), so every batch gets an offset index entry and a time index entry.
SEGMENTED_TOPIC = "segmented"
SEGMENTED_RECORDS = 1200
SEGMENTED_VALUE_BYTES = 1000
COMPACTED_TOPIC = "compacted"
#: Key k0 ends in a tombstone. The active segment is never cleaned, so all seven records stay on disk.
COMPACTED_RECORDS = [(b"k0", b"v0"), (b"k1", b"v1"), (b"k2", b"v2"), (b"k0", b"v3"), (b"k1", b"v4"),
                     (b"k2", b"v5"), (b"k0", None)]
TRANSACTIONAL_TOPIC = "transactional"
TRANSACTIONAL_ID = "interop-txn"
COMMITTED_VALUES = [b"c-0", b"c-1", b"c-2"]
ABORTED_VALUES = [b"a-0", b"a-1"]
GROUP = "interop-group"
SEGMENT_FILE_SUFFIXES = (".log", ".index", ".timeindex", ".snapshot", ".txnindex")
#: The group's committed offsets: (topic, partition) -> offset.
GROUP_OFFSETS = {("codec-none", 0): 7, ("codec-zstd", 0): 3, (COMPACTED_TOPIC, 0): 5}


def codec_topic(codec: str) -> str:
    return f"codec-{codec}"


def codec_record(codec: str, index: int) -> tuple[bytes, bytes]:
    return f"key-{index}".encode(), f"{codec}-value-{index}".encode()


def segmented_value(index: int) -> bytes:
    return f"{index:06d}".encode().ljust(SEGMENTED_VALUE_BYTES, b".")


def _create_topics(bootstrap: str) -> None:
    # The topic's own compression.type fixes the codec on disk: librdkafka sends a batch uncompressed when its codec
    # would not make it smaller (a small first batch often), which would leave the file's codec to chance.
    topics = [NewTopic(codec_topic(codec), 1, 1,
                       config={"compression.type": "uncompressed" if codec == "none" else codec}) for codec in CODECS]
    topics += [NewTopic(SEGMENTED_TOPIC, 1, 1, config={"segment.bytes": str(1024 * 1024)}),
               NewTopic(COMPACTED_TOPIC, 1, 1, config={"cleanup.policy": "compact"}),
               NewTopic(TRANSACTIONAL_TOPIC, 1, 1)]
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the results arrive
    for future in admin.create_topics(topics).values():
        future.result(30)


def _produce(bootstrap: str) -> None:
    for codec in CODECS:
        producer = Producer({"bootstrap.servers": bootstrap, "compression.type": codec, "linger.ms": 20})
        for index in range(RECORDS_PER_CODEC):
            key, value = codec_record(codec, index)
            producer.produce(codec_topic(codec), key=key, value=value, headers=[("origin", codec.encode())])
        assert producer.flush(30) == 0
    producer = Producer({"bootstrap.servers": bootstrap, "batch.num.messages": 20, "linger.ms": 5})
    for index in range(SEGMENTED_RECORDS):
        producer.produce(SEGMENTED_TOPIC, key=str(index).encode(), value=segmented_value(index))
    assert producer.flush(60) == 0
    producer = Producer({"bootstrap.servers": bootstrap})
    for key, value in COMPACTED_RECORDS:
        producer.produce(COMPACTED_TOPIC, key=key, value=value)
        assert producer.flush(30) == 0  # one batch each: the offsets are the list's indexes


def _transactions(bootstrap: str) -> None:
    """A committed transaction, an aborted one, then one more committed record: markers, a .txnindex entry,
    __transaction_state records and a producer state snapshot."""
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": TRANSACTIONAL_ID})
    producer.init_transactions(30)
    for values, commit in ((COMMITTED_VALUES[:2], True), (ABORTED_VALUES, False), (COMMITTED_VALUES[2:], True)):
        producer.begin_transaction()
        for value in values:
            producer.produce(TRANSACTIONAL_TOPIC, key=b"txn", value=value)
        producer.flush(30)
        (producer.commit_transaction if commit else producer.abort_transaction)(30)


def _commit_group_offsets(bootstrap: str) -> None:
    """Commit GROUP_OFFSETS. The first commit creates __consumer_offsets; until its partition is loaded the
    coordinator answers NOT_COORDINATOR (or COORDINATOR_LOAD_IN_PROGRESS), which a synchronous commit returns."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False})
    offsets = [TopicPartition(topic, partition, offset) for (topic, partition), offset in GROUP_OFFSETS.items()]
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                consumer.commit(offsets=offsets, asynchronous=False)
                return
            except KafkaException as error:
                retriable = error.args[0].code() in (KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_NOT_AVAILABLE,
                                                     KafkaError.COORDINATOR_LOAD_IN_PROGRESS)
                if not retriable or time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
    finally:
        consumer.close()


def consume_partition(bootstrap: str, topic: str, partition: int = 0,
                      isolation_level: str = "read_uncommitted") -> list[Message]:
    """Every record of one partition from its start to its end (the high watermark, or the last stable offset
    under read_committed), with a real consumer: confluent-kafka reports the end as a partition EOF event."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{topic}", "enable.auto.commit": False,
                         "enable.partition.eof": True, "isolation.level": isolation_level})
    consumer.assign([TopicPartition(topic, partition, OFFSET_BEGINNING)])
    messages = []
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            message = consumer.poll(1)
            if message is None:
                continue
            if message.error() is not None:
                if message.error().code() == KafkaError._PARTITION_EOF:
                    return messages
                raise KafkaException(message.error())
            messages.append(message)
        raise AssertionError(f"{topic}-{partition}: no end of partition within 30 s after {len(messages)} records")
    finally:
        consumer.close()


WORKLOAD: list[Callable[[str], None]] = [_create_topics, _produce, _transactions, _commit_group_offsets]


def run_workload(bootstrap: str) -> None:
    for step in WORKLOAD:
        step(bootstrap)


@dataclass(frozen=True)
class WrittenLogDir:
    """A stopped broker's log dir (`path`, read-only for tests) and who wrote it."""

    path: Path
    writer: str

    def partition_dir(self, topic: str, partition: int = 0) -> Path:
        return self.path / f"{topic}-{partition}"

    def files(self, topic: str, suffix: str, partition: int = 0) -> list[Path]:
        return sorted(self.partition_dir(topic, partition).glob(f"*{suffix}"))

    def non_empty_logs(self, prefix: str) -> list[Path]:
        """The non-empty .log files of the partitions named `prefix`-N (where an internal topic's data landed)."""
        return sorted(path for path in self.path.glob(f"{prefix}-*/*.log") if path.stat().st_size > 0)

    def segment_files(self) -> list[Path]:
        """Every log, index, time index, producer snapshot and transaction index of the partitions that hold data
        (the empty __consumer_offsets and __transaction_state partitions left out)."""
        return sorted(path for partition in self.path.iterdir() if partition.is_dir()
                      and any(log.stat().st_size > 0 for log in partition.glob("*.log"))
                      for path in partition.iterdir() if path.suffix in SEGMENT_FILE_SUFFIXES)

    def kraft_snapshot_files(self) -> list[Path]:
        """The KRaft snapshots: bootstrap.checkpoint (kafka-storage format's) and __cluster_metadata-0's
        <end offset>-<epoch>.checkpoint files (format --standalone's first one, then the controller's)."""
        return [*self.path.glob("bootstrap.checkpoint"), *sorted(self.path.glob("__cluster_metadata-0/*.checkpoint"))]


def _shared_dir(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Path:
    """The temporary directory every xdist worker of this run shares (the workers' own dirs' parent)."""
    base = tmp_path_factory.getbasetemp()
    return base if worker_id == "master" else base.parent


def _written_once(directory: Path, write: Callable[[Path], Path], writer: str) -> WrittenLogDir:
    done = directory / "done"
    with file_lock(directory.with_name(directory.name + ".lock")):
        if not done.exists():
            shutil.rmtree(directory, ignore_errors=True)  # what a failed attempt left
            log_dir = write(directory)
            done.write_text(str(log_dir))
    return WrittenLogDir(Path(done.read_text()), writer)


def _write_with_kfk(directory: Path) -> Path:
    # As for Apache Kafka below: a metadata snapshot after every committed metadata batch.
    broker = start_broker(directory, {**TEST_OVERRIDES, "metadata.log.max.record.bytes.between.snapshots": "1"})
    try:
        run_workload(broker.bootstrap_servers)
    finally:
        code = broker.stop()
    assert code == 0, broker.output()[-4000:]
    return broker.log_dir


def _write_with_apache_kafka(directory: Path, release_version: str | None = None,
                             features: dict[str, int] | None = None) -> Path:
    # A metadata snapshot after every committed metadata batch: KRaft snapshots with records for dump-log to read.
    with ApacheKafka(directory, config={"metadata.log.max.record.bytes.between.snapshots": "1"},
                     release_version=release_version, features=features) as node:
        run_workload(node.bootstrap_server)
    return node.log_dir


@pytest.fixture(scope="session")
def kfk_written_log_dir(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> WrittenLogDir:
    """The log dir of a kfk broker that ran the workload and stopped cleanly."""
    return _written_once(_shared_dir(tmp_path_factory, worker_id) / "kfk-written", _write_with_kfk, "kfk")


@pytest.fixture(scope="session")
def apache_kafka_written_log_dir(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> WrittenLogDir:
    """The log dir of an Apache Kafka node that ran the workload and stopped cleanly."""
    return _written_once(_shared_dir(tmp_path_factory, worker_id) / "apache-kafka-written", _write_with_apache_kafka,
                         "Apache Kafka")


@pytest.fixture(scope="session")
def apache_kafka_written_log_dir_at_kfk_metadata_version(tmp_path_factory: pytest.TempPathFactory,
                                                         worker_id: str) -> WrittenLogDir:
    """The same workload's log dir from an Apache Kafka node formatted at kfk's metadata.version (its storage tool's
    --release-version) and without the features kfk does not serve (share.version, streams.version at 0): files
    kfk can take over."""
    unserved = {name: 0 for name in FEATURES if name not in supported_features()}
    return _written_once(_shared_dir(tmp_path_factory, worker_id) / "apache-kafka-written-kfk-level",
                         lambda directory: _write_with_apache_kafka(directory, METADATA_VERSION_NAME, unserved),
                         f"Apache Kafka at metadata.version {METADATA_VERSION_NAME}")
