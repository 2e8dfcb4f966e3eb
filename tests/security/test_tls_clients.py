"""TLS listeners with independent clients: confluent-kafka, kafka-python, aiokafka and kcat connect over SSL with and
without a client certificate; ssl.client.auth=required refuses a client without one (or with one no CA of the broker
trusts); the principal is the certificate's DN (the broker logs it at DEBUG for each TLS connection); a plaintext
client or garbage on a TLS listener costs that connection only.

The broker is conftest's tls_broker: listener SSL (ssl.client.auth=requested) and listener MTLS (client certificates
required through the listener.name.mtls. prefix).
"""

from __future__ import annotations

import asyncio
import shutil
import socket
import ssl
import subprocess
import time
import uuid

import pytest

from kfk.testing.broker import BrokerProcess

from .conftest import CLIENT_DN, Certificates, tls_address

RECORDS = [f"record-{i}".encode() for i in range(20)]


def _wait_logged(broker: BrokerProcess, text: str, timeout: float = 10.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        output = broker.output()
        if text in output:
            return output
        time.sleep(0.05)
    raise AssertionError(f"{text!r} not in the broker log:\n{broker.output()[-5000:]}")


def _confluent(broker: BrokerProcess, listener: str, certificates: Certificates, with_certificate: bool,
               topic: str) -> list[bytes]:
    """Produce RECORDS with confluent-kafka over TLS and consume them back; the values read."""
    from confluent_kafka import Consumer, Producer

    config = {"bootstrap.servers": tls_address(broker, listener), "security.protocol": "SSL",
              "ssl.ca.location": str(certificates.ca)}
    if with_certificate:
        config.update({"ssl.certificate.location": str(certificates.client.certificate),
                       "ssl.key.location": str(certificates.client.key)})
    producer = Producer(config)
    for value in RECORDS:
        producer.produce(topic, value)
    assert producer.flush(30) == 0
    consumer = Consumer({**config, "group.id": f"g-{uuid.uuid4().hex[:6]}", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    values: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(values) < len(RECORDS) and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            values.append(message.value())
    consumer.close()
    return values


def test_confluent_kafka_without_a_client_certificate_is_user_anonymous(tls_broker, certificates) -> None:
    topic = f"tls-{uuid.uuid4().hex[:8]}"
    assert _confluent(tls_broker, "SSL", certificates, False, topic) == RECORDS
    _wait_logged(tls_broker, "on SSL (TLSv1.3): principal User:ANONYMOUS")


def test_confluent_kafka_with_a_client_certificate_is_its_dn(tls_broker, certificates) -> None:
    topic = f"tls-{uuid.uuid4().hex[:8]}"
    assert _confluent(tls_broker, "MTLS", certificates, True, topic) == RECORDS
    _wait_logged(tls_broker, f"on MTLS (TLSv1.3): principal User:{CLIENT_DN}")


def test_required_client_auth_refuses_a_client_without_a_certificate(tls_broker, certificates) -> None:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": tls_address(tls_broker, "MTLS"), "security.protocol": "SSL",
                         "ssl.ca.location": str(certificates.ca), "log_level": 0})
    with pytest.raises(Exception, match="_TRANSPORT|_TIMED_OUT"):
        admin.list_topics(timeout=3)
    _wait_logged(tls_broker, "on MTLS failed")


def test_a_certificate_no_trusted_ca_signed_is_refused(tls_broker, certificates) -> None:
    context = ssl.create_default_context(cafile=str(certificates.ca))
    context.load_cert_chain(str(certificates.stranger.pem))
    with socket.create_connection(("127.0.0.1", tls_broker.ports["MTLS"])) as raw:
        with pytest.raises((ssl.SSLError, ConnectionError)):
            with context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
                tls.sendall(b"\x00\x00\x00\x00")
                assert tls.recv(1) == b""  # TLS 1.3: the refusal may only show at the first read
                raise ConnectionError("closed")
    _wait_logged(tls_broker, "on MTLS failed")


def test_the_client_checks_the_broker_s_certificate(tls_broker, certificates) -> None:
    """A client that trusts another CA does not talk to the broker (confluent-kafka's verification)."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": tls_address(tls_broker, "SSL"), "security.protocol": "SSL",
                         "ssl.ca.location": str(certificates.stranger.certificate)})
    with pytest.raises(Exception):
        admin.list_topics(timeout=3)


def test_kafka_python_with_and_without_a_client_certificate(tls_broker, certificates) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    topic = f"tls-kp-{uuid.uuid4().hex[:8]}"
    common = {"security_protocol": "SSL", "ssl_cafile": str(certificates.ca)}
    producer = KafkaProducer(bootstrap_servers=tls_address(tls_broker, "SSL"), **common)
    for value in RECORDS:
        producer.send(topic, value)
    producer.flush(30)
    producer.close()
    consumer = KafkaConsumer(topic, bootstrap_servers=tls_address(tls_broker, "MTLS"), auto_offset_reset="earliest",
                             consumer_timeout_ms=10_000, ssl_certfile=str(certificates.client.certificate),
                             ssl_keyfile=str(certificates.client.key), **common)
    values = [message.value for message in consumer]
    consumer.close()
    assert values == RECORDS


def test_aiokafka_with_and_without_a_client_certificate(tls_broker, certificates) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.helpers import create_ssl_context

    topic = f"tls-aio-{uuid.uuid4().hex[:8]}"

    async def run() -> list[bytes]:
        anonymous = create_ssl_context(cafile=str(certificates.ca))
        authenticated = create_ssl_context(cafile=str(certificates.ca), certfile=str(certificates.client.certificate),
                                           keyfile=str(certificates.client.key))
        producer = AIOKafkaProducer(bootstrap_servers=tls_address(tls_broker, "SSL"), security_protocol="SSL",
                                    ssl_context=anonymous)
        await producer.start()
        try:
            for value in RECORDS:
                await producer.send_and_wait(topic, value)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(topic, bootstrap_servers=tls_address(tls_broker, "MTLS"), security_protocol="SSL",
                                    ssl_context=authenticated, auto_offset_reset="earliest")
        await consumer.start()
        try:
            values: list[bytes] = []
            async with asyncio.timeout(30):
                while len(values) < len(RECORDS):
                    batches = await consumer.getmany(timeout_ms=500)
                    values += [message.value for messages in batches.values() for message in messages]
            return values
        finally:
            await consumer.stop()

    assert asyncio.run(run()) == RECORDS


def test_kcat_with_and_without_a_client_certificate(tls_broker, certificates) -> None:
    kcat = shutil.which("kcat") or shutil.which("kafkacat")
    assert kcat, "kcat is installed by scripts/test.sh"
    topic = f"tls-kcat-{uuid.uuid4().hex[:8]}"
    ssl_args = ["-X", "security.protocol=ssl", "-X", f"ssl.ca.location={certificates.ca}"]
    produced = subprocess.run([kcat, "-b", tls_address(tls_broker, "SSL"), *ssl_args, "-P", "-t", topic],
                              input=b"one\ntwo\nthree\n", capture_output=True, timeout=60)
    assert produced.returncode == 0, produced.stderr
    client = ["-X", f"ssl.certificate.location={certificates.client.certificate}",
              "-X", f"ssl.key.location={certificates.client.key}"]
    consumed = subprocess.run([kcat, "-b", tls_address(tls_broker, "MTLS"), *ssl_args, *client, "-C", "-t", topic,
                               "-e", "-o", "beginning"], capture_output=True, timeout=60)
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout.split() == [b"one", b"two", b"three"]
    refused = subprocess.run([kcat, "-b", tls_address(tls_broker, "MTLS"), *ssl_args, "-L", "-m", "3"],
                             capture_output=True, timeout=60)
    assert refused.returncode != 0


def test_plaintext_and_garbage_on_a_tls_listener_cost_only_their_own_connection(tls_broker, certificates) -> None:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": tls_address(tls_broker, "SSL"), "security.protocol": "SSL",
                         "ssl.ca.location": str(certificates.ca)})
    assert admin.list_topics(timeout=10).brokers  # a TLS client connected before the garbage arrives
    port = tls_broker.ports["SSL"]
    # A Kafka ApiVersions request in plaintext, random bytes, and a connection that says nothing and leaves.
    api_versions = bytes.fromhex("00000012001200030000000100066b63617400")
    for payload in (api_versions, b"\x16\x03\x01\x00\x05garbage-handshake", bytes(range(256)) * 4, b""):
        with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
            raw.sendall(payload)
            raw.shutdown(socket.SHUT_WR)
            raw.settimeout(10)
            try:
                while raw.recv(4096):
                    pass  # an alert at most, never a Kafka response
            except ConnectionResetError:
                pass
    output = _wait_logged(tls_broker, "on SSL failed")
    assert "Traceback" not in output
    assert admin.list_topics(timeout=10).brokers  # ... is still served
    later = AdminClient({"bootstrap.servers": tls_address(tls_broker, "SSL"), "security.protocol": "SSL",
                         "ssl.ca.location": str(certificates.ca)})
    assert later.list_topics(timeout=10).brokers  # and so are new TLS clients
