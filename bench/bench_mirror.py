"""MirrorMaker 2 between two kfk brokers: replication MB/s, then end-to-end lag at a steady half of that rate.

    python bench/bench_mirror.py [--records 200000] [--record-bytes 1000] [--partitions 2] [--lag-seconds 20]
                                 [--mirror kfk|java]

Starts two kfk brokers and fills the source topic first (confluent-kafka), then starts MirrorMaker 2 (`kfk
connect-mirror-maker`, or Apache Kafka's connect-mirror-maker 4.4.0 with the same mm2.properties) and times the
copy from the first record landing on the target's remote topic to the last (start-up is left out: it is the
group's join and the topics' creation, not replication). Then a producer writes to the source at half the measured
rate for --lag-seconds while a consumer reads the remote topic: the lag of a record is the time it was read on the
target minus its timestamp (set by the producer; MirrorMaker keeps it). Prints MB/s and the lag's median, p99 and
maximum.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from kfk.client import Admin, NewTopic  # noqa: E402
from kfk.testing.broker import start_broker  # noqa: E402
from kfk.testing.plugin import TEST_OVERRIDES  # noqa: E402
from tests.connect.test_mirror_maker import mm2_properties, start_mirror_maker, stop  # noqa: E402

TOPIC = "mirrored"


def end_offsets(bootstrap: str, topic: str, partitions: int) -> int:
    """The sum of the topic's end offsets (0 while it does not exist)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-mirror-offsets"})
    try:
        return sum(consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=5)[1]
                   for partition in range(partitions))
    except Exception:  # noqa: BLE001 - the remote topic is not created yet
        return 0
    finally:
        consumer.close()


def produce(bootstrap: str, count: int, payload: bytes, per_second: float | None = None, topic: str = TOPIC) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "queue.buffering.max.kbytes": 262144})
    started = time.monotonic()
    for index in range(count):
        if per_second is not None:
            delay = started + index / per_second - time.monotonic()
            if delay > 0:
                time.sleep(delay)
        while True:
            try:
                producer.produce(topic, payload, key=str(index).encode())
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    producer.flush(120)


def replicate(directory: Path, source: str, target: str, records: int, payload: bytes, partitions: int,
              java: bool, topic: str = TOPIC, deadline_s: float | None = None
              ) -> tuple[subprocess.Popen, float, int, float]:
    """Fill `topic` on the `source` broker with `records` of `payload` (created here with `partitions`), start
    MirrorMaker 2 (Apache Kafka's when `java`, else kfk's) from cluster A (source) to B (target) and wait until
    the remote topic A.<topic> holds them all. Returns the running MirrorMaker (the caller stops it with stop()),
    records/s from the first record landing on the target to the last, the records already there at the first
    look, and the seconds timed. RuntimeError (MirrorMaker stopped) after `deadline_s` (None: no limit)."""
    remote = f"A.{topic}"
    with Admin({"bootstrap.servers": source}) as admin:
        admin.create_topics([NewTopic(topic, partitions, 1)])
    produce(source, records, payload, topic=topic)
    properties = {**mm2_properties("A", "B", source, target), "A->B.topics": topic,
                  "sync.group.offsets.enabled": "false"}
    mirror = start_mirror_maker(directory, properties, java=java)
    started = time.monotonic()
    try:
        copied = 0
        while copied == 0:
            copied = end_offsets(target, remote, partitions)
            time.sleep(0.05)
            if deadline_s is not None and time.monotonic() - started > deadline_s:
                raise RuntimeError(f"nothing mirrored after {deadline_s:.0f} s")
        first_at, first_count = time.monotonic(), copied
        while copied < records:
            time.sleep(0.05)
            copied = end_offsets(target, remote, partitions)
            if deadline_s is not None and time.monotonic() - started > deadline_s:
                raise RuntimeError(f"{copied} of {records} records mirrored after {deadline_s:.0f} s")
    except BaseException:
        stop(mirror)
        raise
    elapsed = time.monotonic() - first_at
    return mirror, (records - first_count) / elapsed, first_count, elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--record-bytes", type=int, default=1000)
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--lag-seconds", type=float, default=20.0)
    parser.add_argument("--mirror", choices=["kfk", "java"], default="kfk")
    args = parser.parse_args()
    payload = b"x" * args.record_bytes
    remote = f"A.{TOPIC}"
    with tempfile.TemporaryDirectory(prefix="bench-mirror-") as temporary:
        directory = Path(temporary)
        source = start_broker(directory / "source", dict(TEST_OVERRIDES))
        target = start_broker(directory / "target", dict(TEST_OVERRIDES))
        mirror = None
        try:
            mirror, rate, first_count, elapsed = replicate(directory, source.bootstrap_servers,
                                                           target.bootstrap_servers, args.records, payload,
                                                           args.partitions, args.mirror == "java")
            print(f"{args.mirror} MirrorMaker 2: {args.records:,} records of {args.record_bytes} B, "
                  f"{rate:,.0f} records/s, {rate * args.record_bytes / 1e6:.1f} MB/s "
                  f"({args.records - first_count:,} records in {elapsed:.1f} s after the first landed)")

            steady = rate / 2
            count = int(steady * args.lag_seconds)
            consumer = Consumer({"bootstrap.servers": target.bootstrap_servers, "group.id": "bench-mirror-lag",
                                 "enable.auto.commit": False})
            consumer.assign([TopicPartition(remote, partition,
                                            consumer.get_watermark_offsets(TopicPartition(remote, partition))[1])
                             for partition in range(args.partitions)])
            writer = threading.Thread(target=produce, args=(source.bootstrap_servers, count, payload, steady))
            writer.start()
            lags: list[float] = []
            deadline = time.monotonic() + args.lag_seconds + 60
            while len(lags) < count and time.monotonic() < deadline:
                for message in consumer.consume(1000, 0.2):
                    if message.error() is None:
                        lags.append(time.time() * 1000 - message.timestamp()[1])
            writer.join()
            consumer.close()
            lags.sort()
            print(f"lag at {steady:,.0f} records/s ({steady * args.record_bytes / 1e6:.1f} MB/s) for "
                  f"{args.lag_seconds:.0f} s, {len(lags):,} of {count:,} records read: median "
                  f"{statistics.median(lags):.0f} ms, p99 {lags[int(len(lags) * 0.99) - 1]:.0f} ms, "
                  f"max {lags[-1]:.0f} ms")
        finally:
            if mirror is not None:
                stop(mirror)
            source.stop()
            target.stop()


if __name__ == "__main__":
    main()
