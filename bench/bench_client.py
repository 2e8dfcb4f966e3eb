"""Client benchmark: `kfk perf-test produce` next to kafka-python and confluent-kafka, against the same kfk broker.

    python bench/bench_client.py [--records 1000000] [--kib-records 200000] [--repetitions 1]

Workloads (the issue's): 1,000,000 records of 100 B and 200,000 records of 1 KiB, acks=1, no compression, one
partition, a fresh topic per run. Every client gets the same settings (linger.ms=5, batch.size=16384, acks=1) and
does what Kafka's producer perf tool does: send every record with a delivery callback, then flush; records/s and MB/s
are measured from the first send to the end of the flush. kfk runs as the real `kfk perf-test produce --json`; the
other two run in their own Python process (one client per process, so no client shares a GIL with another). Clients
run one after the other against one broker started for the whole run; with --repetitions N they are interleaved
and the median is reported. Ratios are kfk / other.
"""

from __future__ import annotations

import argparse
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


# --- the clients, each run in a child process ---------------------------------------------------------------------

def run_kafka_python(bootstrap: str, topic: str, records: int, size: int) -> dict:
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


def run_confluent(bootstrap: str, topic: str, records: int, size: int) -> dict:
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


def child(client: str, bootstrap: str, topic: str, records: int, size: int) -> dict:
    if client == "kfk":
        kfk = shutil.which("kfk") or os.path.join(os.path.dirname(sys.executable), "kfk")
        args = [kfk, "perf-test", "produce", "--topic", topic, "--num-records", str(records), "--record-size",
                str(size), "--throughput", "-1", "--bootstrap-server", bootstrap, "--json"]
        for key, value in SETTINGS.items():
            args += ["--producer-props", f"{key}={value}"]
        result = json.loads(subprocess.run(args, capture_output=True, text=True, check=True).stdout)
        return {"records": result["records"], "elapsed_s": result["elapsed_s"]}
    script = [sys.executable, __file__, "--child", client, "--bootstrap", bootstrap, "--topic", topic,
              "--child-records", str(records), "--size", str(size)]
    return json.loads(subprocess.run(script, capture_output=True, text=True, check=True).stdout)


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
    parser.add_argument("--clients", default="kfk,kafka-python,confluent-kafka")
    parser.add_argument("--child")
    parser.add_argument("--bootstrap")
    parser.add_argument("--topic")
    parser.add_argument("--child-records", type=int)
    parser.add_argument("--size", type=int)
    arguments = parser.parse_args()
    if arguments.child:
        runner = {"kafka-python": run_kafka_python, "confluent-kafka": run_confluent}[arguments.child]
        print(json.dumps(runner(arguments.bootstrap, arguments.topic, arguments.child_records, arguments.size)))
        return

    from kfk.testing.broker import start_broker
    from kfk.testing.plugin import TEST_OVERRIDES

    clients = arguments.clients.split(",")
    workloads = [(arguments.records, 100), (arguments.kib_records, 1024)]
    directory = tempfile.mkdtemp(prefix="kfk-bench-client-")
    broker = start_broker(directory, dict(TEST_OVERRIDES))
    results: dict[tuple[int, int, str], list[dict]] = {}
    try:
        for records, size in workloads:
            for _ in range(arguments.repetitions):
                for client in clients:
                    topic = f"bench-{client}-{uuid.uuid4().hex[:8]}"
                    create_topic(broker.bootstrap_servers, topic)
                    outcome = child(client, broker.bootstrap_servers, topic, records, size)
                    assert outcome["records"] == records, (client, outcome)
                    results.setdefault((records, size, client), []).append(outcome)
    finally:
        broker.stop()
        shutil.rmtree(directory, ignore_errors=True)

    print(f"Python {sys.version.split()[0]}, {os.cpu_count()} CPUs; kfk broker on 127.0.0.1; "
          f"acks=1, linger.ms=5, batch.size=16384, no compression, 1 partition, a callback per record; "
          f"median of {arguments.repetitions}")
    header = f"{'workload':<18}{'client':<17}{'records/s':>12}{'MB/s':>9}{'kfk / client':>14}"
    print(header)
    print("-" * len(header))
    for records, size in workloads:
        rates = {}
        for client in clients:
            elapsed = statistics.median(outcome["elapsed_s"] for outcome in results[(records, size, client)])
            rates[client] = records / elapsed
        for client in clients:
            rate = rates[client]
            ratio = rates["kfk"] / rate if "kfk" in rates else float("nan")
            print(f"{f'{records:,} x {size} B':<18}{client:<17}{rate:>12,.0f}{rate * size / MB:>9.1f}{ratio:>14.2f}")


if __name__ == "__main__":
    main()
