"""Client benchmark: kfk's client (`kfk perf-test`, and its asyncio API) next to confluent-kafka, kafka-python and
aiokafka, producing and consuming against the same kfk broker.

    python bench/bench_client.py [--records 1000000] [--kib-records 200000] [--repetitions 1]
                                 [--clients kfk,kfk-asyncio,confluent-kafka,kafka-python,aiokafka]
                                 [--workloads produce,consume]

Workloads (issue 21's): 1,000,000 records of 100 B and 200,000 records of 1 KiB, one partition, no compression.

- produce: acks=1, linger.ms=5, batch.size=16384 for every client, a fresh topic per run; each client does what
  Kafka's producer perf tool does: send every record with a delivery callback (aiokafka and kfk-asyncio: a done
  callback on the future `await send()` returns), then flush. Timed from the first send to the end of the flush.
- consume: one topic per record size, filled once before the clients run (by confluent-kafka); each client reads
  all of it from offset 0 and counts the value bytes. kfk runs `kfk perf-test consume` (a group member; its fetch
  time, which starts once the group is joined, is the figure); the others assign the partition by hand, and the
  clock starts at their first poll. Each uses its batch API: confluent-kafka consume(num_messages), kafka-python
  poll(max_records), aiokafka and kfk-asyncio getmany().

kfk runs as the real `python -m kfk perf-test ... --json` (so the PYTHONPATH's kfk is the one measured); every other
client runs in its own Python process (one client per process: none shares a GIL with another). Clients run one
after the other against one broker started for the run; with --repetitions N they are interleaved and the median is
reported. Ratios are kfk / client (and kfk-asyncio / client). The machine is shared: compare ratios within one run,
and quote the load average printed at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

MB = 1024 * 1024
SETTINGS = {"acks": "1", "linger.ms": "5", "batch.size": "16384"}
CLIENTS = ("kfk", "kfk-asyncio", "confluent-kafka", "kafka-python", "aiokafka")
FILLER = "confluent-kafka"


# --- producers, each run in a child process -------------------------------------------------------------------------

def produce_kafka_python(bootstrap: str, topic: str, records: int, size: int) -> dict:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks=1, linger_ms=5, batch_size=16384)
    producer.partitions_for(topic)
    payload = os.urandom(size)
    done = [0]

    def delivered(_metadata) -> None:
        done[0] += 1

    start = time.perf_counter()
    for _ in range(records):
        producer.send(topic, payload).add_callback(delivered)
    producer.flush()
    elapsed = time.perf_counter() - start
    producer.close()
    return {"records": done[0], "elapsed_s": elapsed}


def produce_confluent(bootstrap: str, topic: str, records: int, size: int) -> dict:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 5, "batch.size": 16384,
                         "enable.idempotence": False})
    producer.list_topics(topic, timeout=10)
    payload = os.urandom(size)
    done = [0]

    def delivered(error, _message) -> None:
        if error is None:
            done[0] += 1

    start = time.perf_counter()
    for _ in range(records):
        while True:
            try:
                producer.produce(topic, payload, on_delivery=delivered)
                break
            except BufferError:
                producer.poll(0.01)
        producer.poll(0)
    producer.flush()
    elapsed = time.perf_counter() - start
    return {"records": done[0], "elapsed_s": elapsed}


async def _produce_async(producer, topic: str, records: int, size: int) -> dict:
    """aiokafka's and kfk.client.aio's shape: ``await send()`` returns the record's future."""
    await producer.start()
    try:
        await producer.partitions_for(topic)
        payload = os.urandom(size)
        done = [0]

        def delivered(future) -> None:
            if future.exception() is None:
                done[0] += 1

        send = producer.send
        start = time.perf_counter()
        for _ in range(records):
            (await send(topic, payload)).add_done_callback(delivered)
        await producer.flush()
        elapsed = time.perf_counter() - start
    finally:
        await producer.stop()
    return {"records": done[0], "elapsed_s": elapsed}


def produce_aiokafka(bootstrap: str, topic: str, records: int, size: int) -> dict:
    from aiokafka import AIOKafkaProducer

    async def run() -> dict:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks=1, linger_ms=5, max_batch_size=16384)
        return await _produce_async(producer, topic, records, size)

    return asyncio.run(run())


def produce_kfk_asyncio(bootstrap: str, topic: str, records: int, size: int) -> dict:
    from kfk.client.aio import AIOProducer

    async def run() -> dict:
        producer = AIOProducer({"bootstrap.servers": bootstrap, **SETTINGS})
        return await _produce_async(producer, topic, records, size)

    return asyncio.run(run())


# --- consumers, each run in a child process -------------------------------------------------------------------------

def consume_confluent(bootstrap: str, topic: str, records: int, size: int) -> dict:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{uuid.uuid4().hex[:8]}",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    count = size_total = 0
    start = time.perf_counter()
    while count < records:
        for message in consumer.consume(num_messages=10_000, timeout=1.0):
            if message.error() is None:
                count += 1
                size_total += len(message.value())
    elapsed = time.perf_counter() - start
    consumer.close()
    return {"records": count, "bytes": size_total, "elapsed_s": elapsed}


def consume_kafka_python(bootstrap: str, topic: str, records: int, size: int) -> dict:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    partition = TopicPartition(topic, 0)
    consumer.assign([partition])
    consumer.seek(partition, 0)
    count = size_total = 0
    start = time.perf_counter()
    while count < records:
        for batch in consumer.poll(timeout_ms=1000, max_records=10_000).values():
            for message in batch:
                count += 1
                size_total += len(message.value)
    elapsed = time.perf_counter() - start
    consumer.close()
    return {"records": count, "bytes": size_total, "elapsed_s": elapsed}


async def _consume_async(consumer, partition, records: int) -> dict:
    await consumer.start()
    try:
        consumer.assign([partition])
        consumer.seek(partition, 0)
        count = size_total = 0
        start = time.perf_counter()
        while count < records:
            for batch in (await consumer.getmany(timeout_ms=1000, max_records=10_000)).values():
                for message in batch:
                    count += 1
                    size_total += len(message.value)
        elapsed = time.perf_counter() - start
    finally:
        await consumer.stop()
    return {"records": count, "bytes": size_total, "elapsed_s": elapsed}


def consume_aiokafka(bootstrap: str, topic: str, records: int, size: int) -> dict:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def run() -> dict:
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
        return await _consume_async(consumer, TopicPartition(topic, 0), records)

    return asyncio.run(run())


def consume_kfk_asyncio(bootstrap: str, topic: str, records: int, size: int) -> dict:
    from kfk.client import TopicPartition
    from kfk.client.aio import AIOConsumer

    async def run() -> dict:
        consumer = AIOConsumer({"bootstrap.servers": bootstrap, "enable.auto.commit": False})
        return await _consume_async(consumer, TopicPartition(topic, 0), records)

    return asyncio.run(run())


RUNNERS = {
    ("produce", "confluent-kafka"): produce_confluent, ("produce", "kafka-python"): produce_kafka_python,
    ("produce", "aiokafka"): produce_aiokafka, ("produce", "kfk-asyncio"): produce_kfk_asyncio,
    ("consume", "confluent-kafka"): consume_confluent, ("consume", "kafka-python"): consume_kafka_python,
    ("consume", "aiokafka"): consume_aiokafka, ("consume", "kfk-asyncio"): consume_kfk_asyncio,
}


def run_kfk_cli(workload: str, bootstrap: str, topic: str, records: int, size: int) -> dict:
    """`kfk perf-test produce|consume --json` as a user runs it (with the PYTHONPATH's kfk)."""
    args = [sys.executable, "-m", "kfk", "perf-test", workload, "--topic", topic, "--bootstrap-server", bootstrap,
            "--json"]
    if workload == "produce":
        args += ["--num-records", str(records), "--record-size", str(size), "--throughput", "-1"]
        for key, value in SETTINGS.items():
            args += ["--producer-props", f"{key}={value}"]
        result = json.loads(subprocess.run(args, capture_output=True, text=True, check=True).stdout)
        return {"records": result["records"], "elapsed_s": result["elapsed_s"]}
    args += ["--messages", str(records)]
    result = json.loads(subprocess.run(args, capture_output=True, text=True, check=True).stdout)
    return {"records": result["records"], "bytes": int(result["data_consumed_mb"] * MB),
            "elapsed_s": result["fetch_time_ms"] / 1000}


def child(workload: str, client: str, bootstrap: str, topic: str, records: int, size: int) -> dict:
    if client == "kfk":
        return run_kfk_cli(workload, bootstrap, topic, records, size)
    script = [sys.executable, __file__, "--child", f"{workload}:{client}", "--bootstrap", bootstrap, "--topic", topic,
              "--child-records", str(records), "--size", str(size)]
    completed = subprocess.run(script, capture_output=True, text=True)
    if completed.returncode != 0:
        raise RuntimeError(f"{workload} with {client} failed:\n{completed.stderr}")
    return json.loads(completed.stdout)


# --- the run ----------------------------------------------------------------------------------------------------------

def create_topic(bootstrap: str, topic: str) -> None:
    from kfk.client import Admin, NewTopic

    with Admin({"bootstrap.servers": bootstrap}) as admin:
        error = admin.create_topics([NewTopic(topic, 1, 1)])[topic]
        if error is not None:
            raise error


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000, help="records of 100 B")
    parser.add_argument("--kib-records", type=int, default=200_000, help="records of 1 KiB")
    parser.add_argument("--repetitions", type=int, default=1)
    parser.add_argument("--clients", default=",".join(CLIENTS))
    parser.add_argument("--workloads", default="produce,consume")
    parser.add_argument("--child")
    parser.add_argument("--bootstrap")
    parser.add_argument("--topic")
    parser.add_argument("--child-records", type=int)
    parser.add_argument("--size", type=int)
    arguments = parser.parse_args()
    if arguments.child:
        workload, client = arguments.child.split(":")
        outcome = RUNNERS[(workload, client)](arguments.bootstrap, arguments.topic, arguments.child_records,
                                              arguments.size)
        print(json.dumps(outcome))
        return

    from kfk.testing.broker import start_broker
    from kfk.testing.plugin import TEST_OVERRIDES

    clients = arguments.clients.split(",")
    kinds = arguments.workloads.split(",")
    sizes = [(arguments.records, 100), (arguments.kib_records, 1024)]
    workloads = [(kind, records, size) for kind in kinds for records, size in sizes]
    directory = tempfile.mkdtemp(prefix="kfk-bench-client-")
    broker = start_broker(directory, dict(TEST_OVERRIDES))
    bootstrap = broker.bootstrap_servers
    results: dict[tuple[str, int, int, str], list[dict]] = {}
    loads = [os.getloadavg()[0]]
    try:
        filled: dict[int, str] = {}
        if "consume" in kinds:
            for records, size in sizes:
                filled[size] = f"bench-consume-{size}-{uuid.uuid4().hex[:8]}"
                create_topic(bootstrap, filled[size])
                outcome = child("produce", FILLER, bootstrap, filled[size], records, size)
                assert outcome["records"] == records, outcome
        for kind, records, size in workloads:
            for _ in range(arguments.repetitions):
                for client in clients:
                    if kind == "produce":
                        topic = f"bench-{client}-{uuid.uuid4().hex[:8]}"
                        create_topic(bootstrap, topic)
                    else:
                        topic = filled[size]
                    outcome = child(kind, client, bootstrap, topic, records, size)
                    assert outcome["records"] >= records, (kind, client, outcome)
                    results.setdefault((kind, records, size, client), []).append(outcome)
                    loads.append(os.getloadavg()[0])
    finally:
        broker.stop()
        shutil.rmtree(directory, ignore_errors=True)

    print(f"Python {sys.version.split()[0]}, {os.cpu_count()} CPUs, 1-min load average {min(loads):.2f}-"
          f"{max(loads):.2f} during the run; kfk broker on 127.0.0.1; 1 partition, no compression; produce: acks=1, "
          f"linger.ms=5, batch.size=16384, a callback per record; median of {arguments.repetitions}")
    header = (f"{'workload':<26}{'client':<17}{'records/s':>12}{'MB/s':>9}{'kfk / client':>14}"
              f"{'kfk-asyncio / client':>22}")
    print(header)
    print("-" * len(header))
    for kind, records, size in workloads:
        rates = {}
        for client in clients:
            elapsed = statistics.median(outcome["elapsed_s"] for outcome in results[(kind, records, size, client)])
            rates[client] = records / elapsed
        for client in clients:
            rate = rates[client]
            ratios = "".join(f"{rates[ours] / rate if ours in rates else float('nan'):>{width}.2f}"
                             for ours, width in (("kfk", 14), ("kfk-asyncio", 22)))
            print(f"{f'{kind} {records:,} x {size} B':<26}{client:<17}{rate:>12,.0f}{rate * size / MB:>9.1f}"
                  f"{ratios}")


if __name__ == "__main__":
    main()
