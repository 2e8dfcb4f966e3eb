"""The broker's Prometheus endpoint (metrics.port) under a confluent-kafka produce/consume load, scraped over HTTP and
parsed with prometheus-client's own parser: bytes in equals the record batches the broker stored (and is within 1 %
of the payload produced), records in and the group's offsets and lag are exact, the request histograms count the
requests, the error counters count each response's codes (NONE included) by Kafka's names, Fetch is split into
consumers' and followers', and the broker-count, under-min-ISR, idle-share and process metrics are there."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer

from kfk.client import Admin
from kfk.testing.ports import free_port
from tests.integration.prometheus import scrape, value

pytestmark = pytest.mark.integration

RECORDS = 600
VALUE_BYTES = 10_000
PARTITIONS = 3


def test_metrics_endpoint_off_by_default(kfk_broker_process) -> None:
    assert "metrics on" not in kfk_broker_process.output()


def test_bytes_in_records_in_lag_and_request_metrics_under_load(kfk_broker_factory) -> None:
    port = free_port()
    broker = kfk_broker_factory({"metrics.port": str(port), "num.partitions": str(PARTITIONS)})
    bootstrap = broker.bootstrap_servers
    assert f"metrics on http://127.0.0.1:{port}/metrics" in broker.output()
    topic = "metered"
    producer = Producer({"bootstrap.servers": bootstrap, "compression.type": "none", "linger.ms": 5,
                         "enable.idempotence": True})
    producer.produce(topic, b"first", partition=0)  # creates the topic (auto-creation)
    assert producer.flush(20) == 0

    scrapes_during_load: list[dict] = []

    def scrape_while_loaded() -> None:
        while len(scrapes_during_load) < 5:
            scrapes_during_load.append(scrape(port))

    scraper = threading.Thread(target=scrape_while_loaded)
    scraper.start()
    for index in range(RECORDS):
        producer.produce(topic, bytes([index % 251]) * VALUE_BYTES, key=b"k%04d" % index,
                         partition=index % PARTITIONS)
        producer.poll(0)
    assert producer.flush(30) == 0
    scraper.join(30)
    assert len(scrapes_during_load) == 5  # the endpoint answered while the broker was busy

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "metered-group", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    consumer.subscribe([topic])
    consumed = 0
    while consumed < RECORDS + 1:
        message = consumer.poll(10)
        assert message is not None, f"consumed only {consumed} records"
        assert message.error() is None
        consumed += 1
    consumer.commit(asynchronous=False)
    consumer.close()

    with Admin({"bootstrap.servers": bootstrap}) as admin:
        assert admin.delete_topics(["no-such-topic"])["no-such-topic"] is not None

    samples = scrape(port)
    produced_records = RECORDS + 1
    payload = len(b"first") + RECORDS * (VALUE_BYTES + len(b"k0000"))
    bytes_in = value(samples, "kafka_server_brokertopicmetrics_bytesin_total", topic=topic)
    assert value(samples, "kafka_server_brokertopicmetrics_messagesin_total", topic=topic) == produced_records
    # BytesIn counts the record batches as received; uncompressed v2 batches are stored byte for byte, so it equals
    # the partitions' log sizes, as the metric and the segment files on disk say.
    segments = sum(path.stat().st_size for path in Path(broker.log_dir).glob(f"{topic}-*/*.log"))
    assert bytes_in == segments
    assert sum(value(samples, "kafka_log_log_size", topic=topic, partition=str(p)) for p in range(PARTITIONS)) \
        == segments
    assert abs(bytes_in - payload) / payload < 0.01, (bytes_in, payload)
    assert value(samples, "kafka_server_brokertopicmetrics_bytesout_total", topic=topic) >= bytes_in
    assert value(samples, "kafka_server_brokertopicmetrics_replicationbytesout_total", topic=topic) == 0

    per_partition = [(RECORDS + PARTITIONS - 1 - p) // PARTITIONS + (p == 0) for p in range(PARTITIONS)]
    for partition, end in enumerate(per_partition):
        labels = {"consumergroup": "metered-group", "topic": topic, "partition": str(partition)}
        assert value(samples, "kafka_consumergroup_current_offset", **labels) == end
        assert value(samples, "kafka_consumergroup_lag", **labels) == 0

    produce_requests = value(samples, "kafka_network_requestmetrics_requests_total", request="Produce")
    assert produce_requests >= 2
    assert value(samples, "kafka_network_requestmetrics_totaltimems_count", request="Produce") == produce_requests
    assert value(samples, "kafka_network_requestmetrics_requestqueuetimems_count", request="Produce") \
        == produce_requests
    buckets = sorted(((float(dict(labels)["le"]), count) for (name, labels), count in samples.items()
                      if name == "kafka_network_requestmetrics_totaltimems_bucket"
                      and dict(labels)["request"] == "Produce"))
    assert buckets[-1] == (float("inf"), produce_requests)
    assert all(a[1] <= b[1] for a, b in zip(buckets, buckets[1:]))  # cumulative
    assert value(samples, "kafka_network_requestmetrics_totaltimems_sum", request="Produce") > 0
    assert value(samples, "kafka_network_requestmetrics_requests_total", request="Fetch") >= 1
    # Each produce response carries one code per partition, NONE here: at least one per request.
    assert value(samples, "kafka_network_requestmetrics_errors_total", request="Produce", error="NONE") \
        >= produce_requests
    assert value(samples, "kafka_network_requestmetrics_errors_total", request="DeleteTopics",
                 error="UNKNOWN_TOPIC_OR_PARTITION") == 1
    # Every fetch came from the consumer (a single broker has no followers); each fetch built one response.
    fetch_consumer = value(samples, "kafka_network_requestmetrics_requests_total", request="FetchConsumer")
    assert 1 <= fetch_consumer <= value(samples, "kafka_network_requestmetrics_requests_total", request="Fetch") + 1
    assert value(samples, "kafka_network_requestmetrics_requests_total", request="FetchFollower") == 0
    assert value(samples, "kafka_controller_kafkacontroller_activebrokercount") == 1
    assert value(samples, "kafka_controller_kafkacontroller_fencedbrokercount") == 0
    assert value(samples, "kafka_server_replicamanager_underminisrpartitioncount") == 0
    for idle in ("kafka_network_socketserver_networkprocessoravgidlepercent",
                 "kafka_server_kafkarequesthandlerpool_requesthandleravgidlepercent"):
        assert 0 < value(samples, idle) <= 1
    assert value(samples, "process_resident_memory_bytes") > 10_000_000
    assert value(samples, "process_open_fds") >= 10  # the log segments, the listener, the metrics server
    assert value(samples, "process_cpu_seconds_total") > 0

    assert value(samples, "kafka_controller_kafkacontroller_activecontrollercount") == 1
    assert value(samples, "kafka_controller_kafkacontroller_offlinepartitionscount") == 0
    assert value(samples, "kafka_server_replicamanager_underreplicatedpartitions") == 0
    assert value(samples, "kafka_server_replicamanager_leadercount") >= PARTITIONS
    assert value(samples, "kafka_server_delayedoperationpurgatory_purgatorysize", delayedoperation="Produce") == 0
    # The producer is still connected; the consumer has gone.
    assert value(samples, "kafka_server_socketservermetrics_connection_count", listener="PLAINTEXT") >= 1
    # Counters only grow: the scrapes during the load never saw more than the last one.
    for during in scrapes_during_load:
        key = ("kafka_server_brokertopicmetrics_bytesin_total", (("topic", topic),))
        assert during.get(key, 0) <= bytes_in


def test_a_metrics_port_in_use_stops_the_broker_in_one_line(tmp_path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run([sys.executable, "-m", "kfk", "server", "start", "--override",
                                 "listeners=PLAINTEXT://127.0.0.1:0", "--override", f"log.dirs={tmp_path}",
                                 "--override", f"metrics.port={port}"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines()[-1] == (
        f"kfk: metrics.port: cannot listen on 127.0.0.1:{port}: Address already in use")
