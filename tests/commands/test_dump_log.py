"""`kfk dump-log` on segments a kfk broker wrote: every batch valid, records, indexes checked against the log,
producer snapshots; and a corrupted segment reported batch by batch."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kfk.cli import app
from kfk.client import Producer

runner = CliRunner()


def test_help() -> None:
    result = runner.invoke(app, ["dump-log", "--help"])
    assert result.exit_code == 0
    for flag in ("--files", "--deep-iteration", "--print-data-log", "--index-sanity-check", "--verify-index-only"):
        assert flag in result.output


def test_a_missing_file_is_one_line(tmp_path: Path) -> None:
    result = runner.invoke(app, ["dump-log", "--files", str(tmp_path / "00000000000000000000.log")])
    assert result.exit_code == 1 and result.output.strip().endswith("does not exist")


def test_an_unknown_file_kind_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("x")
    result = runner.invoke(app, ["dump-log", "--files", str(path)])
    assert result.exit_code == 1 and "not a .log, .index, .timeindex or .snapshot file" in result.output


@pytest.fixture(scope="module")
def segment_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A partition directory written by a real broker (small index interval, several codecs), cleanly stopped."""
    from kfk.testing.broker import start_broker
    from kfk.testing.plugin import TEST_OVERRIDES

    broker = start_broker(tmp_path_factory.mktemp("dump-log"), dict(TEST_OVERRIDES, **{
        "log.index.interval.bytes": "200"}))
    try:
        for codec in ("none", "gzip", "lz4", "zstd", "snappy"):
            with Producer({"bootstrap.servers": broker.bootstrap_servers, "compression.type": codec,
                           "linger.ms": 0}) as producer:
                for n in range(10):
                    producer.send("dumped", f"{codec}-{n}".encode(), key=f"k{n}".encode(),
                                  headers=[("h", b"1")]).result(10)
    finally:
        broker.stop()
    return broker.log_dir / "dumped-0"


def test_every_batch_of_a_broker_segment_is_valid(segment_dir: Path) -> None:
    log = segment_dir / "00000000000000000000.log"
    result = runner.invoke(app, ["dump-log", "--files", str(log)])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[:2] == [f"Dumping {log}", "Log starting offset: 0"]
    batches = [line for line in lines if line.startswith("baseOffset:")]
    assert len(batches) == 50 and all(line.endswith("isvalid: true") for line in batches)
    assert {re.search(r"compresscodec: (\w+)", line).group(1) for line in batches} == {
        "none", "gzip", "lz4", "zstd", "snappy"}
    first = batches[0]
    assert first.startswith("baseOffset: 0 lastOffset: 0 count: 1 baseSequence: 0 lastSequence: 0 producerId: ")
    assert " position: 0 CreateTime: " in first and " magic: 2 " in first


def test_print_data_log_shows_each_record(segment_dir: Path) -> None:
    result = runner.invoke(app, ["dump-log", "--files", str(segment_dir / "00000000000000000000.log"),
                                 "--print-data-log"])
    records = [line for line in result.output.splitlines() if line.startswith("| offset:")]
    assert len(records) == 50
    assert re.fullmatch(r"\| offset: 0 CreateTime: \d+ keySize: 2 valueSize: 6 sequence: 0 headerKeys: \[h\] "
                        r"key: k0 payload: none-0", records[0])
    assert records[-1].endswith("key: k9 payload: snappy-9")


def test_indexes_agree_with_the_log(segment_dir: Path) -> None:
    index = segment_dir / "00000000000000000000.index"
    listed = runner.invoke(app, ["dump-log", "--files", str(index)])
    entries = [line for line in listed.output.splitlines() if line.startswith("offset:")]
    assert listed.exit_code == 0 and len(entries) >= 5
    verified = runner.invoke(app, ["dump-log", "--files", str(index), "--verify-index-only"])
    assert verified.exit_code == 0 and "mismatch" not in verified.output
    sane = runner.invoke(app, ["dump-log", "--files", f"{index},{segment_dir / '00000000000000000000.timeindex'}",
                               "--index-sanity-check"])
    assert sane.exit_code == 0 and sane.output.count("passed sanity check.") == 2
    times = runner.invoke(app, ["dump-log", "--files", str(segment_dir / "00000000000000000000.timeindex")])
    assert re.search(r"^timestamp: \d+ offset: \d+$", times.output, re.MULTILINE)


def test_producer_snapshots_are_listed(segment_dir: Path) -> None:
    snapshots = sorted(segment_dir.glob("*.snapshot"))
    assert snapshots
    result = runner.invoke(app, ["dump-log", "--files", str(snapshots[-1])])
    assert result.exit_code == 0 and re.search(r"producerId: \d+ producerEpoch: 0 .* lastSequence: 9 ", result.output)


def test_a_corrupted_batch_is_reported_and_the_rest_still_listed(segment_dir: Path, tmp_path: Path) -> None:
    source = segment_dir / "00000000000000000000.log"
    data = bytearray(source.read_bytes())
    listing = runner.invoke(app, ["dump-log", "--files", str(source)]).output
    positions = [int(p) for p in re.findall(r"position: (\d+) ", listing)]
    data[positions[7] + 70] ^= 0xFF  # a byte inside the 8th batch's records
    corrupt = tmp_path / "00000000000000000000.log"
    corrupt.write_bytes(bytes(data) + b"\x00\x00\x00\x00\x00\x00\x00\x09\x00\x00")
    result = runner.invoke(app, ["dump-log", "--files", str(corrupt)])
    assert result.exit_code == 1
    batches = [line for line in result.output.splitlines() if line.startswith("baseOffset:")]
    assert len(batches) == 50
    invalid = [line for line in batches if line.endswith("isvalid: false")]
    assert invalid == [batches[7]] and batches[7].startswith("baseOffset: 7 ")
    assert "Found 10 invalid bytes at the end of 00000000000000000000.log" in result.output


def test_a_garbled_length_stops_the_walk_with_the_position(segment_dir: Path, tmp_path: Path) -> None:
    data = bytearray((segment_dir / "00000000000000000000.log").read_bytes())
    listing = runner.invoke(app, ["dump-log", "--files", str(segment_dir / "00000000000000000000.log")]).output
    position = int(re.findall(r"position: (\d+) ", listing)[3])
    data[position + 8:position + 12] = b"\x00\x00\x00\x02"  # batchLength 2: impossible
    corrupt = tmp_path / "00000000000000000000.log"
    corrupt.write_bytes(bytes(data))
    result = runner.invoke(app, ["dump-log", "--files", str(corrupt)])
    assert result.exit_code == 1
    assert f"invalid bytes at position {position}" in result.output
    assert len([line for line in result.output.splitlines() if line.startswith("baseOffset:")]) == 3


def test_a_kraft_leader_change_prints_as_json(segment_dir: Path) -> None:
    """As Apache Kafka 4.4.0's tool prints it (tests/interop/test_dump_log_agrees.py): decoded, after "LeaderChange:"."""
    log = segment_dir.parent / "__cluster_metadata-0" / "00000000000000000000.log"
    result = runner.invoke(app, ["dump-log", "--files", str(log), "--deep-iteration"])
    assert result.exit_code == 0, result.output
    assert ' headerKeys: [] LeaderChange: {"version":0,"leaderId":' in result.output
    assert "controlType" not in result.output


def _kraft_snapshot(path: Path) -> Path:
    """A snapshot as a KRaft controller writes one: a SnapshotHeader control batch, the records, a SnapshotFooter."""
    from kfk.protocol.messages.snapshot_footer_record import SnapshotFooterRecord
    from kfk.protocol.messages.snapshot_header_record import SnapshotHeaderRecord
    from kfk.records import ControlRecordType, MemoryRecordsBuilder
    from kfk.records.control import control_record_key

    def batch(base_offset: int, records: list[tuple[bytes | None, bytes]], control: bool) -> bytes:
        builder = MemoryRecordsBuilder(base_offset=base_offset, is_control_batch=control, partition_leader_epoch=3)
        for key, value in records:
            builder.append(1_000, key, value)
        return builder.close()

    header = SnapshotHeaderRecord(version=0, last_contained_log_timestamp=999).encode(0)
    footer = SnapshotFooterRecord(version=0).encode(0)
    path.write_bytes(batch(0, [(control_record_key(ControlRecordType.SNAPSHOT_HEADER), header)], True)
                     + batch(1, [(None, b"record-1"), (None, b"record-2")], False)
                     + batch(3, [(control_record_key(ControlRecordType.SNAPSHOT_FOOTER), footer)], True))
    return path


@pytest.mark.parametrize("name, title", [("00000000000000000042-0000000003.checkpoint",
                                          "Snapshot end offset: 42, epoch: 3"),
                                         ("bootstrap.checkpoint", "KRaft bootstrap snapshot")])
def test_a_kraft_snapshot_is_read_like_a_log(tmp_path: Path, name: str, title: str) -> None:
    snapshot = _kraft_snapshot(tmp_path / name)
    result = runner.invoke(app, ["dump-log", "--files", str(snapshot), "--print-data-log"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[:2] == [f"Dumping {snapshot}", title]
    assert [line.split(" headerKeys: [] ")[1] for line in lines if line.startswith("| offset: ")] == [
        'SnapshotHeader {"version":0,"lastContainedLogTimestamp":999}', "payload: record-1", "payload: record-2",
        'SnapshotFooter {"version":0}']
    assert result.output.count("isvalid: true") == 3


def test_a_checkpoint_not_named_as_a_snapshot_is_one_line(tmp_path: Path) -> None:
    snapshot = _kraft_snapshot(tmp_path / "42-3.checkpoint")
    result = runner.invoke(app, ["dump-log", "--files", str(snapshot)])
    assert result.exit_code == 1 and "<end offset, 20 digits>-<epoch, 10 digits>.checkpoint" in result.output
