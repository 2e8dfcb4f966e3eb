"""`kfk dump-log` prints what Apache Kafka's DumpLogSegments prints, on the same files, both brokers' files.

Both tools run on every segment file of the partitions holding data (logs, indexes, time indexes, producer
snapshots, transaction indexes, __cluster_metadata, the internal topics' non-empty logs) and on the KRaft
snapshots (__cluster_metadata-0/*.checkpoint: Apache Kafka's, and kfk's backend's; bootstrap.checkpoint where an
older format wrote one) with
each mode both have: plain, --deep-iteration --print-data-log, --index-sanity-check, --verify-index-only. Batch
and record lines are compared field by field, every other line as text. (--offsets-decoder and the other decoders
are tflags' flags on kfk's side; they are compared where both have them.) Every line must agree, the KRaft
control records included (a LEADER_CHANGE record is ``LeaderChange: {json}`` in Kafka 4.4.0's tool).
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kfk.testing.apache_kafka import ApacheKafka, run_kafka_tool
from kfk.testing.broker import BrokerProcess

from .conftest import WrittenLogDir
from .dump_log_output import fields, sections

MODES = {
    "plain": [],
    "deep": ["--deep-iteration", "--print-data-log"],
    "index-sanity-check": ["--index-sanity-check"],
    "verify-index-only": ["--verify-index-only"],
}


@pytest.fixture(params=["kfk", "apache-kafka"])
def written(request: pytest.FixtureRequest) -> WrittenLogDir:
    name = "kfk_written_log_dir" if request.param == "kfk" else "apache_kafka_written_log_dir"
    return request.getfixturevalue(name)


@pytest.mark.parametrize("mode", MODES)
def test_kfk_dump_log_prints_what_kafkas_prints(written: WrittenLogDir, mode: str) -> None:
    snapshots = written.kraft_snapshot_files()
    if written.writer == "Apache Kafka":  # format --standalone's snapshot and at least one of the controller's
        assert len(snapshots) >= 2 and snapshots[0].name == "00000000000000000000-0000000000.checkpoint", snapshots
    paths = written.segment_files() + snapshots
    if mode == "index-sanity-check":
        corrupt = _corrupt_for_both(paths)
        # Kafka 4.4 leaves its metadata log's active time index untrimmed: its tool counts the zeroed slots.
        expected_corrupt = ["00000000000000000000.timeindex"] if written.writer == "Apache Kafka" else []
        assert [path.name for path in corrupt] == expected_corrupt
        paths = [path for path in paths if path not in corrupt]
    expected = _both_agree(paths, MODES[mode])
    if mode == "deep":  # the KRaft control records were there to compare
        control_records = {record for lines in expected.values() for line in lines
                           for record in ("LeaderChange:", "SnapshotHeader", "SnapshotFooter") if record in line}
        assert control_records == ({"LeaderChange:", "SnapshotHeader", "SnapshotFooter"} if snapshots
                                   else {"LeaderChange:"})


def test_the_cluster_metadata_decoder_prints_what_kafkas_prints(written: WrittenLogDir) -> None:
    """--cluster-metadata-decoder on __cluster_metadata's segments and on the KRaft snapshots (kfk's own, written
    by its backend, and Apache Kafka's): every metadata record as Kafka's JSON, only the fields of its version."""
    snapshots = written.kraft_snapshot_files()
    assert any(path.parent.name == "__cluster_metadata-0" for path in snapshots), snapshots
    expected = _both_agree([*written.files("__cluster_metadata", ".log"), *snapshots], ["--cluster-metadata-decoder"])
    printed = "\n".join(line for lines in expected.values() for line in lines)
    for record_type in ("TOPIC_RECORD", "PARTITION_RECORD", "CONFIG_RECORD", "REGISTER_BROKER_RECORD",
                        "FEATURE_LEVEL_RECORD"):
        assert f'"type":"{record_type}"' in printed, record_type


def test_the_offsets_decoder_reads_consumer_protocol_groups_as_kafkas(
        kfk_broker_process: BrokerProcess, apache_kafka_factory: Callable[..., ApacheKafka]) -> None:
    """A KIP-848 group (group.protocol=consumer) joins, commits and leaves on kfk and on Apache Kafka 4.4: both
    tools decode both brokers' __consumer_offsets records alike (the consumer group records Kafka 4.4 writes, a
    null tagged ClassicMemberMetadata among them, and kfk's own, AssignmentEpochs included)."""
    node = apache_kafka_factory()
    for bootstrap, log_dir in ((kfk_broker_process.bootstrap_servers, kfk_broker_process.log_dir),
                               (node.bootstrap_server, node.log_dir)):
        _consumer_protocol_group_round(bootstrap)
        logs = sorted(path for path in Path(log_dir).glob("__consumer_offsets-*/*.log") if path.stat().st_size)
        expected = _both_agree(logs, ["--offsets-decoder"])
        printed = "\n".join(line for lines in expected.values() for line in lines)
        for record_type in (3, 5, 6, 7, 8):  # group epoch, member, target epoch and member, current assignment
            assert f'key: {{"type":"{record_type}","data":{{"groupId":"kip848"' in printed, (record_type, printed)


def _consumer_protocol_group_round(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("kip848-topic", 2, 1)])["kip848-topic"].result(30)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "kip848", "group.protocol": "consumer",
                         "enable.auto.commit": False})
    try:
        consumer.subscribe(["kip848-topic"])
        deadline = time.monotonic() + 60
        while len(consumer.assignment()) < 2:
            assert time.monotonic() < deadline, "no assignment"
            consumer.poll(0.2)
        consumer.commit(offsets=[TopicPartition("kip848-topic", 0, 1)], asynchronous=False)
    finally:
        consumer.close()


def _corrupt_for_both(paths: list[Path]) -> list[Path]:
    """The files kfk's --index-sanity-check reports corrupt, each checked to be one Kafka's tool stops at with the
    same CorruptIndexException (it throws at the first, so it runs on each alone)."""
    kfk = subprocess.run([sys.executable, "-m", "kfk", "dump-log", "--index-sanity-check",
                          "--files", ",".join(map(str, paths))], capture_output=True, text=True, timeout=120)
    reasons = dict(line.split(" failed sanity check: ", 1) for line in kfk.stdout.splitlines()
                   if " failed sanity check: " in line)
    assert kfk.returncode == (1 if reasons else 0), kfk.stdout[-2000:] + kfk.stderr[-2000:]
    for path, reason in reasons.items():
        kafka = run_kafka_tool("dump-log", ["--files", path, "--index-sanity-check"])
        assert kafka.returncode != 0 and f"CorruptIndexException: {reason}" in kafka.stderr, kafka.stderr[-2000:]
    return [path for path in paths if str(path) in reasons]


def _both_agree(paths: list, flags: list[str]) -> dict[str, list[str]]:
    """Run both tools on the files; assert they print the same; Kafka's output by file."""
    files = ",".join(map(str, paths))
    kafka = run_kafka_tool("dump-log", ["--files", files, *flags])
    kfk = subprocess.run([sys.executable, "-m", "kfk", "dump-log", "--files", files, *flags],
                         capture_output=True, text=True, timeout=120)
    assert kafka.returncode == 0, kafka.stderr[-4000:]
    assert kfk.returncode == 0, kfk.stdout[-2000:] + kfk.stderr[-4000:]
    expected, actual = sections(kafka.stdout), sections(kfk.stdout)
    assert list(actual) == list(expected)
    differences = []
    for path, kafka_lines in expected.items():
        kfk_lines = actual[path]
        if len(kfk_lines) != len(kafka_lines):
            differences.append(f"{path}: {len(kafka_lines)} lines from Kafka's tool, {len(kfk_lines)} from kfk's")
            continue
        for kafka_line, kfk_line in zip(kafka_lines, kfk_lines):
            difference = _difference(kafka_line, kfk_line)
            if difference:
                differences.append(f"{path}: {difference}\n  Kafka: {kafka_line}\n  kfk:   {kfk_line}")
    assert not differences, "\n".join(differences[:20])
    return expected


def _difference(kafka_line: str, kfk_line: str) -> str | None:
    """None when the lines agree; else which fields (or the text) differ."""
    if not kafka_line.startswith(("baseOffset: ", "| offset: ")):
        return None if kafka_line == kfk_line else "lines differ"
    kafka_fields, kfk_fields = fields(kafka_line), fields(kfk_line)
    if kafka_fields == kfk_fields:
        return None
    names = [name for name in dict.fromkeys([*kafka_fields, *kfk_fields])
             if kafka_fields.get(name) != kfk_fields.get(name)]
    return "fields differ: " + ", ".join(names)
