"""num.network.threads > 1: the broker's network processes (kfk.server.network_processes, network_worker), with real
clients over real sockets against a `kfk server start` process; and the channel's framing on its own."""

from __future__ import annotations

import hashlib
import os
import random
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from hypothesis import given, settings
from hypothesis import strategies as st

from kfk.server.network_channel import OPENED, RECEIVED, WRITE, MessageReader, message
from kfk.testing.broker import BrokerProcess

pytestmark = pytest.mark.integration


def children(pid: int) -> list[int]:
    """The processes whose parent is `pid`, from /proc."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry))
    return sorted(found)


def network_processes(pid: int) -> list[int]:
    result = []
    for child in children(pid):
        try:
            if b"kfk.server.network_worker" in Path(f"/proc/{child}/cmdline").read_bytes():
                result.append(child)
        except OSError:
            pass
    return result


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wait_for(condition, timeout: float = 30.0, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def broker_pid(broker: BrokerProcess) -> int:
    assert broker.process is not None
    return broker.process.pid


def values(count: int, seed: int) -> list[bytes]:
    """Record values of mixed sizes: small ones (read into a response by the event loop) and 20-200 KiB ones (sent
    with sendfile by a network process)."""
    rng = random.Random(seed)
    return [rng.randbytes(rng.choice((10, 900, 20_000, 200_000))) for _ in range(count)]


def produce(bootstrap: str, topic: str, records: list[bytes]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "message.max.bytes": 1_000_000})
    failures = []
    for index, value in enumerate(records):
        producer.produce(topic, value, key=str(index).encode(),
                         on_delivery=lambda error, _message: error and failures.append(error))
        producer.poll(0)
    assert producer.flush(60) == 0
    assert failures == []


def consume_confluent(bootstrap: str, topic: str, count: int) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{topic}", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    consumer.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + 60
    while len(got) < count and time.monotonic() < deadline:
        for record in consumer.consume(1000, 1.0):
            assert record.error() is None, record.error()
            got.append(record.value())
    consumer.close()
    return got


def create_topic(bootstrap: str, topic: str, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)


@pytest.fixture
def two_network_processes(kfk_broker_factory) -> BrokerProcess:
    broker = kfk_broker_factory({"num.network.threads": "2"})
    wait_for(lambda: len(network_processes(broker_pid(broker))) == 2, what="two network processes")
    return broker


def test_real_clients_produce_and_consume_through_the_network_processes(two_network_processes: BrokerProcess,
                                                                         tmp_path: Path) -> None:
    """confluent-kafka produces records of mixed sizes, and confluent-kafka, kafka-python and kcat read back the
    same bytes; the network processes, not the event loop alone, spent CPU serving them (the sendfile of ~25 MB)."""
    from kafka import KafkaConsumer

    broker = two_network_processes
    bootstrap = broker.bootstrap_servers
    workers = network_processes(broker_pid(broker))
    before = sum(cpu_seconds(pid) for pid in workers)
    create_topic(bootstrap, "mixed", partitions=3)
    records = values(400, seed=7)
    produce(bootstrap, "mixed", records)
    expected = sorted(hashlib.sha256(value).hexdigest() for value in records)

    assert sorted(hashlib.sha256(v).hexdigest() for v in consume_confluent(bootstrap, "mixed", 400)) == expected

    consumer = KafkaConsumer("mixed", bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                             consumer_timeout_ms=10_000, fetch_max_bytes=4 * 1024 * 1024)
    assert sorted(hashlib.sha256(record.value).hexdigest() for record in consumer) == expected
    consumer.close()

    output = tmp_path / "kcat.out"
    with open(output, "wb") as sink:
        subprocess.run(["kcat", "-b", bootstrap, "-C", "-t", "mixed", "-e", "-q", "-f", "%S\n"], stdout=sink,
                       timeout=120, check=True, stdin=subprocess.DEVNULL)
    sizes = sorted(int(line) for line in output.read_text().split())
    assert sizes == sorted(len(value) for value in records)
    assert sum(cpu_seconds(pid) for pid in workers) > before


def test_a_network_process_that_dies_is_replaced_and_clients_carry_on(two_network_processes: BrokerProcess) -> None:
    broker = two_network_processes
    bootstrap = broker.bootstrap_servers
    create_topic(bootstrap, "survivor")
    produce(bootstrap, "survivor", [b"before"] * 10)
    victim = network_processes(broker_pid(broker))[0]
    os.kill(victim, signal.SIGKILL)
    replaced = wait_for(lambda: (lambda now: len(now) == 2 and victim not in now and now)(
        network_processes(broker_pid(broker))), what="a replacement network process")
    assert victim not in replaced
    assert "network process" in broker.output() and "starting another in its place" in broker.output()
    produce(bootstrap, "survivor", [b"after"] * 10)
    assert sorted(consume_confluent(bootstrap, "survivor", 20)) == [b"after"] * 10 + [b"before"] * 10


@pytest.mark.parametrize("how", ["stop", "kill"])
def test_the_network_processes_end_with_the_broker(two_network_processes: BrokerProcess, how: str) -> None:
    """A clean stop ends them, and so does a broker killed with SIGKILL (their channel closes): none is left
    holding the port."""
    broker = two_network_processes
    workers = network_processes(broker_pid(broker))
    port = broker.port
    if how == "stop":
        assert broker.stop() == 0
    else:
        broker.kill()

    def gone() -> bool:
        return not any(Path(f"/proc/{pid}").exists() and "Z" not in Path(f"/proc/{pid}/stat").read_text().split()[2]
                       for pid in workers)

    wait_for(gone, timeout=15, what="the network processes to exit")
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        probe.bind(("127.0.0.1", port))


def test_connection_limits_hold_across_the_network_processes(kfk_broker_factory) -> None:
    """max.connections.per.ip counts every client, whichever network process accepted it: the event loop admits
    them, as with one process."""
    broker = kfk_broker_factory({"num.network.threads": "2", "max.connections.per.ip": "3"})
    from tests.integration.wire import api_versions_request, connect, is_closed, request

    held = [connect(broker.bootstrap_servers) for _ in range(3)]
    try:
        for sock in held:
            assert request(sock, api_versions_request(), 3).error_code == 0
        with connect(broker.bootstrap_servers) as extra:
            assert is_closed(extra)
    finally:
        for sock in held:
            sock.close()


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([OPENED, RECEIVED, WRITE]), st.integers(0, 2**32 - 1),
                          st.binary(max_size=300)), max_size=12),
       st.lists(st.integers(1, 64), min_size=1, max_size=20))
def test_the_channel_reader_reassembles_messages_however_the_stream_is_cut(messages, cuts) -> None:
    """RECEIVED payloads arrive in pieces (concatenated per connection, in order); every other message whole."""
    stream = b"".join(message(kind, connection_id, payload) for kind, connection_id, payload in messages)
    whole: list[tuple[int, int, bytes]] = []
    received: list[tuple[int, bytes]] = []
    reader = MessageReader(lambda kind, cid, payload: whole.append((kind, cid, bytes(payload))),
                           lambda cid, piece: received.append((cid, bytes(piece))))
    offset, index = 0, 0
    while offset < len(stream):
        size = cuts[index % len(cuts)]
        reader.feed(memoryview(stream[offset:offset + size]))
        offset += size
        index += 1
    assert whole == [(kind, cid, payload) for kind, cid, payload in messages if kind != RECEIVED or not payload]
    expected_received = b"".join(payload for kind, _cid, payload in messages if kind == RECEIVED)
    assert b"".join(piece for _cid, piece in received) == expected_received
    for cid, _piece in received:
        assert any(kind == RECEIVED and c == cid for kind, c, _ in messages)


def test_a_dynamic_num_network_threads_adds_and_stops_network_processes(two_network_processes: BrokerProcess
                                                                         ) -> None:
    """kafka-configs' way (IncrementalAlterConfigs on the broker): 3 processes, then 2 again, and clients
    are served throughout."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

    broker = two_network_processes
    bootstrap = broker.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bootstrap})

    def set_threads(count: int) -> None:
        resource = ConfigResource("BROKER", "1", incremental_configs=[
            ConfigEntry("num.network.threads", str(count), incremental_operation=AlterConfigOpType.SET)])
        for future in admin.incremental_alter_configs([resource]).values():
            future.result(30)

    set_threads(3)
    wait_for(lambda: len(network_processes(broker_pid(broker))) == 3, what="a third network process")
    set_threads(2)
    wait_for(lambda: len(network_processes(broker_pid(broker))) == 2, what="back to two network processes")
    create_topic(bootstrap, "resized")
    produce(bootstrap, "resized", [b"v"] * 50)
    assert consume_confluent(bootstrap, "resized", 50) == [b"v"] * 50
