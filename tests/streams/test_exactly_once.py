"""exactly_once_v2 through kill -9: the word count runs as a process, is killed mid-run (SIGKILL: no commit, no
close, an open transaction left behind) and restarted on the same state directory, while more input arrives; at
the end the read_committed output holds, for every word, exactly the counts 1, 2, ..., n in order: nothing
duplicated, nothing lost. The changelog restores the counts after each kill."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

from tests.streams.conftest import create_input, read_to_end, unique_name
from kfk.client import Admin, NewTopic, Producer

ROOT = Path(__file__).resolve().parents[2]
WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"]
ROUNDS = 3
LINES_PER_ROUND = 400


def _lines(round_index: int) -> list[tuple[str, str]]:
    return [(f"k{index}", " ".join(WORDS[(index * 7 + position + round_index) % len(WORDS)]
                                   for position in range(index % 5 + 1)))
            for index in range(LINES_PER_ROUND)]


def _start(args: list[str]) -> subprocess.Popen:
    process = subprocess.Popen([sys.executable, "-m", "tests.streams.wordcount_app", *args], cwd=ROOT,
                               env=dict(os.environ, PYTHONPATH=str(ROOT)), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    line = process.stdout.readline().strip()
    assert line == "RUNNING", f"{line}\n{process.stderr.read() if process.poll() is not None else ''}"
    return process


def _committed_output(bootstrap: str, topic: str) -> dict[str, list[int]]:
    counts: dict[str, list[int]] = defaultdict(list)
    for record in read_to_end(bootstrap, topic):
        counts[record.key.decode()].append(int.from_bytes(record.value, "big"))
    return counts


def test_kill_9_and_restart_gives_each_count_once(streams_broker, tmp_path) -> None:
    bootstrap = streams_broker.bootstrap_servers
    input_topic, output, application_id = unique_name("lines"), unique_name("counts"), unique_name("eos-wc")
    create_input(bootstrap, input_topic, 2, _lines(0))
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(output, 2, 1)])
    args = [bootstrap, application_id, input_topic, output, str(tmp_path / "state"), "exactly_once_v2"]
    expected: Counter = Counter(word for _, line in _lines(0) for word in line.split(" "))
    for round_index in range(1, ROUNDS + 1):
        already = sum(expected.values()) if round_index > 1 else 0
        process = _start(args)
        if round_index > 1:
            with Producer({"bootstrap.servers": bootstrap}) as producer:
                for key, line in _lines(round_index):
                    producer.send(input_topic, line.encode(), key.encode())
            expected.update(word for _, line in _lines(round_index) for word in line.split(" "))
        # Kill as soon as the application has committed some of this round's work (usually not all of it).
        deadline = time.monotonic() + 60
        while sum(map(len, _committed_output(bootstrap, output).values())) <= already:
            assert process.poll() is None, process.stderr.read()
            assert time.monotonic() < deadline, "the application committed nothing in 60 s"
        process.send_signal(signal.SIGKILL)
        process.wait()
    process = _start(args)
    try:
        deadline = time.monotonic() + 90
        while True:
            counts = _committed_output(bootstrap, output)
            if {word: values[-1] for word, values in counts.items()} == dict(expected):
                break
            assert time.monotonic() < deadline, f"counts {counts} never reached {expected}"
            time.sleep(0.2)
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(60)
    assert {word: values for word, values in counts.items()} == {
        word: list(range(1, total + 1)) for word, total in expected.items()}
