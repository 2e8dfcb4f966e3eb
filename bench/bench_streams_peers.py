"""The word count beside the other stream processors: kfk.streams, Quix Streams, Faust (faust-streaming) and Apache
Kafka Streams 4.4.0 (Java), each on the same kfk broker and the same input, at least once and exactly once, with one
and two instances (processes).

    python bench/bench_streams_peers.py [--lines 20000] [--partitions 2] [--engines kfk,quix,faust,java]
                                        [--instances 1,2] [--deadline-s 600]

Quix Streams and Faust are not kfk's dependencies: install them where this runs (`pip install quixstreams
faust-streaming`); an engine that is missing is reported as such. Every engine splits each line of 8 words, groups
the words by word through a repartition topic, counts them in a state store and writes every new count to the
output topic (Kafka Streams and kfk.streams with their record caches off: statestore.cache.max.bytes=0); the clock runs from the workers' start
until all lines x 8 counts are on the output topic (read_committed), so it includes starting the processes and
joining the group. The figure is input lines per second.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench_streams import word_count_topics  # noqa: E402
from kfk.client import Consumer  # noqa: E402
from kfk.testing.broker import start_broker  # noqa: E402
from kfk.testing.plugin import TEST_OVERRIDES  # noqa: E402

GUARANTEES = ("at_least_once", "exactly_once_v2")


# --- the workers (run as `python bench/bench_streams_peers.py --worker ENGINE ...`) ----------------------------------

def kfk_worker(bootstrap: str, group: str, source: str, output: str, guarantee: str, state_dir: str) -> None:
    from kfk.streams import KafkaStreams, Serdes, StreamsBuilder

    builder = StreamsBuilder()
    (builder.stream(source).flat_map_values(str.split).group_by(lambda key, word: word).count("counts")
     .to_stream().to(output, value_serde=Serdes.long()))
    streams = KafkaStreams(builder.build(), {
        "application.id": group, "bootstrap.servers": bootstrap, "state.dir": state_dir,
        "processing.guarantee": guarantee, "default.key.serde": "string", "default.value.serde": "string",
        "statestore.cache.max.bytes": 0})
    streams.start()
    _wait_for_termination()
    streams.close()


def quix_worker(bootstrap: str, group: str, source: str, output: str, guarantee: str, state_dir: str) -> None:
    from quixstreams import Application

    app = Application(broker_address=bootstrap, consumer_group=group, auto_offset_reset="earliest",
                      state_dir=state_dir, use_changelog_topics=True,
                      processing_guarantee="exactly-once" if guarantee == "exactly_once_v2" else "at-least-once")
    lines = app.dataframe(app.topic(source, key_deserializer="str", value_deserializer="str"))
    words = lines.apply(lambda line: line.split(), expand=True).group_by(lambda word: word, name="word")

    def count(word: str, state) -> int:
        total = state.get("count", 0) + 1
        state.set("count", total)
        return total

    words.apply(count, stateful=True).to_topic(app.topic(output, key_serializer="str", value_serializer="int"))
    app.run()


def faust_worker(bootstrap: str, group: str, source: str, output: str, guarantee: str, state_dir: str) -> None:
    import faust

    app = faust.App(group, broker=f"kafka://{bootstrap}", store="memory://", datadir=state_dir,
                    processing_guarantee="exactly_once" if guarantee == "exactly_once_v2" else "at_least_once",
                    topic_partitions=int(os.environ["BENCH_PARTITIONS"]), web_enabled=False)
    lines = app.topic(source, key_type=bytes, value_type=str, value_serializer="raw")
    words = app.topic(f"{group}-words", key_type=str, value_type=str, value_serializer="raw", internal=True,
                      partitions=int(os.environ["BENCH_PARTITIONS"]))
    counts_out = app.topic(output, key_type=str, value_type=int, value_serializer="json")
    counts = app.Table("counts", default=int)

    @app.agent(lines)
    async def split(stream):
        async for line in stream:
            for word in line.split():
                await words.send(key=word, value=word)

    @app.agent(words)
    async def count(stream):
        async for word in stream:
            counts[word] += 1
            await counts_out.send(key=word, value=counts[word])

    sys.argv = [sys.argv[0], "worker", "-l", "warn", "--without-web"]
    app.main()


def _wait_for_termination() -> None:
    import signal
    import threading

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    stop.wait()


WORKERS = {"kfk": kfk_worker, "quix": quix_worker, "faust": faust_worker}


# --- the bench --------------------------------------------------------------------------------------------------

class DidNotFinish(Exception):
    """An engine that failed or did not write every count within the time allowed (10 minutes)."""


def available(engine: str) -> str | None:
    """Why `engine` cannot run here (None: it can)."""
    module = {"quix": "quixstreams", "faust": "faust"}.get(engine)
    if module is not None:
        try:
            __import__(module)
        except ImportError:
            return f"not installed (pip install {'quixstreams' if engine == 'quix' else 'faust-streaming'})"
    return None


def java_command(bootstrap: str, group: str, source: str, output: str, guarantee: str, state_dir: str,
                 records: int) -> list[str]:
    from kfk.testing.apache_kafka import cache_dir, compile_java, java_command as kafka_java, maven_jars

    jars = maven_jars(cache_dir() / "kafka-streams" / "4.4.0", [("org.apache.kafka", "kafka-streams", "4.4.0"),
                                                               ("org.slf4j", "slf4j-simple", "1.7.36")],
                      "Kafka Streams 4.4.0")
    classpath = ":".join(map(str, jars))
    classes = compile_java(ROOT / "tests" / "streams" / "java", classpath)
    return kafka_java("StreamsOracle", ["run", "wordcount", bootstrap, group, source, output, state_dir, guarantee,
                                        str(records)], classpath, [classes])


def run(engine: str, bootstrap: str, lines: int, partitions: int, instances: int, guarantee: str,
        directory: Path, deadline_s: float) -> float:
    suffix = f"{engine}-{guarantee}-{instances}-{time.monotonic_ns()}"
    source, output, group = f"lines-{suffix}", f"counts-{suffix}", f"bench-{suffix}"
    word_count_topics(bootstrap, source, output, lines, partitions)
    expected = lines * 8
    env = dict(os.environ, PYTHONPATH=str(ROOT), BENCH_PARTITIONS=str(partitions))
    start = time.monotonic()
    workers: list[subprocess.Popen] = []
    logs: list[Path] = []
    for instance in range(instances):
        state_dir = str(directory / f"state-{suffix}-{instance}")
        if engine == "java":
            command = java_command(bootstrap, group, source, output, guarantee, state_dir, expected)
        else:
            command = [sys.executable, __file__, "--worker", engine, bootstrap, group, source, output, guarantee,
                       state_dir]
        log = directory / f"worker-{suffix}-{instance}.log"  # a file: a pipe nobody reads would block the worker
        with open(log, "w") as output_file:
            workers.append(subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=output_file))
        logs.append(log)
    seen = 0
    try:
        with Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{suffix}",
                       "auto.offset.reset": "earliest", "isolation.level": "read_committed"}) as reader:
            reader.subscribe([output])
            deadline = time.monotonic() + deadline_s
            while seen < expected:
                seen += len(reader.poll(0.5))
                failed = [log for worker, log in zip(workers, logs) if worker.poll() not in (None, 0)]
                if failed or time.monotonic() > deadline:
                    raise DidNotFinish(f"{seen}/{expected} counts after {time.monotonic() - start:.0f} s; "
                                       f"{failed[0].read_text()[-2000:] if failed else 'timed out'}")
        return time.monotonic() - start
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.terminate()
        for worker in workers:
            try:
                worker.wait(30)
            except subprocess.TimeoutExpired:
                worker.kill()


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--worker":
        WORKERS[sys.argv[2]](*sys.argv[3:9])
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", type=int, default=20_000)
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--engines", default="kfk,quix,faust,java")
    parser.add_argument("--instances", default="1,2")
    parser.add_argument("--deadline-s", type=float, default=600, help="give up on a run after this long")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-streams-peers-") as directory:
        broker = start_broker(Path(directory) / "broker", dict(TEST_OVERRIDES))
        try:
            for engine in args.engines.split(","):
                missing = available(engine)
                if missing:
                    print(f"{engine:6} {missing}")
                    continue
                for guarantee in GUARANTEES:
                    for instances in map(int, args.instances.split(",")):
                        label = f"{engine:6} {guarantee:16} {instances} instance(s):"
                        try:
                            elapsed = run(engine, broker.bootstrap_servers, args.lines, args.partitions, instances,
                                          guarantee, Path(directory), args.deadline_s)
                        except DidNotFinish as error:
                            print(f"{label} did not finish: {error}", flush=True)
                            continue
                        print(f"{label} {args.lines} lines in {elapsed:.1f} s, {args.lines / elapsed:,.0f} lines/s",
                              flush=True)
        finally:
            broker.stop()


if __name__ == "__main__":
    main()
