"""Broker CPU per ProduceRequest, the figure behind W7: what one request costs kfk, all layers included.

    python bench/bench_produce_requests.py [--partitions 1000] [--records 31] [--requests 20000]

librdkafka sends one partition per ProduceRequest, so with many partitions and linger.ms=5 a producer's records
arrive as many small requests (~7,400 of ~31 x 1 KiB records for W7's 256 MB over 1,000 partitions). This script
sends such requests itself (bench/wire_load.py's client: pre-built batches, 2 requests in flight), round-robin over
the topic's partitions, and divides the broker process's CPU time (/proc) by the requests: one figure with one
partition per request, one with 100 partitions per request (the per-partition part alone). A third figure has no
sockets at all: the same frames handed to the dispatcher of a broker started in this process, CPU per request of
everything from header decode to response encode, each frame copied before the clock runs (the steadiest of the
three on a shared machine; the difference to the first is the network layer and its system calls).

    python bench/bench_produce_requests.py --metrics [--rounds 5] [--scrape-interval 15]

    python bench/bench_produce_requests.py --quotas [--rounds 5]

The cost of client quotas on the produce path, in process (CPU per one-partition request, the median of alternating
rounds): no quota at all, a producer_byte_rate quota on another client-id (the quota is enabled, the lookup finds
none for this client), and one on this client-id too high to ever throttle (every request recorded in its rate).

The cost of the Prometheus endpoint (metrics.port): two brokers side by side, one without it and one with it while a
thread scrapes /metrics every --scrape-interval seconds (Prometheus' default is 15), measured in alternating rounds
with one-partition requests (broker CPU per request and throughput, the median of the rounds for each).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import shutil
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import run  # noqa: E402  (bench/ is not a package)
import wire_load  # noqa: E402

from kfk.commands.server import EMBEDDED_DEFAULTS  # noqa: E402
from kfk.config import BrokerConfig  # noqa: E402
from kfk.protocol.headers import RequestHeader, encode_request  # noqa: E402
from kfk.protocol.messages.alter_client_quotas import AlterClientQuotasRequest  # noqa: E402
from kfk.protocol.messages.create_topics import CreateTopicsRequest  # noqa: E402
from kfk.protocol.messages.produce import ProduceRequest  # noqa: E402
from kfk.security.principal import ANONYMOUS, KafkaPrincipal  # noqa: E402
from kfk.server.broker import BrokerServer  # noqa: E402
from kfk.testing.broker import start_broker  # noqa: E402
from kfk.testing.ports import free_port  # noqa: E402


TOPIC = "produce-requests"


def produce_requests(partitions: int, per_request: int, batch: bytes) -> list[ProduceRequest]:
    """acks=1 requests that carry `batch` for `per_request` partitions each, together covering every partition."""
    return [ProduceRequest(acks=1, timeout_ms=30_000, topic_data=[ProduceRequest.TopicProduceData(
        name=TOPIC, partition_data=[ProduceRequest.PartitionProduceData(index=(first + i) % partitions, records=batch)
                                    for i in range(per_request)])])
        for first in range(0, partitions, per_request)]


def measure(bootstrap: str, broker_pid: int, partitions: int, per_request: int, records: int,
            requests: int) -> tuple[float, float]:
    """(broker CPU µs per request, MB/s) for `requests` requests of `per_request` partitions x `records` records."""
    batch, _ = wire_load.build_batch(1024, records * 1060)
    messages = produce_requests(partitions, per_request, batch)
    connection = wire_load._Connection(bootstrap)
    try:
        for message in messages:  # every partition's log opened and written once: not timed
            correlation_id, frame = connection.frame(message, wire_load.PRODUCE_VERSION)
            connection.sock.sendall(frame)
            wire_load._check_produce(connection, correlation_id)
        outstanding: deque[int] = deque()
        cpu_before, start = run.process_cpu_seconds(broker_pid), time.perf_counter()
        for index in range(requests):
            if len(outstanding) >= 2:
                wire_load._check_produce(connection, outstanding.popleft())
            correlation_id, frame = connection.frame(messages[index % len(messages)], wire_load.PRODUCE_VERSION)
            connection.sock.sendall(frame)
            outstanding.append(correlation_id)
        while outstanding:
            wire_load._check_produce(connection, outstanding.popleft())
        seconds = time.perf_counter() - start
        cpu = run.process_cpu_seconds(broker_pid) - cpu_before
    finally:
        connection.close()
    return cpu / requests * 1e6, requests * per_request * len(batch) / seconds / 1e6


def _body(message: ProduceRequest | CreateTopicsRequest, version: int) -> bytearray:
    """A request frame without its size prefix, as the network layer hands it to the dispatcher."""
    header = RequestHeader(request_api_key=message.API_KEY, request_api_version=version, correlation_id=1,
                           client_id="kfk-bench")
    return bytearray(encode_request(header, message)[4:])


@contextlib.asynccontextmanager
async def in_process_broker(topic: str, partitions: int, overrides: dict[str, str] | None = None
                            ) -> AsyncIterator[Callable[..., Awaitable]]:
    """A broker started in this process (with `overrides` of its config) with `topic` created; yields its dispatch (a
    request frame without its size prefix in, the response chunks out; `principal=` whom it comes from): no sockets
    between the benchmark and the broker's work."""
    with tempfile.TemporaryDirectory(prefix="kfk-bench-") as log_dir:
        server = BrokerServer(BrokerConfig.from_properties(
            {**EMBEDDED_DEFAULTS, "log.dirs": log_dir, "listeners": "PLAINTEXT://127.0.0.1:0", **(overrides or {})}))
        await server.start()
        try:
            async def dispatch(frame: bytearray, principal: KafkaPrincipal = ANONYMOUS):
                return await server.dispatcher.dispatch(frame, "127.0.0.1", 0, "PLAINTEXT", principal)

            create = CreateTopicsRequest(timeout_ms=30_000, topics=[CreateTopicsRequest.CreatableTopic(
                name=topic, num_partitions=partitions, replication_factor=1)])
            await dispatch(_body(create, 5))
            yield dispatch
        finally:
            await server.stop()


async def dispatch_cpu_seconds(dispatch: Callable[..., Awaitable], frames: list[bytearray], requests: int) -> float:
    """Process CPU seconds for dispatching `requests` of `frames` round-robin, each as a fresh copy (the broker edits
    a produced batch in place) made before the clock runs, a chunk at a time: the broker's work alone."""
    seconds = 0.0
    for first in range(0, requests, 1000):
        copies = [bytearray(frames[index % len(frames)]) for index in range(first, min(first + 1000, requests))]
        start = time.process_time()
        for frame in copies:
            await dispatch(frame)
        seconds += time.process_time() - start
    return seconds


async def measure_in_process(partitions: int, records: int, requests: int) -> float:
    """CPU µs per one-partition ProduceRequest dispatched straight into a broker running in this process."""
    async with in_process_broker(TOPIC, partitions) as dispatch:
        batch, _ = wire_load.build_batch(1024, records * 1060)
        frames = [_body(message, wire_load.PRODUCE_VERSION) for message in produce_requests(partitions, 1, batch)]
        for frame in frames:  # every partition's log opened and written once: not timed
            await dispatch(bytearray(frame))
        return await dispatch_cpu_seconds(dispatch, frames, requests) / requests * 1e6


async def compare_quotas(partitions: int, records: int, requests: int, rounds: int) -> None:
    """Produce CPU per request without quotas, with a quota on another client-id, and with one on this client-id."""

    def quota(client_id: str, value: float | None) -> bytearray:
        return _body(AlterClientQuotasRequest(entries=[AlterClientQuotasRequest.EntryData(
            entity=[AlterClientQuotasRequest.EntityData(entity_type="client-id", entity_name=client_id)],
            ops=[AlterClientQuotasRequest.OpData(key="producer_byte_rate", value=value or 0.0,
                                                 remove=value is None)])]), 1)

    settings = {"no quota": [quota("another-client", None), quota("kfk-bench", None)],
                "another client's quota": [quota("another-client", 1e6), quota("kfk-bench", None)],
                "own quota, never reached": [quota("another-client", None), quota("kfk-bench", 1e15)]}
    results: dict[str, list[float]] = {name: [] for name in settings}
    async with in_process_broker(TOPIC, partitions) as dispatch:
        batch, _ = wire_load.build_batch(1024, records * 1060)
        frames = [_body(message, wire_load.PRODUCE_VERSION) for message in produce_requests(partitions, 1, batch)]
        for frame in frames:
            await dispatch(bytearray(frame))
        for round_index in range(rounds):
            order = list(settings) if round_index % 2 == 0 else list(reversed(settings))
            for name in order:
                for change in settings[name]:
                    await dispatch(change)
                results[name].append(await dispatch_cpu_seconds(dispatch, frames, requests) / requests * 1e6)
    print(f"{'client quotas':<26} {'rounds':>7} {'CPU µs/request (in process)':>28}")
    for name, figures in results.items():
        print(f"{name:<26} {rounds:>7} {statistics.median(figures):>28,.1f}")


def compare_metrics(partitions: int, records: int, requests: int, rounds: int, scrape_interval: float) -> None:
    """Produce cost without and with the metrics endpoint (scraped every `scrape_interval` s), alternating rounds."""
    port = free_port()
    root = Path(tempfile.mkdtemp(prefix="kfk-bench-"))
    brokers = {"off": start_broker(root / "off", run.KFK_OVERRIDES, timeout=120),
               "on": start_broker(root / "on", {**run.KFK_OVERRIDES, "metrics.port": str(port)}, timeout=120)}
    stop_scraping = threading.Event()
    scrapes: list[float] = []

    def scrape_once() -> None:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
            response.read()

    def scrape() -> None:
        while not stop_scraping.wait(scrape_interval):
            start = time.perf_counter()
            scrape_once()
            scrapes.append(time.perf_counter() - start)

    scraper = threading.Thread(target=scrape, daemon=True)
    results: dict[str, list[tuple[float, float]]] = {"off": [], "on": []}
    try:
        for broker in brokers.values():
            run.create_topic(broker.bootstrap_servers, TOPIC, partitions)
        scraper.start()
        for round_index in range(rounds):
            for mode in (("off", "on") if round_index % 2 == 0 else ("on", "off")):
                broker = brokers[mode]
                assert broker.process is not None
                results[mode].append(measure(broker.bootstrap_servers, broker.process.pid, partitions, 1, records,
                                             requests))
        stop_scraping.set()
        scraper.join()
        pid = brokers["on"].process.pid
        cpu_before = run.process_cpu_seconds(pid)
        for _ in range(20):
            scrape_once()
        scrape_cpu_ms = (run.process_cpu_seconds(pid) - cpu_before) / 20 * 1000
    finally:
        stop_scraping.set()
        for broker in brokers.values():
            broker.stop()
        shutil.rmtree(root, ignore_errors=True)
    print(f"{'metrics endpoint':<24} {'rounds':>7} {'broker CPU µs/request':>22} {'MB/s':>8}")
    for mode, figures in results.items():
        print(f"{mode:<24} {rounds:>7} {statistics.median(f[0] for f in figures):>22,.1f} "
              f"{statistics.median(f[1] for f in figures):>8,.0f}")
    if scrapes:
        print(f"scrapes every {scrape_interval:g} s: {len(scrapes)}, median {statistics.median(scrapes) * 1000:.1f} "
              f"ms ({partitions} partitions); broker CPU per scrape (idle broker, 20 scrapes): {scrape_cpu_ms:.1f} ms")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--records", type=int, default=31, help="1 KiB records per partition's batch")
    parser.add_argument("--requests", type=int, default=20_000, help="requests with one partition each")
    parser.add_argument("--metrics", action="store_true", help="compare the broker without and with metrics.port")
    parser.add_argument("--quotas", action="store_true", help="compare produce without and with client quotas")
    parser.add_argument("--rounds", type=int, default=5, help="with --metrics: alternating rounds per broker")
    parser.add_argument("--scrape-interval", type=float, default=15.0, help="with --metrics: seconds between scrapes")
    args = parser.parse_args()
    if args.metrics:
        compare_metrics(args.partitions, args.records, args.requests, args.rounds, args.scrape_interval)
        return 0
    if args.quotas:
        asyncio.run(compare_quotas(args.partitions, args.records, args.requests, args.rounds))
        return 0
    broker = run.KfkBroker(Path(tempfile.mkdtemp(prefix="kfk-bench-")))
    try:
        run.create_topic(broker.bootstrap, TOPIC, args.partitions)
        print(f"{'partitions per request':<24} {'requests':>9} {'broker CPU µs/request':>22} "
              f"{'µs/partition':>13} {'MB/s':>8}")
        for per_request, requests in ((1, args.requests), (100, max(1, args.requests // 100))):
            per_request = min(per_request, args.partitions)
            micros, mb_s = measure(broker.bootstrap, broker.pid, args.partitions, per_request, args.records,
                                   requests)
            print(f"{per_request:<24} {requests:>9,} {micros:>22,.1f} {micros / per_request:>13,.1f} {mb_s:>8,.0f}")
    finally:
        broker.stop()
    micros = asyncio.run(measure_in_process(args.partitions, args.records, args.requests))
    print(f"{'1, in process (no sockets)':<24} {args.requests:>9,} {micros:>22,.1f} {micros:>13,.1f} {'-':>8}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
