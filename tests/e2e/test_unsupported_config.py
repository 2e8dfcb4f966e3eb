"""`kfk server start` with a Kafka key kfk does not act on (kfk/config_support.py): a feature kfk lacks stops the
start with one line and a non-zero exit code, before anything is written; a key whose job kfk does anyway (a thread
count) is warned about once and the broker serves."""

from __future__ import annotations

import subprocess
import sys

import pytest

from kfk.testing.broker import BrokerProcess

pytestmark = pytest.mark.integration


def test_a_feature_kfk_lacks_stops_the_start_in_one_line(tmp_path) -> None:
    data = tmp_path / "data"
    started = subprocess.run(
        [sys.executable, "-m", "kfk", "server", "start", "--override", "remote.log.storage.system.enable=true",
         "--override", f"log.dirs={data}", "--override", "listeners=PLAINTEXT://127.0.0.1:0"],
        capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert started.returncode != 0
    assert started.stderr.splitlines() == [
        "kfk: remote.log.storage.system.enable=true is not supported by kfk (feature: tiered storage (KIP-405)); "
        "remove it or leave it at its default"]
    assert not data.exists()


def test_a_thread_count_is_warned_about_once_and_the_broker_serves(tmp_path) -> None:
    broker = BrokerProcess(tmp_path / "data", {"node.id": "1", "process.roles": "broker,controller",
                                               "background.threads": "16", "offsets.topic.replication.factor": "1"},
                           tmp_path / "broker.log")
    broker.start(timeout=60)
    try:
        warnings = [line for line in broker.output().splitlines() if "background.threads" in line]
    finally:
        assert broker.stop() == 0
    assert len(warnings) == 1
    assert warnings[0].endswith("background.threads=16 has no effect in kfk: kfk's broker is one asyncio event loop "
                                "with executors, not Kafka's thread pools")
