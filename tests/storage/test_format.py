"""The files kfk writes have Kafka's names and layouts, checked against the format descriptions (Kafka's
LogSegment/OffsetIndex/TimeIndex/TransactionIndex/ProducerStateManager docs), and a data dir laid out by hand the
way Kafka lays it out is read back."""

from __future__ import annotations

import os
import re
import struct

from crc32c import crc32c

from kfk.common.structs import TopicPartition
from kfk.records import CompressionType, LegacyRecordsBuilder, TimestampType, iter_batches
from kfk.storage.fetch_data_info import FetchIsolation
from kfk.storage.log import Log
from kfk.storage.log_manager import LogManager
from kfk.storage.producer_state import AppendOrigin

from .conftest import make_batch, make_marker, read_all, small_config


def test_segment_files_are_kafkas(log_dir) -> None:
    log = Log.open(log_dir, small_config(), now_ms=0)
    appended = []
    for index in range(40):
        batch = make_batch(log.log_end_offset, [b"x" * 150, b"y" * 150], timestamp=5_000 + index)
        appended.append(batch)
        log.append_as_leader(batch, leader_epoch=0, now_ms=0)
    log.append_as_leader(make_batch(80, [b"t"], producer_id=3, producer_epoch=0, base_sequence=0,
                                    transactional=True), leader_epoch=0, now_ms=0)
    log.append_as_leader(make_marker(81, 3, 0, commit=False), leader_epoch=0, now_ms=0,
                         origin=AppendOrigin.COORDINATOR)
    log.close()
    names = sorted(os.listdir(log_dir))
    for name in names:
        assert re.fullmatch(r"\d{20}\.(log|index|timeindex|txnindex|snapshot)|leader-epoch-checkpoint", name), name
    bases = sorted(int(name[:20]) for name in names if name.endswith(".log"))
    # The .log files hold exactly the appended batch bytes, back to back.
    data = b"".join(open(os.path.join(log_dir, f"{base:020d}.log"), "rb").read() for base in bases)
    assert data.startswith(b"".join(appended))
    for base in bases:
        index = open(os.path.join(log_dir, f"{base:020d}.index"), "rb").read()
        time_index = open(os.path.join(log_dir, f"{base:020d}.timeindex"), "rb").read()
        segment = open(os.path.join(log_dir, f"{base:020d}.log"), "rb").read()
        assert len(index) % 8 == 0 and len(time_index) % 12 == 0
        batches_at = {batch.position: batch for batch in iter_batches(segment)}
        for relative_offset, position in struct.iter_unpack(">ii", index):
            # An entry maps the last offset of the batch at `position` (relative to the base offset) to it.
            assert batches_at[position].last_offset == base + relative_offset
        for timestamp, relative_offset in struct.iter_unpack(">qi", time_index):
            holder = [batch for batch in batches_at.values() if batch.last_offset == base + relative_offset]
            assert holder and holder[0].max_timestamp == timestamp
    # The aborted transaction: one 34-byte entry in the .txnindex of the marker's segment.
    txn_files = [name for name in names if name.endswith(".txnindex")]
    assert len(txn_files) == 1
    raw = open(os.path.join(log_dir, txn_files[0]), "rb").read()
    assert len(raw) == 34
    assert struct.unpack(">hqqqq", raw) == (0, 3, 80, 81, 82)


def test_producer_snapshot_layout(log_dir) -> None:
    log = Log.open(log_dir, small_config(), now_ms=0)
    log.append_as_leader(make_batch(0, [b"a", b"b", b"c"], producer_id=12, producer_epoch=4, base_sequence=7,
                                    timestamp=9_000), leader_epoch=0, now_ms=0)
    log.append_as_leader(make_batch(3, [b"t"], producer_id=13, producer_epoch=0, base_sequence=0,
                                    transactional=True, timestamp=9_500), leader_epoch=0, now_ms=0)
    log.close()
    snapshot = open(os.path.join(log_dir, f"{4:020d}.snapshot"), "rb").read()
    version, crc, count = struct.unpack_from(">hIi", snapshot)
    assert version == 1 and count == 2
    assert crc == crc32c(snapshot[6:])
    entries = sorted(struct.iter_unpack(">qhiqiqiq", snapshot[10:]))
    # producer_id, epoch, last_sequence, last_offset, offset_delta, timestamp, coordinator_epoch,
    # current_txn_first_offset
    assert entries == [(12, 4, 9, 2, 2, 9_002, -1, -1), (13, 0, 0, 3, 0, 9_500, -1, 3)]


def test_reads_a_data_dir_laid_out_like_kafka(tmp_path) -> None:
    """A log dir as Kafka writes it: legacy (magic 1) and v2 batches, a sparse index, Kafka's checkpoint files and
    its clean-shutdown marker."""
    log_dir = tmp_path / "kafka-logs"
    partition = log_dir / "legacy.topic-2"
    partition.mkdir(parents=True)
    legacy = LegacyRecordsBuilder(1, compression_type=CompressionType.GZIP,
                                  timestamp_type=TimestampType.CREATE_TIME, base_offset=0)
    for offset in range(5):
        legacy.append(1_000 + offset, None, f"old-{offset}".encode())
    legacy_bytes = legacy.close()
    plain = LegacyRecordsBuilder(1, base_offset=5)
    plain.append(2_000, b"k", b"old-5")
    data = legacy_bytes + plain.close() + make_batch(6, [b"new-6", b"new-7"], timestamp=3_000)
    (partition / "00000000000000000000.log").write_bytes(data)
    # Kafka's index: entry (last offset of the append, its position); here one for the v2 batch.
    v2_position = len(data) - len(make_batch(6, [b"new-6", b"new-7"], timestamp=3_000))
    (partition / "00000000000000000000.index").write_bytes(struct.pack(">ii", 7, v2_position))
    (partition / "00000000000000000000.timeindex").write_bytes(struct.pack(">qi", 3_001, 7))
    (partition / "leader-epoch-checkpoint").write_text("0\n1\n0 6\n")
    (partition / "partition.metadata").write_text("version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ")
    (log_dir / "recovery-point-offset-checkpoint").write_text("0\n1\nlegacy.topic 2 8\n")
    (log_dir / "replication-offset-checkpoint").write_text("0\n1\nlegacy.topic 2 8\n")
    (log_dir / "log-start-offset-checkpoint").write_text("0\n0\n")
    (log_dir / ".kafka_cleanshutdown").write_text('{"version":0,"brokerEpoch":7}')
    manager = LogManager([str(log_dir)], small_config())
    manager.startup(now_ms=0)
    log = manager.get_log(TopicPartition("legacy.topic", 2))
    assert log is not None and log.log_end_offset == 8 and log.high_watermark == 8
    values = [record.value for record in read_all(log, FetchIsolation.HIGH_WATERMARK)]
    assert values == [b"old-0", b"old-1", b"old-2", b"old-3", b"old-4", b"old-5", b"new-6", b"new-7"]
    assert log.offset_for_timestamp(2_500).offset == 6
    assert log.end_offset_for_epoch(0) == (0, 8)
    manager.shutdown()
    # The same dir after an unclean shutdown: recovery validates the legacy and v2 entries alike.
    os.unlink(log_dir / ".kafka_cleanshutdown")
    (log_dir / "recovery-point-offset-checkpoint").write_text("0\n1\nlegacy.topic 2 0\n")
    recovering = LogManager([str(log_dir)], small_config())
    recovering.startup(now_ms=0)
    log = recovering.get_log(TopicPartition("legacy.topic", 2))
    assert log.recovered_segments == 1 and log.log_end_offset == 8
    assert [record.value for record in read_all(log, FetchIsolation.HIGH_WATERMARK)] == values
    recovering.shutdown()
