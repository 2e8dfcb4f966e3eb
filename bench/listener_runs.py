"""The measuring run bench_tls.py and bench_sasl.py share: one broker with several listeners, each measured the same
way so that their figures compare.

- `run_arguments`: the flags (--megabytes, --repetitions, --connections) and the header line naming the machine.
- `throughput_runs`: per repetition, interleaved, for each listener: confluent-kafka produces the records (acks=1,
  one partition) to a topic of its own, then a confluent-kafka consumer and kcat read them back (bench_broker's
  helpers); MB/s of record values per run, printed as it goes, and `print_throughput` prints the medians.
- `connection_setup_ms`: milliseconds from connect() to the end of kfk's BrokerConnection setup (TCP, then whatever
  the listener adds: the TLS handshake, ApiVersions, the SASL exchange), one connection after the other;
  `print_setup_times` prints median and p90.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import time
from typing import Any

from bench_broker import MIB, RECORD_SIZE, consume, consume_with_kcat, create_topic, produce

from kfk.client.connection import BrokerConnection

#: listener name -> kind of run (produce, consume, kcat) -> MB/s of each repetition.
Figures = dict[str, dict[str, list[float]]]


def run_arguments(description: str, megabytes: int, connections: int, timed: str) -> argparse.Namespace:
    """Parse the flags (defaults: `megabytes` per run, `connections` timed per `timed`) and print the header."""
    import confluent_kafka

    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--megabytes", type=int, default=megabytes, help="MB of 1 KiB records per run")
    parser.add_argument("--repetitions", type=int, default=3)
    parser.add_argument("--connections", type=int, default=connections, help=f"connections timed per {timed}")
    args = parser.parse_args()
    print(f"Python {sys.version.split()[0]}, {os.cpu_count()} CPUs, confluent-kafka {confluent_kafka.libversion()[0]}, "
          f"{args.megabytes} MB of 1 KiB records per run, {args.repetitions} repetitions (medians)\n")
    return args


def throughput_runs(ports: dict[str, int], security: dict[str, dict[str, str]], megabytes: int, repetitions: int,
                    topic_prefix: str) -> Figures:
    """`security`: the client settings of each listener measured (by listener name, `ports` has its port)."""
    count = megabytes * MIB // RECORD_SIZE
    volume = count * RECORD_SIZE / 1e6
    figures: Figures = {name: {"produce": [], "consume": [], "kcat": []} for name in security}
    for repetition in range(repetitions):
        for name, settings in security.items():
            bootstrap = f"127.0.0.1:{ports[name]}"
            topic = f"{topic_prefix}-{name.lower()}-{repetition}"
            create_topic(bootstrap, topic, 1, settings)
            figures[name]["produce"].append(volume / produce(bootstrap, topic, count, "none", settings))
            figures[name]["consume"].append(volume / consume(bootstrap, topic, 1, count, settings))
            if shutil.which("kcat"):
                figures[name]["kcat"].append(consume_with_kcat(bootstrap, topic, volume, settings))
            print(f"repetition {repetition + 1} {name:>9}: " + ", ".join(
                f"{kind} {values[-1]:.1f} MB/s" for kind, values in figures[name].items() if values))
    return figures


def print_throughput(figures: Figures) -> dict[str, dict[str, float]]:
    """The table of medians (NaN where kcat was not installed); returns them."""
    print(f"\n{'listener':>9} {'produce MB/s':>13} {'consume MB/s':>13} {'kcat consume MB/s':>18}")
    medians = {name: {kind: statistics.median(values) if values else float("nan") for kind, values in kinds.items()}
               for name, kinds in figures.items()}
    for name, values in medians.items():
        print(f"{name:>9} {values['produce']:>13.1f} {values['consume']:>13.1f} {values['kcat']:>18.1f}")
    return medians


async def connection_setup_ms(port: int, count: int, client_id: str, **connection_options: Any) -> list[float]:
    """`connection_options`: BrokerConnection's security arguments (ssl_context, sasl)."""
    times = []
    for _ in range(count):
        connection = BrokerConnection("127.0.0.1", port, node_id=-1, client_id=client_id,
                                      client_software_name="kfk-bench", client_software_version="0",
                                      request_timeout_ms=30_000, connection_setup_timeout_ms=30_000,
                                      **connection_options)
        start = time.perf_counter()
        await connection.connect()
        times.append((time.perf_counter() - start) * 1000)
        connection.close()
    return times


def print_setup_times(title: str, setup_ms: dict[str, list[float]]) -> None:
    print(f"\n{title}")
    width = max(map(len, setup_ms))
    for name, times in setup_ms.items():
        times.sort()
        print(f"{name:>{width}} median {statistics.median(times):6.2f} ms   p90 {times[int(len(times) * 0.9)]:6.2f} ms")
