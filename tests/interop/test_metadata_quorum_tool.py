"""`kfk metadata-quorum describe` prints what kafka-metadata-quorum.sh prints: both tools against a kfk broker and
against an Apache Kafka node, through a broker listener and (Apache Kafka) a controller listener. Offsets and
times move between the two runs (Apache Kafka appends NoOpRecords every 500 ms), so numbers are compared by shape."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from kfk.testing.apache_kafka import ApacheKafka, run_kafka_tool

MODES = [["describe", "--status"], ["describe", "--replication"], ["describe", "--replication", "--human-readable"]]


@pytest.fixture(scope="module")
def apache_kafka(tmp_path_factory: pytest.TempPathFactory):
    with ApacheKafka(tmp_path_factory.mktemp("apache-kafka")) as node:
        yield node


def _shape(text: str) -> list[str]:
    """The output with what moves between two runs replaced: offsets, times, lags."""
    text = re.sub(r"^(HighWatermark|MaxFollowerLag|MaxFollowerLagTimeMs):( +)\d+", r"\1:\2#", text, flags=re.M)
    text = re.sub(r"\d+ ms ago *", "# ms ago", text)
    lines = text.splitlines()
    if lines and lines[0].startswith("NodeId\t"):  # the table: every numeric cell, its padding too
        lines = [re.sub(r"\d+ *\t", "#\t", line) for line in lines]
    return lines


def _both(address_flag: str, address: str, mode: list[str]) -> tuple[list[str], list[str]]:
    """Kafka's tool and kfk's, both given Kafka's documented order (the connection options before the subcommand,
    the only order kafka-metadata-quorum.sh takes); kfk's own order (after it) prints the same."""
    kafka = run_kafka_tool("metadata-quorum", [address_flag, address, *mode])
    assert kafka.returncode == 0, kafka.stderr[-3000:]
    outputs = []
    for args in ([address_flag, address, *mode], [*mode, address_flag, address]):
        kfk = subprocess.run([sys.executable, "-m", "kfk", "metadata-quorum", *args], capture_output=True, text=True,
                             timeout=60)
        assert kfk.returncode == 0, (args, kfk.stderr[-3000:])
        outputs.append(_shape(kfk.stdout))
    assert outputs[0] == outputs[1]
    return _shape(kafka.stdout), outputs[0]


@pytest.mark.parametrize("mode", MODES, ids=" ".join)
def test_against_a_kfk_broker(kfk_broker: str, mode: list[str]) -> None:
    kafka, kfk = _both("--bootstrap-server", kfk_broker, mode)
    assert kfk == kafka
    assert any(line.startswith(("LeaderId:               1", "NodeId")) for line in kfk)


@pytest.mark.parametrize("address", ["--bootstrap-server", "--bootstrap-controller"])
@pytest.mark.parametrize("mode", MODES, ids=" ".join)
def test_against_apache_kafka(apache_kafka: ApacheKafka, address: str, mode: list[str]) -> None:
    target = apache_kafka.bootstrap_server if address == "--bootstrap-server" \
        else f"127.0.0.1:{apache_kafka.controller_port}"
    kafka, kfk = _both(address, target, mode)
    assert kfk == kafka
    if mode == ["describe", "--status"]:
        assert f'"endpoints": ["CONTROLLER://127.0.0.1:{apache_kafka.controller_port}"]' in "\n".join(kfk)


def test_bad_flags_are_one_line(kfk_broker: str) -> None:
    for args, message in ((["describe"], "give one of --status or --replication"),
                          (["describe", "--status", "--human-readable"], "--human-readable goes with --replication")):
        result = subprocess.run([sys.executable, "-m", "kfk", "metadata-quorum", *args, "--bootstrap-server",
                                 kfk_broker], capture_output=True, text=True, timeout=60)
        assert result.returncode == 1 and result.stderr.strip() == f"kfk: {message}"
