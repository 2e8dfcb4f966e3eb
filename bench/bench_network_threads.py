"""The broker's network processes (num.network.threads, kfk.server.network_processes): throughput and where the CPU
goes with 1 (the event loop alone) and N network processes, under librdkafka's C benchmark, and the model that
predicts larger machines from it.

    python bench/bench_network_threads.py [--threads 1,2] [--clients 2] [--megabytes 200] [--record-bytes 1024]
                                          [--repetitions 3]

Each repetition starts a fresh `kfk server start` per thread count (interleaved: 1, 2, 2, 1, ...), with the page
cache dropped first when run as root. `--clients` rdkafka_performance processes run at once, each on a topic of
its own (one partition): first producing `--megabytes` between them (acks=1, linger.ms=5, batch.size=1 MiB), then
consuming it all from the beginning (librdkafka's defaults: 1 MiB per partition and fetch). Then the same with
bench/wire_load.py's clients, which cost almost nothing per record (the broker's own limit): fetching what was
written, 10 MiB per request, and producing as much again (one pre-built 1 MiB batch re-sent, 5 in flight), each on
its own topic. Figures: the clients' summed rate (total bytes over the wall time of the slowest), and the CPU each
part of the broker spent per MB served: its event loop's process, its network processes, from /proc; the cores each
kept busy. Last, the median round trip of an ApiVersions request, one in flight: the latency a hop through a
network process adds.

The scaling model (printed after the table): the event loop is one process, so it tops out at 1 / (its CPU per MB)
MB/s whatever the machine; the network processes share out the rest of the work, so with C cores for the broker
and C - 1 network processes the broker serves min(1 / main, (C - 1) / network, C / (main + network)) MB/s.
With one process, everything is the event loop's: 1 / (its CPU per MB).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic

from kfk.testing.broker import start_broker

sys.path.insert(0, str(Path(__file__).resolve().parent))
import rdkafka_performance  # noqa: E402  (bench/ is not a package)
import wire_load  # noqa: E402
from run import drop_page_cache, process_cpu_seconds, write_back  # noqa: E402

PRODUCER_SETTINGS = {"acks": 1, "linger.ms": 5, "batch.size": 1048576}
PHASES = ("produce", "consume", "wire consume", "wire produce")


def network_process_pids(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid and \
                    b"kfk.server.network_worker" in Path(f"/proc/{entry}/cmdline").read_bytes():
                found.append(int(entry))
        except OSError:
            continue
    return found


class BrokerCpu:
    """CPU seconds of the broker's event-loop process and of its network processes over a phase."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.workers = network_process_pids(pid)

    def read(self) -> tuple[float, float]:
        """(the event loop's process alone, its network processes): run.py's figure is the whole process tree."""
        network = sum(process_cpu_seconds(worker) for worker in self.workers)
        return process_cpu_seconds(self.pid) - network, network


def phase(cpu: BrokerCpu, work) -> dict[str, float]:
    write_back()
    main_before, network_before = cpu.read()
    started = time.perf_counter()
    megabytes, records = work()
    wall = time.perf_counter() - started
    main_after, network_after = cpu.read()
    main, network = main_after - main_before, network_after - network_before
    return {"MB/s": megabytes / wall, "records/s": records / wall,
            "main cores": main / wall, "network cores": network / wall,
            "main ms/MB": 1000 * main / megabytes, "network ms/MB": 1000 * network / megabytes}


def run_one(threads: int, clients: int, megabytes: int, record_bytes: int, root: Path) -> dict[str, dict]:
    drop_page_cache()
    broker = start_broker(Path(tempfile.mkdtemp(dir=root)), {"num.network.threads": str(threads)})
    try:
        bootstrap = broker.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bootstrap})
        topics = [f"t{index}" for index in range(clients)]
        for future in admin.create_topics([NewTopic(topic, 1, 1) for topic in topics]).values():
            future.result(30)
        count = megabytes * 1_000_000 // record_bytes // clients
        cpu = BrokerCpu(broker.process.pid)
        assert len(cpu.workers) == (threads if threads > 1 else 0), cpu.workers
        with ThreadPoolExecutor(clients) as pool:
            def produce_all():
                list(pool.map(lambda topic: rdkafka_performance.produce(bootstrap, topic, count, record_bytes,
                                                                        PRODUCER_SETTINGS), topics))
                return count * clients * record_bytes / 1e6, count * clients

            def consume_all():
                list(pool.map(lambda topic: rdkafka_performance.consume(bootstrap, topic, count, {}), topics))
                return count * clients * record_bytes / 1e6, count * clients

            def wire_consume_all():
                received = list(pool.map(lambda topic: wire_load.fetch(bootstrap, topic, count)[1], topics))
                return sum(received) / 1e6, count * clients

            def wire_produce_all():
                sent = list(pool.map(lambda topic: wire_load.produce(bootstrap, topic + "w", count,
                                                                     record_bytes)[1], topics))
                return sum(sent) * record_bytes / 1e6, sum(sent)

            for future in admin.create_topics([NewTopic(topic + "w", 1, 1) for topic in topics]).values():
                future.result(30)
            figures = {"produce": phase(cpu, produce_all), "consume": phase(cpu, consume_all),
                       "wire consume": phase(cpu, wire_consume_all), "wire produce": phase(cpu, wire_produce_all)}
            figures["round trip"] = {"µs": round_trip_us(bootstrap)}
            return figures
    finally:
        broker.stop()


def round_trip_us(bootstrap: str, requests: int = 2000) -> float:
    """Median microseconds of an ApiVersions request's round trip, one in flight: what a hop through a network
    process adds to every request."""
    from kfk.protocol.messages.api_versions import ApiVersionsRequest

    connection = wire_load._Connection(bootstrap)
    samples = []
    try:
        for _ in range(requests):
            _, frame = connection.frame(ApiVersionsRequest(client_software_name="kfk-bench",
                                                           client_software_version="1"), 3)
            started = time.perf_counter()
            connection.sock.sendall(frame)
            connection.read_response()
            samples.append(time.perf_counter() - started)
    finally:
        connection.close()
    return 1e6 * statistics.median(samples)


def model(main_ms: float, network_ms: float, cores: int) -> float:
    """MB/s the broker serves on `cores` cores: the event loop caps it at 1/main; C - 1 network processes share
    the rest; and the cores themselves cap the sum."""
    if network_ms == 0:
        return 1000 / main_ms
    return min(1000 / main_ms, (cores - 1) * 1000 / network_ms, cores * 1000 / (main_ms + network_ms))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--clients", type=int, default=2)
    parser.add_argument("--megabytes", type=int, default=200)
    parser.add_argument("--record-bytes", type=int, default=1024)
    parser.add_argument("--repetitions", type=int, default=3)
    args = parser.parse_args()
    counts = [int(value) for value in args.threads.split(",")]
    results: dict[int, list[dict]] = {count: [] for count in counts}
    with tempfile.TemporaryDirectory(prefix="kfk-bench-network-") as root:
        for repetition in range(args.repetitions):
            order = counts if repetition % 2 == 0 else list(reversed(counts))
            for count in order:
                result = run_one(count, args.clients, args.megabytes, args.record_bytes, Path(root))
                results[count].append(result)
                print(f"repetition {repetition + 1}, num.network.threads={count}: " + "; ".join(
                    f"{name} {result[name]['MB/s']:.0f} MB/s (main {result[name]['main cores']:.2f} + network "
                    f"{result[name]['network cores']:.2f} cores)" for name in PHASES)
                    + f"; ApiVersions round trip {result['round trip']['µs']:.0f} µs", flush=True)
    print(f"\n{args.clients} rdkafka_performance clients, {args.megabytes} MB of {args.record_bytes}-byte records, "
          f"medians of {args.repetitions}, load average {os.getloadavg()[0]:.1f}")
    header = ("threads", "phase", "MB/s", "records/s", "main cores", "network cores", "main ms/MB", "network ms/MB")
    print(" | ".join(header))
    medians: dict[tuple[int, str], dict[str, float]] = {}
    for count in counts:
        for name in PHASES:
            figures = {key: statistics.median(run[name][key] for run in results[count])
                       for key in results[count][0][name]}
            medians[count, name] = figures
            print(" | ".join([str(count), name] + [f"{figures[key]:,.2f}" if "ms" in key or "cores" in key
                                                   else f"{figures[key]:,.0f}" for key in header[2:]]))
    for count in counts:
        print(f"num.network.threads={count}: ApiVersions round trip, median "
              f"{statistics.median(run['round trip']['µs'] for run in results[count]):.0f} µs")
    print("\nmodel (MB/s the broker alone could serve, from the CPU per MB above):")
    for name in PHASES:
        for count in counts:
            figures = medians[count, name]
            predicted = [model(figures["main ms/MB"], figures["network ms/MB"], cores) for cores in (2, 8, 16)]
            print(f"  {name}, num.network.threads={count}: 2 cores {predicted[0]:,.0f}, 8 cores "
                  f"{predicted[1]:,.0f}, 16 cores {predicted[2]:,.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
