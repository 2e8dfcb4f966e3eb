"""`kfk ui` page load times against a `kfk server start` subprocess.

    python bench/bench_ui.py [--partitions 1000] [--topics 100] [--repeat 5]

Figures (median and max of --repeat loads, after one untimed warm-up load each): the overview (every topic's
Kafka Manager statistics, so Metadata + ListOffsets of every partition + the groups' offsets) and one topic page of
a --partitions-partition topic (its partitions with log start and end offsets, and its configs), measured as the
server's full response time over HTTP (urllib, the whole body read): what a browser waits before it can render.
The cluster holds --topics topics of 10 partitions besides the big one, and one consumer group with commits.
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kfk.testing.broker import start_broker


def timed_get(url: str) -> float:
    start = time.perf_counter()
    with urllib.request.urlopen(url, timeout=120) as response:
        response.read()
        assert response.status == 200, response.status
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--topics", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        broker = start_broker(Path(directory), {"offsets.topic.replication.factor": "1",
                                                "group.initial.rebalance.delay.ms": "0"})
        console = None
        try:
            bootstrap = broker.bootstrap_servers
            admin = AdminClient({"bootstrap.servers": bootstrap})
            topics = [NewTopic("big", args.partitions, 1)] + [NewTopic(f"t{i}", 10, 1) for i in range(args.topics)]
            for future in admin.create_topics(topics, operation_timeout=60).values():
                future.result(120)
            producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
            for index in range(20_000):
                producer.produce("big", value=b"x" * 100, partition=index % args.partitions)
            producer.flush(60)
            del producer  # its threads would log the broker going away at the end
            consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-ui",
                                 "auto.offset.reset": "earliest"})
            consumer.subscribe(["t0"])
            consumer.poll(5)
            consumer.close()
            console = subprocess.Popen([sys.executable, "-m", "kfk", "ui", "--bootstrap-server", bootstrap,
                                        "--port", "0"], stderr=subprocess.PIPE, text=True)
            url = re.search(r"(http://\S+/)", console.stderr.readline()).group(1)
            rows = []
            for name, path in (("overview", ""), (f"topic page, {args.partitions} partitions", "topics/big")):
                timed_get(url + path)
                times = [timed_get(url + path) for _ in range(args.repeat)]
                rows.append((name, statistics.median(times), max(times)))
            total = args.partitions + 10 * args.topics
            print(f"kfk ui page loads ({args.topics + 1} topics, {total} partitions; {args.repeat} loads each)")
            for name, median, worst in rows:
                print(f"  {name:<34} median {median * 1000:8.1f} ms   max {worst * 1000:8.1f} ms")
        finally:
            if console is not None:
                console.terminate()
                console.wait(10)
            broker.stop()


if __name__ == "__main__":
    main()
