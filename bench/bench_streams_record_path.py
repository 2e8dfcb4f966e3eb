"""kfk.streams' record path alone: word count through the TopologyTestDriver (no broker, no network), lines/s.

    python bench/bench_streams_record_path.py [--lines 2000] [--runs 15] [--cache-bytes 10485760]

Each run pipes --lines lines of six words and then checks the sends, as a commit does; the best run counts (CPU
time). Keep the garbage collector on: what a task holds until its commit (pending sends and what their error
handlers need) shows up as collector time, which is where the record path lost 40 % once. The driver flushes the
record cache after every line, as Kafka's does (--cache-bytes 0: no cache, every update sent as it happens).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kfk.streams.test_driver import TopologyTestDriver  # noqa: E402
from tests.streams.topologies import wordcount  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--cache-bytes", type=int, default=10 * 1024 * 1024)
    args = parser.parse_args()
    driver = TopologyTestDriver(wordcount("in", "out"), {
        "default.key.serde": "string", "default.value.serde": "string", "statestore.cache.max.bytes": args.cache_bytes})
    best = float("inf")
    for _ in range(args.runs):
        started = time.process_time()
        for index in range(args.lines):
            driver.pipe_input("in", f"k{index % 7}", "the quick brown fox jumps over", index)
        for task in driver._tasks:
            task.check_sends()
        best = min(best, time.process_time() - started)
        driver.written.clear()
    print(f"word count, TopologyTestDriver: {round(args.lines / best)} lines/s (best of {args.runs})")


if __name__ == "__main__":
    main()
