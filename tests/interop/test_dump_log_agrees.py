"""`kfk dump-log` prints what Apache Kafka's DumpLogSegments prints, on the same files, both brokers' files.

Both tools run on every segment file of the partitions holding data (logs, indexes, time indexes, producer
snapshots, transaction indexes, __cluster_metadata, the internal topics' non-empty logs) with each mode both
have: plain, --deep-iteration --print-data-log, --index-sanity-check, --verify-index-only. Batch and record
lines are compared field by field, every other line as text. (--offsets-decoder and the other decoders are
tflags' flags on kfk's side; they are compared where both have them.)

Known difference, kept on purpose: a KRaft LEADER_CHANGE control record. Apache Kafka 4.0.2's tool prints it
undecoded, ``controlType: LEADER_CHANGE(2)``; kfk prints ``LeaderChange: {json}`` (tests/commands/test_dump_log.py
pins that form). Every other line must agree.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from kfk.testing.apache_kafka import run_kafka_tool

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
    files = ",".join(map(str, written.segment_files()))
    kafka = run_kafka_tool("dump-log", ["--files", files, *MODES[mode]])
    kfk = subprocess.run([sys.executable, "-m", "kfk", "dump-log", "--files", files, *MODES[mode]],
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


def _difference(kafka_line: str, kfk_line: str) -> str | None:
    """None when the lines agree; else which fields (or the text) differ."""
    if not kafka_line.startswith(("baseOffset: ", "| offset: ")):
        return None if kafka_line == kfk_line else "lines differ"
    kafka_fields, kfk_fields = fields(kafka_line), fields(kfk_line)
    if kafka_fields.get("controlType") == "LEADER_CHANGE(2)" and "LeaderChange" in kfk_fields:
        del kafka_fields["controlType"], kfk_fields["LeaderChange"]  # the known difference (module docstring)
    if kafka_fields == kfk_fields:
        return None
    names = [name for name in dict.fromkeys([*kafka_fields, *kfk_fields])
             if kafka_fields.get(name) != kfk_fields.get(name)]
    return "fields differ: " + ", ".join(names)
