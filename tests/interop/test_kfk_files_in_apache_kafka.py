"""Files written by a kfk broker, read by Apache Kafka's own DumpLogSegments (kafka-dump-log.sh).

DESIGN.md promises Kafka's on-disk format byte for byte. Kafka's tool checks each batch's CRC (isvalid), decodes
every codec, checks the indexes against the log the way a broker does at start-up (--index-sanity-check,
--verify-index-only) and decodes kfk's __consumer_offsets and __transaction_state records with Kafka's own
serdes (--offsets-decoder, --transaction-log-decoder). Every output is asserted on, not only the exit code: the
tool prints most problems and still exits 0.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from kfk.testing.apache_kafka import run_kafka_tool

from .conftest import (
    ABORTED_VALUES,
    CODECS,
    COMMITTED_VALUES,
    COMPACTED_RECORDS,
    COMPACTED_TOPIC,
    GROUP,
    GROUP_OFFSETS,
    RECORDS_PER_CODEC,
    SEGMENTED_RECORDS,
    SEGMENTED_TOPIC,
    TRANSACTIONAL_ID,
    TRANSACTIONAL_TOPIC,
    WrittenLogDir,
    codec_record,
    codec_topic,
    segmented_value,
)
from .dump_log_output import batches, records, sections

#: What DumpLogSegments prints when something in a file is wrong (and it keeps going).
PROBLEMS = re.compile(r"isvalid: false|invalid bytes|[Mm]ismatch|failed sanity check|corrupt|Exception", re.I)


def dump(files: list[Path], *flags: str) -> dict[str, list[str]]:
    result = run_kafka_tool("dump-log", ["--files", ",".join(map(str, files)), *flags])
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
    assert not PROBLEMS.search(result.stdout), result.stdout
    assert "Exception" not in result.stderr, result.stderr[-4000:]
    found = sections(result.stdout)
    assert sorted(found) == sorted(map(str, files))
    return found


def test_every_codec_and_every_record(kfk_written_log_dir: WrittenLogDir) -> None:
    logs = [log for codec in CODECS for log in kfk_written_log_dir.files(codec_topic(codec), ".log")]
    found = dump(logs, "--deep-iteration", "--print-data-log")
    for codec, log in zip(CODECS, logs):
        lines = found[str(log)]
        assert {batch["compresscodec"] for batch in batches(lines)} == {codec}
        assert sum(int(batch["count"]) for batch in batches(lines)) == RECORDS_PER_CODEC
        assert [(int(record["offset"]), record["key"], record["payload"], record["headerKeys"])
                for record in records(lines)] == [
            (index, *map(bytes.decode, codec_record(codec, index)), "[origin]") for index in range(RECORDS_PER_CODEC)]


def test_two_segments_and_their_indexes(kfk_written_log_dir: WrittenLogDir) -> None:
    logs = kfk_written_log_dir.files(SEGMENTED_TOPIC, ".log")
    assert len(logs) >= 2, "the topic should have rolled a segment"
    found = dump(logs, "--deep-iteration", "--print-data-log")
    values = [record["payload"] for log in logs for record in records(found[str(log)])]
    assert values == [segmented_value(index).decode() for index in range(SEGMENTED_RECORDS)]
    for log in logs[1:]:  # each segment starts where the one before ended, and its file is named after that offset
        assert int(batches(found[str(log)])[0]["baseOffset"]) == int(log.stem)

    indexes = kfk_written_log_dir.files(SEGMENTED_TOPIC, ".index") + kfk_written_log_dir.files(SEGMENTED_TOPIC,
                                                                                                  ".timeindex")
    listed = dump(indexes)
    last_offsets = {int(batch["lastOffset"]) for log in logs for batch in batches(found[str(log)])}
    for index in kfk_written_log_dir.files(SEGMENTED_TOPIC, ".index"):
        entries = [line for line in listed[str(index)] if line.startswith("offset: ")]
        assert len(entries) >= 5, listed[str(index)]
        assert {int(line.split()[1]) for line in entries} <= last_offsets  # entries point at batches' last offsets
    sane = dump(indexes, "--index-sanity-check")
    assert all(lines == [f"{path} passed sanity check."] for path, lines in sane.items()), sane
    verified = dump(indexes, "--verify-index-only")
    offset_index_lines = [line for path, lines in verified.items() if path.endswith(".index") for line in lines]
    assert offset_index_lines == []  # only mismatches would be printed


def test_producer_snapshots_and_transaction_markers(kfk_written_log_dir: WrittenLogDir) -> None:
    partition = [*kfk_written_log_dir.files(TRANSACTIONAL_TOPIC, ".log"),
                 *kfk_written_log_dir.files(TRANSACTIONAL_TOPIC, ".txnindex"),
                 *kfk_written_log_dir.files(TRANSACTIONAL_TOPIC, ".snapshot")]
    found = dump(partition, "--deep-iteration", "--print-data-log")
    lines = found[str(partition[0])]
    data = [record.get("payload") for record in records(lines) if "endTxnMarker" not in record]
    markers = [record["endTxnMarker"] for record in records(lines) if "endTxnMarker" in record]
    assert data == [value.decode() for value in COMMITTED_VALUES[:2] + ABORTED_VALUES + COMMITTED_VALUES[2:]]
    assert markers == ["COMMIT", "ABORT", "COMMIT"]
    assert all(batch["isTransactional"] == "true" for batch in batches(lines))
    producer_id = batches(lines)[0]["producerId"]

    aborted = found[str(partition[1])]  # the aborted transaction: its data at 3-4, its ABORT marker at 5
    assert len(aborted) == 1
    entry = dict(re.findall(r"(\w+): (-?\d+)", aborted[0]))
    assert (entry["producerId"], entry["firstOffset"], entry["lastOffset"]) == (producer_id, "3", "5")

    snapshot = found[str(partition[-1])]
    assert len(snapshot) == 1 and f"producerId: {producer_id} " in snapshot[0]
    assert "currentTxnFirstOffset: OptionalLong.empty" in snapshot[0]  # no transaction left open


def test_compacted_topic_with_a_tombstone(kfk_written_log_dir: WrittenLogDir) -> None:
    log = kfk_written_log_dir.files(COMPACTED_TOPIC, ".log")[0]
    found = dump([log], "--deep-iteration", "--print-data-log")
    assert [(record["key"], record.get("payload"), record["valueSize"]) for record in records(found[str(log)])] == [
        (key.decode(), None if value is None else value.decode(), str(-1 if value is None else len(value)))
        for key, value in COMPACTED_RECORDS]


def test_consumer_offsets_decode_as_kafkas(kfk_written_log_dir: WrittenLogDir) -> None:
    logs = kfk_written_log_dir.non_empty_logs("__consumer_offsets")
    assert logs, "kfk wrote no __consumer_offsets data"
    found = dump(logs, "--offsets-decoder")
    committed = {}
    for log in logs:
        for record in records(found[str(log)]):
            key, value = json.loads(record["key"]), json.loads(record["payload"])
            if key["type"] in ("0", "1") and key["data"]["group"] == GROUP:  # offset commit keys
                committed[(key["data"]["topic"], key["data"]["partition"])] = value["data"]["offset"]
    assert committed == GROUP_OFFSETS


def test_transaction_state_decodes_as_kafkas(kfk_written_log_dir: WrittenLogDir) -> None:
    logs = kfk_written_log_dir.non_empty_logs("__transaction_state")
    assert len(logs) == 1
    found = dump(logs, "--transaction-log-decoder")
    states = []
    for record in records(found[str(logs[0])]):
        # Kafka 4.4's decoder prints key and value as JSON (4.0's printed transaction_metadata::... text).
        assert json.loads(record["key"]) == {"type": "0", "data": {"transactionalId": TRANSACTIONAL_ID}}
        value = json.loads(record["payload"])["data"]
        partitions = ",".join(f"{entry['topic']}-{index}" for entry in value["transactionPartitions"] or []
                              for index in entry["partitionIds"])
        states.append((value["transactionStatus"], partitions))
    assert states[0] == ("Empty", "")
    for outcome in ("Commit", "Abort"):
        prepared = states.index((f"Prepare{outcome}", f"{TRANSACTIONAL_TOPIC}-0"))
        assert states[prepared - 1] == ("Ongoing", f"{TRANSACTIONAL_TOPIC}-0")
        assert states[prepared + 1] == (f"Complete{outcome}", "")
    assert states[-1] == ("CompleteCommit", "")
