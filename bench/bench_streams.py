"""kfk.streams' word count: records/s with at_least_once and exactly_once_v2, on a kfk broker started here.

    python bench/bench_streams.py [--lines 20000] [--partitions 2] [--threads 1] [--cache-bytes 10485760]
                                  [--commit-interval-ms 100]

The input topic is filled first (--lines lines of 8 words); the clock runs from start() until every word's final
count is on the output topic (read_committed), so it includes the group's join and the internal topics' creation.
The figure is input lines processed per second and words (records through the repartition topic and the count) per
second, and how many records the output got: with the record cache (statestore.cache.max.bytes, Kafka's 10 MiB by
default; 0 turns it off) a word's counts between two commits (every --commit-interval-ms under both guarantees)
leave as one record.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kfk.client import Admin, Consumer, NewTopic, Producer  # noqa: E402
from kfk.streams import KafkaStreams, Serdes, State, StreamsBuilder  # noqa: E402
from kfk.testing.broker import start_broker  # noqa: E402
from kfk.testing.plugin import TEST_OVERRIDES  # noqa: E402

WORDS = [f"word{index}" for index in range(500)]


def _line(index: int) -> str:
    return " ".join(WORDS[(index * 8 + offset) % len(WORDS)] for offset in range(8))


def word_count_topics(bootstrap: str, input_topic: str, output: str, lines: int, partitions: int) -> None:
    """The input topic filled with `lines` lines of 8 words (500 distinct words), and an empty output topic."""
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(input_topic, partitions, 1), NewTopic(output, partitions, 1)])
    with Producer({"bootstrap.servers": bootstrap, "linger.ms": 20}) as producer:
        for index in range(lines):
            producer.send(input_topic, _line(index).encode(), str(index).encode())


def run(bootstrap: str, guarantee: str, lines: int, partitions: int, threads: int, state_dir: str,
        cache_bytes: int, commit_interval_ms: int) -> tuple[float, int]:
    """Seconds from start() to the final counts, and the output's records."""
    suffix = f"{guarantee}-{time.monotonic_ns()}"
    input_topic, output = f"lines-{suffix}", f"counts-{suffix}"
    word_count_topics(bootstrap, input_topic, output, lines, partitions)
    builder = StreamsBuilder()
    (builder.stream(input_topic).flat_map_values(str.split).group_by(lambda key, word: word).count("counts")
     .to_stream().to(output, value_serde=Serdes.long()))
    streams = KafkaStreams(builder.build(), {
        "application.id": f"bench-{suffix}", "bootstrap.servers": bootstrap, "state.dir": state_dir,
        "processing.guarantee": guarantee, "default.key.serde": "string", "default.value.serde": "string",
        "num.stream.threads": threads, "statestore.cache.max.bytes": cache_bytes,
        "commit.interval.ms": commit_interval_ms})
    expected = {word.encode(): count.to_bytes(8, "big")
                for word, count in Counter(word for index in range(lines) for word in _line(index).split()).items()}
    start = time.monotonic()
    streams.start()
    seen, last = 0, {}
    with Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{suffix}",
                   "auto.offset.reset": "earliest", "isolation.level": "read_committed"}) as reader:
        reader.subscribe([output])
        while last != expected:
            records = reader.poll(0.5)
            seen += len(records)
            last.update((record.key, record.value) for record in records)
            if streams.state is State.ERROR:
                raise SystemExit(f"streams failed: {streams.error!r}")
    elapsed = time.monotonic() - start
    streams.close()
    return elapsed, seen


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", type=int, default=20_000)
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--cache-bytes", type=int, default=10 * 1024 * 1024)
    parser.add_argument("--commit-interval-ms", type=int, default=100)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-streams-") as directory:
        broker = start_broker(Path(directory) / "broker", dict(TEST_OVERRIDES))
        try:
            for guarantee in ("at_least_once", "exactly_once_v2"):
                elapsed, outputs = run(broker.bootstrap_servers, guarantee, args.lines, args.partitions,
                                       args.threads, str(Path(directory) / "state"), args.cache_bytes,
                                       args.commit_interval_ms)
                print(f"{guarantee:16} {args.lines} lines in {elapsed:.1f} s: {args.lines / elapsed:,.0f} lines/s, "
                      f"{args.lines * 8 / elapsed:,.0f} words/s, {outputs:,} output records")
        finally:
            broker.stop()


if __name__ == "__main__":
    main()
