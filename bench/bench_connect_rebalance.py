"""Kafka Connect rebalance time: how long the work of a worker that leaves takes to run again on the others.

    python bench/bench_connect_rebalance.py [--workers 3] [--connectors 6] [--runs 3] [--protocol sessioned]
                                            [--delay-ms 0]

Starts a kfk broker and --workers `kfk connect distributed` workers (subprocesses, as users run them), creates
--connectors FileStreamSource connectors of one task each, waits until every connector and task runs, then stops
one worker (SIGTERM: it leaves the group) and times until the remaining workers run everything again (polled over
the REST API every 0.2 s). The stopped worker is started again between runs. Prints each run and the median.
--protocol is the workers' connect.protocol (eager: everything stops and is dealt out again; compatible or
sessioned: only the departed worker's work moves) and --delay-ms their scheduled.rebalance.max.delay.ms (how long a
departed worker's work waits for it to come back: Kafka's default is 5 minutes, 0 here to time the rebalance alone).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from kfk.testing.broker import start_broker  # noqa: E402
from kfk.testing.plugin import TEST_OVERRIDES  # noqa: E402
from tests.connect.test_distributed import distributed_properties  # noqa: E402
from tests.connect.workers import start_kfk_worker, units_per_worker, wait_for  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--connectors", type=int, default=6)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--protocol", choices=("eager", "compatible", "sessioned"), default="sessioned")
    parser.add_argument("--delay-ms", type=int, default=0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-connect-rebalance-") as temporary:
        directory = Path(temporary)
        broker = start_broker(directory / "broker", dict(TEST_OVERRIDES))
        properties = {**distributed_properties(broker.bootstrap_servers, "bench-rebalance"),
                      "connect.protocol": args.protocol, "scheduled.rebalance.max.delay.ms": str(args.delay_ms)}
        workers = [start_kfk_worker(directory, properties, [], mode="distributed", name=f"worker{index}")
                   for index in range(args.workers)]
        names = [f"source{index}" for index in range(args.connectors)]
        timings = []
        try:
            for name in names:
                path = directory / f"{name}.txt"
                path.write_text("a line\n" * 1000)
                config = {"connector.class": "FileStreamSource", "file": str(path), "topic": name, "tasks.max": "1"}
                wait_for(lambda: (lambda answer: answer if answer[0] == 201 else None)(
                    workers[0].call("POST", "/connectors", {"name": name, "config": config})), f"{name} created")
            for run in range(args.runs):
                everyone = {worker.url.removeprefix("http://") for worker in workers}
                wait_for(lambda: (lambda found: found and set(found) == everyone)(
                    units_per_worker(workers[0], names)), "everything running on every worker")
                leaving = workers.pop()
                left = everyone - {leaving.url.removeprefix("http://")}
                started = time.monotonic()
                leaving.stop()
                wait_for(lambda: (lambda found: found and set(found) == left)(
                    units_per_worker(workers[0], names)), "everything running on the other workers")
                timings.append(time.monotonic() - started)
                print(f"run {run + 1}: {args.connectors} connectors and {args.connectors} tasks running again on "
                      f"{len(workers)} workers {timings[-1]:.2f} s after one of {args.workers} stopped")
                workers.append(start_kfk_worker(directory, properties, [], mode="distributed",
                                                name=f"worker-again{run}"))
        finally:
            for worker in workers:
                worker.stop()
            broker.stop()
    print(f"median rebalance time: {statistics.median(timings):.2f} s")


if __name__ == "__main__":
    main()
