"""Offline reads from a log dir written by kfk.storage: read_committed from the segments' own .txnindex and a
header scan for the last stable offset, segments on both sides of a roll, the broker's pid file respected."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytest.importorskip("pyarrow")

from kfk.config import LogConfig  # noqa: E402
from kfk.errors import InvalidConfigurationError, UnknownTopicOrPartitionError  # noqa: E402
from kfk.records import (  # noqa: E402
    EndTransactionMarker,
    MemoryRecordsBuilder,
    RecordBatch,
    build_end_transaction_marker_batch,
)
from kfk.records.control import ControlRecordType  # noqa: E402
from kfk.spark.log_dir_source import LogDirCatalog, read_log_dir_range  # noqa: E402
from kfk.spark.offsets import DataLossError, OffsetRange, plan_batch  # noqa: E402
from kfk.spark.options import SourceOptions  # noqa: E402
from kfk.storage.log import Log  # noqa: E402
from kfk.storage.producer_state import AppendOrigin  # noqa: E402

TOPIC = "tx"


def batch(base_offset: int, values: list[bytes], producer_id: int = -1, sequence: int = -1,
          transactional: bool = False, timestamp: int = 1_000) -> bytes:
    builder = MemoryRecordsBuilder(base_offset=base_offset, producer_id=producer_id,
                                   producer_epoch=0 if producer_id >= 0 else -1, base_sequence=sequence,
                                   is_transactional=transactional)
    for index, value in enumerate(values):
        builder.append(timestamp + index, b"k" + value, value, [("h", value)])
    return builder.close()


def append(log: Log, records: bytes) -> None:
    """A leader append keeping the batch's own leader epoch; markers come from the (transaction) coordinator."""
    header = RecordBatch(records)
    log.append_as_leader(records, header.partition_leader_epoch, 0,
                         AppendOrigin.COORDINATOR if header.is_control else AppendOrigin.CLIENT)


def marker(base_offset: int, producer_id: int, commit: bool) -> bytes:
    kind = ControlRecordType.COMMIT if commit else ControlRecordType.ABORT
    return build_end_transaction_marker_batch(base_offset=base_offset, timestamp=2_000, partition_leader_epoch=0,
                                              producer_id=producer_id, producer_epoch=0,
                                              marker=EndTransactionMarker(kind, 0))


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    """tx-0: plain 0, txn of producer 1 (1-2, committed at 5), txn of producer 2 (3, aborted at 6), plain 4,
    a roll, plain 7, an open txn of producer 3 (8), plain 9."""
    data = tmp_path / "data"
    log = Log.open(str(data / f"{TOPIC}-0"), LogConfig.from_properties({}), now_ms=0)
    appends = [batch(0, [b"plain-0"]), batch(1, [b"committed-1", b"committed-2"], 1, 0, True),
               batch(3, [b"aborted-3"], 2, 0, True), batch(4, [b"plain-4"]), marker(5, 1, True), marker(6, 2, False)]
    for records in appends:
        append(log, records)
    log.roll(now_ms=0)
    for records in (batch(7, [b"plain-7"], timestamp=5_000), batch(8, [b"open-8"], 3, 0, True, timestamp=6_000),
                    batch(9, [b"plain-9"], timestamp=7_000)):
        append(log, records)
    log.flush()
    log.close()
    return data


def options(log_dir: Path, committed: bool, **extra: str) -> SourceOptions:
    settings = {"logDir": str(log_dir), "subscribe": TOPIC, **extra}
    if committed:
        settings["kafka.isolation.level"] = "read_committed"
    return SourceOptions.parse(settings, streaming=False)


def values(source: SourceOptions, offset_range: OffsetRange) -> list[tuple[int, bytes]]:
    rows = []
    for arrow_batch in read_log_dir_range(source, offset_range):
        rows.extend(zip(arrow_batch.column("offset").to_pylist(), arrow_batch.column("value").to_pylist()))
    return rows


def test_read_committed_stops_at_the_open_transaction_and_drops_the_aborted_one(log_dir: Path) -> None:
    source = options(log_dir, committed=True, includeHeaders="true")
    catalog = LogDirCatalog(source)
    ranges = plan_batch(catalog, source)
    assert ranges == [OffsetRange(TOPIC, 0, 0, 8)]
    assert values(source, ranges[0]) == [(0, b"plain-0"), (1, b"committed-1"), (2, b"committed-2"),
                                         (4, b"plain-4"), (7, b"plain-7")]
    headers = next(iter(read_log_dir_range(source, ranges[0]))).column("headers").to_pylist()
    assert headers[0] == [{"key": "h", "value": b"plain-0"}]


def test_read_uncommitted_reads_every_data_record_across_segments(log_dir: Path) -> None:
    source = options(log_dir, committed=False)
    catalog = LogDirCatalog(source)
    assert catalog.latest_offsets([(TOPIC, 0)]) == {(TOPIC, 0): 10}
    assert [offset for offset, _ in values(source, OffsetRange(TOPIC, 0, 0, 10))] == [0, 1, 2, 3, 4, 7, 8, 9]
    # A range that starts inside the second segment and stops before its end.
    assert values(source, OffsetRange(TOPIC, 0, 8, 9)) == [(8, b"open-8")]
    assert catalog.offsets_for_times({(TOPIC, 0): 5_500}) == {(TOPIC, 0): 8}
    assert catalog.offsets_for_times({(TOPIC, 0): 99_000}) == {(TOPIC, 0): None}


def test_unknown_topics_missing_dirs_and_deleted_offsets(log_dir: Path, tmp_path: Path) -> None:
    unknown = SourceOptions.parse({"logDir": str(log_dir), "subscribe": "nope"}, streaming=False)
    with pytest.raises(UnknownTopicOrPartitionError, match="'nope' does not exist"):
        plan_batch(LogDirCatalog(unknown), unknown)
    with pytest.raises(InvalidConfigurationError, match="does not exist"):
        LogDirCatalog(options(tmp_path / "missing", committed=False))
    (log_dir / "log-start-offset-checkpoint").write_text(f"0\n1\n{TOPIC} 0 3\n")
    assert plan_batch(LogDirCatalog(options(log_dir, committed=False)), options(log_dir, committed=False)) == [
        OffsetRange(TOPIC, 0, 3, 10)]
    from_zero = '{"tx":{"0":0}}'
    source = options(log_dir, committed=False, startingOffsets=from_zero)
    with pytest.raises(DataLossError, match="no longer available"):
        plan_batch(LogDirCatalog(source), source)
    lenient = options(log_dir, committed=False, startingOffsets=from_zero, failOnDataLoss="false")
    assert plan_batch(LogDirCatalog(lenient), lenient) == [OffsetRange(TOPIC, 0, 3, 10)]


def test_a_running_brokers_log_dir_is_refused(log_dir: Path) -> None:
    (log_dir / "kfk.pid").write_text(f"{os.getpid()}\n")
    with pytest.raises(InvalidConfigurationError, match="is running on the log dir"):
        LogDirCatalog(options(log_dir, committed=False))
    # A pid file left by a broker that was killed names no process: the dir is readable.
    (log_dir / "kfk.pid").write_text("999999999\n")
    assert LogDirCatalog(options(log_dir, committed=False)).topic_partitions(
        options(log_dir, committed=False).topics) == [(TOPIC, 0)]
