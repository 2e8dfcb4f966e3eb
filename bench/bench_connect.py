"""Kafka Connect file pipeline: FileStreamSource -> topic -> FileStreamSink on `kfk connect standalone`.

    python bench/bench_connect.py [--lines 100000] [--line-bytes 100] [--converter string|json] [--worker kfk|java]

Starts a kfk broker and one standalone worker (a subprocess, as users run it: kfk's, or Apache Kafka's own
connect-standalone 4.4.0 with the same properties) with both connectors, writes
--lines lines of --line-bytes bytes to the source file first, and times from the worker's start until the sink
file holds every line. Prints records/s and MB/s of the whole pipeline (read, convert, produce, consume, convert,
write), which includes the worker's start-up and up to one offset.flush.interval.ms (1 s here: the sink file is
flushed when offsets are committed), so it is a lower bound for long runs.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from kfk.client import Admin, NewTopic  # noqa: E402
from kfk.testing.broker import start_broker  # noqa: E402
from kfk.testing.plugin import TEST_OVERRIDES  # noqa: E402
from tests.connect.workers import start_java_worker, start_kfk_worker  # noqa: E402

CONVERTERS = {"string": "org.apache.kafka.connect.storage.StringConverter",
              "json": "org.apache.kafka.connect.json.JsonConverter"}


def pipeline(directory: Path, bootstrap: str, lines: int, line_bytes: int, converter: str = "string",
             worker: str = "kfk", topic: str = "bench", deadline_s: float | None = None) -> float:
    """Seconds from the start of one standalone worker (`worker`: kfk or java) running FileStreamSource and
    FileStreamSink through `topic` (created here) on the broker at `bootstrap`, until the sink file holds all
    `lines` lines of `line_bytes` bytes; its files go in `directory`, its connectors named after the topic.
    RuntimeError if that takes longer than `deadline_s` (None: wait as long as it takes)."""
    directory.mkdir(parents=True, exist_ok=True)
    source, sink = directory / "source.txt", directory / "sink.txt"
    line = "x" * (line_bytes - 1)
    source.write_text((line + "\n") * lines)
    with Admin({"bootstrap.servers": bootstrap}) as admin:  # the sink must not wait to see it
        admin.create_topics([NewTopic(topic, 1, 1)])
    converter_class = CONVERTERS[converter]
    started = time.monotonic()
    start_worker = start_kfk_worker if worker == "kfk" else start_java_worker
    running = start_worker(directory, {
        "bootstrap.servers": bootstrap, "key.converter": converter_class, "value.converter": converter_class,
        "offset.storage.file.filename": str(directory / "offsets"), "offset.flush.interval.ms": "1000",
    }, [{"name": f"{topic}-source", "connector.class": "FileStreamSource", "file": str(source), "topic": topic},
        {"name": f"{topic}-sink", "connector.class": "FileStreamSink", "file": str(sink), "topics": topic}])
    try:
        while not sink.exists() or sink.stat().st_size < source.stat().st_size:
            if deadline_s is not None and time.monotonic() - started > deadline_s:
                raise RuntimeError(f"{worker} worker: the sink file has {sink.stat().st_size if sink.exists() else 0}"
                                   f" of {source.stat().st_size} bytes after {deadline_s:.0f} s")
            time.sleep(0.1)
        return time.monotonic() - started
    finally:
        running.stop()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lines", type=int, default=100_000)
    parser.add_argument("--line-bytes", type=int, default=100)
    parser.add_argument("--converter", choices=sorted(CONVERTERS), default="string")
    parser.add_argument("--worker", choices=["kfk", "java"], default="kfk")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-connect-") as temporary:
        directory = Path(temporary)
        broker = start_broker(directory / "broker", dict(TEST_OVERRIDES))
        try:
            elapsed = pipeline(directory, broker.bootstrap_servers, args.lines, args.line_bytes, args.converter,
                               args.worker)
        finally:
            broker.stop()
    megabytes = args.lines * args.line_bytes / 1e6
    print(f"{args.worker} worker, {args.lines} lines of {args.line_bytes} B through source -> topic -> sink ({args.converter}): "
          f"{elapsed:.1f} s, {args.lines / elapsed:,.0f} records/s, {megabytes / elapsed:.2f} MB/s")


if __name__ == "__main__":
    main()
