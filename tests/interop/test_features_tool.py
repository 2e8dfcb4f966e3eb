"""`kfk features` prints what kafka-features.sh prints, line for line and with its exit code, against Apache Kafka
(the session's node, so only dry runs and refusals: its levels stay as they are). The same against kfk, with real
changes, is in tests/cluster/test_features.py. Epochs move between two runs (Apache Kafka appends a NoOpRecord every
500 ms), so describe's are compared by shape."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from kfk.testing.apache_kafka import ApacheKafka, run_kafka_tool

pytestmark = [pytest.mark.integration]

COMMANDS = [
    ["describe"],
    ["upgrade", "--feature", "group.version=1", "--dry-run"],
    ["downgrade", "--feature", "transaction.version=1", "--dry-run"],
    ["upgrade", "--feature", "transaction.version=9", "--feature", "group.version=1", "--dry-run"],
    ["disable", "--feature", "transaction.version", "--unsafe", "--dry-run"],
    ["feature-dependencies", "--feature", "eligible.leader.replicas.version=1", "--feature", "group.version=1"],
    ["upgrade"],
    ["upgrade", "--feature", "transaction.version"],
]


def _lines(text: str) -> list[str]:
    return re.sub(r"Epoch: \d+$", "Epoch: #", text, flags=re.M).splitlines()


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_same_lines_as_kafka_features(apache_kafka: ApacheKafka, command: list[str]) -> None:
    args = ["--bootstrap-server", apache_kafka.bootstrap_server, *command]
    kafka = run_kafka_tool("features", args)
    kfk = subprocess.run([sys.executable, "-m", "kfk", "features", *args], capture_output=True, text=True, timeout=60,
                         stdin=subprocess.DEVNULL)
    assert (_lines(kfk.stdout), kfk.returncode) == (_lines(kafka.stdout), kafka.returncode), kafka.stderr[-2000:]
    if kafka.returncode:  # the reason: Kafka's last line on stderr, kfk's one line (after its "kfk: ")
        assert kfk.stderr.strip().removeprefix("kfk: ") == kafka.stderr.strip().splitlines()[-1]
    else:
        assert kfk.stdout
