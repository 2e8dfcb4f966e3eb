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
        source, sink = directory / "source.txt", directory / "sink.txt"
        line = "x" * (args.line_bytes - 1)
        source.write_text((line + "\n") * args.lines)
        with Admin({"bootstrap.servers": broker.bootstrap_servers}) as admin:  # the sink must not wait to see it
            admin.create_topics([NewTopic("bench", 1, 1)])
        converter = CONVERTERS[args.converter]
        started = time.monotonic()
        start_worker = start_kfk_worker if args.worker == "kfk" else start_java_worker
        worker = start_worker(directory, {
            "bootstrap.servers": broker.bootstrap_servers, "key.converter": converter, "value.converter": converter,
            "offset.storage.file.filename": str(directory / "offsets"), "offset.flush.interval.ms": "1000",
        }, [{"name": "source", "connector.class": "FileStreamSource", "file": str(source), "topic": "bench"},
            {"name": "sink", "connector.class": "FileStreamSink", "file": str(sink), "topics": "bench"}])
        try:
            while not sink.exists() or sink.stat().st_size < source.stat().st_size:
                time.sleep(0.1)
            elapsed = time.monotonic() - started
        finally:
            worker.stop()
            broker.stop()
    megabytes = args.lines * args.line_bytes / 1e6
    print(f"{args.worker} worker, {args.lines} lines of {args.line_bytes} B through source -> topic -> sink ({args.converter}): "
          f"{elapsed:.1f} s, {args.lines / elapsed:,.0f} records/s, {megabytes / elapsed:.2f} MB/s")


if __name__ == "__main__":
    main()
