"""Restoration speed of a state store from its changelog: kfk.streams, and Apache Kafka Streams 4.4.0 (Java) as the
anchor, restoring the same changelog on a kfk broker started here.

    python bench/bench_streams_restore.py [--megabytes 100] [--value-bytes 1024] [--partitions 3] [--runs kfk,java]

The application is a reduce keeping each key's last value in store "store" (RocksDB). Its changelog,
<application.id>-store-changelog, is filled directly with --megabytes of distinct keys and --value-bytes values
over --partitions partitions (the input topic stays empty); then each run starts one instance of the application
on an empty state directory, so that every task restores its whole changelog partition. The restoration time runs
from the first task's restore start to the last one's end (kfk: around kfk.streams' restore_stores; Java: a global
StateRestoreListener); the figure is changelog MB/s (keys and values) and records/s, and start-to-RUNNING beside it.
kfk's run and Java's use the same application.id one after the other, so they read the very same changelog.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import kfk.streams.kafka_streams as kafka_streams  # noqa: E402
from kfk.client import Admin, NewTopic, Producer  # noqa: E402
from kfk.streams import KafkaStreams, State, StreamsBuilder  # noqa: E402
from kfk.streams.serdes import Serdes  # noqa: E402
from kfk.testing.apache_kafka import MavenUnavailable, cache_dir, compile_java, maven_jars  # noqa: E402
from kfk.testing.broker import start_broker  # noqa: E402
from kfk.testing.plugin import TEST_OVERRIDES  # noqa: E402

KAFKA_STREAMS_VERSION = "4.4.0"
JAVA_SOURCE = Path(__file__).parent / "java" / "RestoreBench.java"


def fill_changelog(bootstrap: str, application_id: str, input_topic: str, partitions: int, records: int,
                   value_bytes: int) -> int:
    """The empty input topic and the changelog holding `records` distinct keys; returns the changelog's bytes
    (keys and values)."""
    changelog = f"{application_id}-store-changelog"
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(input_topic, partitions, 1),
                             NewTopic(changelog, partitions, 1, {"cleanup.policy": "compact"})])
    total = 0
    with Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1 << 20}) as producer:
        for index in range(records):
            key, value = f"key-{index:010d}".encode(), os.urandom(value_bytes)  # incompressible, as RocksDB sees it
            producer.send(changelog, value, key, partition=index % partitions)
            total += len(key) + len(value)
    return total


def run_kfk(bootstrap: str, application_id: str, input_topic: str, state_dir: Path, keys: int
            ) -> tuple[int, float, float]:
    """Records restored, seconds from the first restore's start to the last one's end, seconds to RUNNING; the
    store is then checked to hold every key."""
    spans: list[tuple[float, float, int]] = []
    restore_stores = kafka_streams.restore_stores

    def timed(*args, **kwargs) -> dict:
        began = time.monotonic()
        restored = restore_stores(*args, **kwargs)
        spans.append((began, time.monotonic(), sum(restored.values())))
        return restored

    kafka_streams.restore_stores = timed  # type: ignore[assignment]
    builder = StreamsBuilder()
    (builder.stream(input_topic, value_serde=Serdes.bytes()).group_by_key()
     .reduce(lambda older, newer: newer, "store", value_serde=Serdes.bytes()))
    streams = KafkaStreams(builder.build(), {"application.id": application_id, "bootstrap.servers": bootstrap,
                                             "state.dir": str(state_dir), "default.key.serde": "string"})
    try:
        started = time.monotonic()
        streams.start()
        if streams.wait_for_state(State.RUNNING, State.ERROR, timeout=900) is not State.RUNNING:
            raise SystemExit(f"kfk.streams did not reach RUNNING: {streams.error!r}")
        running = time.monotonic() - started
        held = streams.store("store").approximate_num_entries()
        if held != keys:
            raise SystemExit(f"kfk.streams' store holds {held} keys after restoring, not {keys}")
    finally:
        streams.close()
        kafka_streams.restore_stores = restore_stores
    return (sum(restored for _, _, restored in spans), max(end for _, end, _ in spans) - min(s for s, _, _ in spans),
            running)


def run_java(bootstrap: str, application_id: str, input_topic: str, state_dir: Path, tasks: int
             ) -> tuple[int, float, float]:
    jars = maven_jars(cache_dir() / "kafka-streams" / KAFKA_STREAMS_VERSION,
                      [("org.apache.kafka", "kafka-streams", KAFKA_STREAMS_VERSION),
                       ("org.slf4j", "slf4j-nop", "1.7.36")], f"Kafka Streams {KAFKA_STREAMS_VERSION}")
    classpath = ":".join(map(str, jars))
    classes = compile_java([JAVA_SOURCE], classpath)
    java = shutil.which("java") or "java"
    done = subprocess.run([java, "-Xmx1g", "-cp", f"{classes}:{classpath}", "RestoreBench", bootstrap,
                           application_id, input_topic, str(state_dir), str(tasks)],
                          capture_output=True, text=True, timeout=900)
    lines = [line for line in done.stdout.splitlines() if line and line[0].isdigit()]
    if done.returncode != 0 or not lines:
        raise SystemExit(f"RestoreBench failed ({done.returncode}):\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}")
    records, restore_s, running_s = lines[-1].split()
    return int(records), float(restore_s), float(running_s)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--megabytes", type=float, default=100)
    parser.add_argument("--value-bytes", type=int, default=1024)
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--runs", default="kfk,java", help="which to run, in order: kfk, java")
    args = parser.parse_args()
    records = int(args.megabytes * 1_000_000 / args.value_bytes)
    with tempfile.TemporaryDirectory(prefix="bench-streams-restore-") as directory:
        broker = start_broker(Path(directory) / "broker", dict(TEST_OVERRIDES))
        try:
            bootstrap = broker.bootstrap_servers
            application_id, input_topic = f"restore-{time.monotonic_ns()}", f"input-{time.monotonic_ns()}"
            began = time.monotonic()
            size = fill_changelog(bootstrap, application_id, input_topic, args.partitions, records, args.value_bytes)
            print(f"changelog: {records:,} records, {size / 1e6:.1f} MB over {args.partitions} partitions "
                  f"(filled in {time.monotonic() - began:.1f} s)")
            for run in args.runs.split(","):
                state_dir = Path(directory) / f"state-{run}"
                shutil.rmtree(state_dir, ignore_errors=True)
                try:
                    if run == "kfk":
                        restored, seconds, running = run_kfk(bootstrap, application_id, input_topic, state_dir,
                                                                    records)
                    else:
                        restored, seconds, running = run_java(bootstrap, application_id, input_topic, state_dir,
                                                              args.partitions)
                except MavenUnavailable as error:
                    print(f"{run:5} skipped: {error}")
                    continue
                megabytes = size / 1e6 * restored / records
                print(f"{run:5} restored {restored:,} records ({megabytes:.1f} MB) in {seconds:.2f} s: "
                      f"{megabytes / seconds:.1f} MB/s, {restored / seconds:,.0f} records/s "
                      f"(start to RUNNING {running:.2f} s)")
        finally:
            broker.stop()


if __name__ == "__main__":
    main()
