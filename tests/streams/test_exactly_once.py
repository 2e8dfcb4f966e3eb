"""exactly_once_v2 through kill -9: the word count runs as two instances (processes, static members of one group, a
state directory each); ten times one of them, picked at random, is killed (SIGKILL: no commit, no close, an open
transaction left behind) at a random point (as soon as it runs, after a random delay, or once it has committed some
of the round's work) and restarted on its state directory, while more input arrives. At the end the read_committed
output holds, for every word, exactly the counts 1, 2, ..., n in order: nothing duplicated, nothing lost. The
changelog restores the counts after each kill. With the record cache on (Kafka's default), each commit carries a
word's latest count only: its committed counts still only go up (nothing counted twice), and end at n (nothing
lost). The seed is printed: a failure replays with KFK_EOS_SEED."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from tests.streams.conftest import create_input, read_to_end, unique_name
from kfk.client import Admin, NewTopic, Producer

ROOT = Path(__file__).resolve().parents[2]
WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"]
RESTARTS = 10
LINES_PER_ROUND = 150
INSTANCES = ("a", "b")
KILL_POINTS = ("running", "delay", "committed")

def _lines(round_index: int) -> list[tuple[str, str]]:
    return [(f"k{index}", " ".join(WORDS[(index * 7 + position + round_index) % len(WORDS)]
                                   for position in range(index % 5 + 1)))
            for index in range(LINES_PER_ROUND)]


def _start(args: list[str]) -> subprocess.Popen:
    """Start an instance; returns once it runs its tasks."""
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


@pytest.mark.parametrize("cache_bytes", [0, 10 * 1024 * 1024])
def test_kill_9_and_restart_gives_each_count_once(cache_bytes: int, streams_broker, tmp_path) -> None:
    seed = int(os.environ.get("KFK_EOS_SEED", time.time_ns() % 1_000_000))
    print(f"KFK_EOS_SEED={seed}")
    rng = random.Random(seed)
    bootstrap = streams_broker.bootstrap_servers
    input_topic, output, application_id = unique_name("lines"), unique_name("counts"), unique_name("eos-wc")
    create_input(bootstrap, input_topic, 2, _lines(0))
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(output, 2, 1)])

    def args(instance: str) -> list[str]:
        return [bootstrap, application_id, input_topic, output, str(tmp_path / f"state-{instance}"),
                "exactly_once_v2", f"-{instance}", str(cache_bytes)]

    expected: Counter = Counter(word for _, line in _lines(0) for word in line.split(" "))
    processes = {instance: _start(args(instance)) for instance in INSTANCES}
    try:
        for round_index in range(1, RESTARTS + 1):
            already = sum(map(len, _committed_output(bootstrap, output).values()))
            with Producer({"bootstrap.servers": bootstrap}) as producer:
                for key, line in _lines(round_index):
                    producer.send(input_topic, line.encode(), key.encode())
            expected.update(word for _, line in _lines(round_index) for word in line.split(" "))
            victim, point = rng.choice(INSTANCES), rng.choice(KILL_POINTS)
            if point == "delay":
                time.sleep(rng.uniform(0, 1.5))
            elif point == "committed":  # usually before the round's work is all committed
                deadline = time.monotonic() + 60
                while sum(map(len, _committed_output(bootstrap, output).values())) <= already:
                    for process in processes.values():
                        assert process.poll() is None, process.stderr.read()
                    assert time.monotonic() < deadline, "the application committed nothing in 60 s"
            processes[victim].send_signal(signal.SIGKILL)
            processes[victim].wait()
            processes[victim] = _start(args(victim))
        deadline = time.monotonic() + 90
        while True:
            counts = _committed_output(bootstrap, output)
            if {word: values[-1] for word, values in counts.items()} == dict(expected):
                break
            assert time.monotonic() < deadline, f"counts {counts} never reached {expected} (seed {seed})"
            time.sleep(0.2)
    finally:
        for process in processes.values():
            process.send_signal(signal.SIGTERM)
        for process in processes.values():
            process.wait(60)
    if cache_bytes == 0:
        assert {word: values for word, values in counts.items()} == {
            word: list(range(1, total + 1)) for word, total in expected.items()}, f"seed {seed}"
    else:
        assert all(values == sorted(set(values)) for values in counts.values()), f"{counts} (seed {seed})"
        assert sum(map(len, counts.values())) < sum(expected.values()), "the cache left fewer records"
