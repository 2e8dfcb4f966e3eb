"""The schema registry's figures: schema lookups by id per second (through HTTP every time, and through the
serdes' client cache), and Avro produce/consume records/s against plain bytes of the same records in the same run
(kfk's Producer and Consumer; Avro encoded with kfk.registry.serdes, decoded with fastavro by the writer's schema).

    python bench/bench_registry.py [--records 50000] [--lookups 2000]
"""

from __future__ import annotations

import argparse
import http.client
import io
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import fastavro  # noqa: E402

from kfk.client import Consumer, Producer, TopicPartition  # noqa: E402
from kfk.registry.serdes import AvroSerializer, RegistryClient, unframe  # noqa: E402
from kfk.testing.broker import start_broker  # noqa: E402

SCHEMA = {"type": "record", "name": "Click", "fields": [
    {"name": "user", "type": "string"}, {"name": "page", "type": "string"}, {"name": "ms", "type": "long"},
    {"name": "referrer", "type": ["null", "string"], "default": None}]}


def start_registry(bootstrap: str) -> tuple[subprocess.Popen, str]:
    process = subprocess.Popen([sys.executable, "-m", "kfk", "schema-registry", "start", "--bootstrap-server",
                                bootstrap, "--listeners", "http://127.0.0.1:0"], stderr=subprocess.PIPE, text=True,
                               env=dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1])))
    for line in process.stderr:
        found = re.search(r"on (http://\S+)/", line)
        if found:
            return process, found.group(1)
    raise SystemExit("the registry did not start")


def lookups(url: str, count: int, subject: str = "clicks") -> tuple[AvroSerializer, int, float, float]:
    """Register SCHEMA under `subject` of the registry at `url`, then look its id up `count` times over HTTP (a GET
    per lookup over one keep-alive connection, as confluent-kafka's httpx client sends them, every one answered by
    the registry) and `count` x 100 times from the serdes' client cache. Returns the serializer, the schema id and
    lookups/s uncached and cached."""
    client = RegistryClient(url)
    serializer = AvroSerializer(client, json.dumps(SCHEMA))
    schema_id = serializer.schema_id(subject)
    host, port = url.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port))
    started = time.perf_counter()
    for _ in range(count):
        connection.request("GET", f"/schemas/ids/{schema_id}")
        json.loads(connection.getresponse().read())
    uncached = count / (time.perf_counter() - started)
    connection.close()
    started = time.perf_counter()
    for _ in range(count * 100):
        client.schema(schema_id)
    cached = count * 100 / (time.perf_counter() - started)
    return serializer, schema_id, uncached, cached


def produce(bootstrap: str, topic: str, values: list[bytes]) -> float:
    started = time.perf_counter()
    with Producer({"bootstrap.servers": bootstrap, "linger.ms": 5}) as producer:
        for value in values:
            producer.send(topic, value, partition=0)
        producer.flush()
    return time.perf_counter() - started


def consume(bootstrap: str, topic: str, count: int, decode) -> float:
    started = time.perf_counter()
    consumer = Consumer({"bootstrap.servers": bootstrap})
    consumer.assign([TopicPartition(topic, 0)])
    consumer.seek_to_beginning(TopicPartition(topic, 0))
    seen = 0
    while seen < count:
        for record in consumer.poll(5).as_list():
            decode(record.value)
            seen += 1
    consumer.close()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=50_000)
    parser.add_argument("--lookups", type=int, default=2_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        broker = start_broker(Path(directory), {"offsets.topic.replication.factor": "1"})
        registry, url = start_registry(broker.bootstrap_servers)
        try:
            serializer, _, uncached, cached = lookups(url, args.lookups)
            print(f"lookups by id: {uncached:,.0f}/s over HTTP (uncached), {cached:,.0f}/s from the client's cache")

            rows = [{"user": f"user-{n % 1000}", "page": f"/page/{n % 97}", "ms": n, "referrer": None if n % 2 else
                     "https://example.com/"} for n in range(args.records)]
            started = time.perf_counter()
            avro_values = [serializer.serialize("clicks", row) for row in rows]
            encode_seconds = time.perf_counter() - started
            plain_values = [json.dumps(row).encode() for row in rows]
            parsed = fastavro.parse_schema(SCHEMA)

            def decode_avro(data: bytes) -> None:
                fastavro.schemaless_reader(io.BytesIO(unframe(data)[1]), parsed, None)

            plain_produce = produce(broker.bootstrap_servers, "plain", plain_values)
            avro_produce = produce(broker.bootstrap_servers, "clicks", avro_values) + encode_seconds
            plain_consume = consume(broker.bootstrap_servers, "plain", args.records, lambda data: None)
            avro_consume = consume(broker.bootstrap_servers, "clicks", args.records, decode_avro)
            n = args.records
            print(f"produce: plain bytes {n / plain_produce:,.0f} records/s, Avro (encode included) "
                  f"{n / avro_produce:,.0f} records/s")
            print(f"consume: plain bytes {n / plain_consume:,.0f} records/s, Avro (decode included) "
                  f"{n / avro_consume:,.0f} records/s")
            print(f"record size: plain JSON {sum(map(len, plain_values)) / n:.0f} B, Avro framed "
                  f"{sum(map(len, avro_values)) / n:.0f} B")
        finally:
            registry.terminate()
            registry.wait()
            broker.stop()


if __name__ == "__main__":
    main()
