"""AlterReplicaLogDirs: a replica moves to the broker's other log dir while confluent-kafka produces to it, and
kafka-python's admin moves replicas and sees them in DescribeLogDirs."""

from __future__ import annotations

import errno
import os
import select
import shutil
import threading
import time

import pytest
from confluent_kafka import Consumer, Producer
from kafka import KafkaAdminClient, TopicPartitionReplica
from kafka.admin import NewTopic
from kafka.errors import NoError

from kfk.errors import ErrorCode
from kfk.protocol.headers import RequestHeader, decode_response, encode_request
from kfk.protocol.messages.alter_replica_log_dirs import AlterReplicaLogDirsRequest
from kfk.protocol.messages.create_topics import CreateTopicsRequest
from kfk.protocol.messages.describe_log_dirs import DescribeLogDirsRequest
from kfk.common.uuids import uuid_to_base64
from tests.integration.wire import connect, read_frame, request

pytestmark = pytest.mark.integration

TOPIC = "moving"
AlterDir = AlterReplicaLogDirsRequest.AlterReplicaLogDir
AlterTopic = AlterReplicaLogDirsRequest.AlterReplicaLogDirTopic


def alter(sock, path: str, topic: str, partition: int, version: int = 2) -> int:
    response = request(sock, AlterReplicaLogDirsRequest(dirs=[AlterDir(path=path, topics=[
        AlterTopic(name=topic, partitions=[partition])])]), version)
    (result,) = response.results
    assert (result.topic_name, [p.partition_index for p in result.partitions]) == (topic, [partition])
    return result.partitions[0].error_code


def where(sock, topic: str) -> dict[str, list[tuple[int, bool]]]:
    """Per log dir: the (partition, is_future) of `topic` it holds."""
    response = request(sock, DescribeLogDirsRequest(topics=None), 4)
    return {result.log_dir: [(p.partition_index, p.is_future_key) for t in result.topics if t.name == topic
                             for p in t.partitions] for result in response.results}


def consume_all(bootstrap: str, expected: int) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "check", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    consumer.subscribe([TOPIC])
    values: list[bytes] = []
    deadline = time.monotonic() + 60
    while len(values) < expected and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            values.append(message.value())
    consumer.close()
    return values


def test_a_replica_moves_to_the_other_log_dir_while_it_is_produced_to(kfk_broker_factory, tmp_path) -> None:
    first, second = str(tmp_path / "first"), str(tmp_path / "second")
    broker = kfk_broker_factory({"log.dirs": f"{first},{second}"})
    bootstrap = broker.bootstrap_servers
    with connect(bootstrap) as sock:
        topic = CreateTopicsRequest.CreatableTopic(name=TOPIC, num_partitions=1, replication_factor=1, configs=[
            CreateTopicsRequest.CreatableTopicConfig(name="segment.bytes", value="1048576")])
        (created,) = request(sock, CreateTopicsRequest(topics=[topic], timeout_ms=10000), 7).topics
        assert created.error_code == ErrorCode.NONE
        deadline = time.monotonic() + 10
        while not any(where(sock, TOPIC).values()) and time.monotonic() < deadline:
            time.sleep(0.05)
        (source,) = [path for path, partitions in where(sock, TOPIC).items() if partitions]
        destination = second if source == first else first

        assert alter(sock, str(tmp_path / "elsewhere"), TOPIC, 0) == ErrorCode.LOG_DIR_NOT_FOUND
        assert alter(sock, destination, "no-such-topic", 0) == ErrorCode.REPLICA_NOT_AVAILABLE
        assert alter(sock, destination, TOPIC, 7, version=1) == ErrorCode.REPLICA_NOT_AVAILABLE

        acknowledged: list[bytes] = []
        producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})

        def delivered(error, message) -> None:
            if error is None:
                acknowledged.append(message.value())

        for index in range(3000):  # about 3 MiB: closed segments to copy while the producer goes on
            producer.produce(TOPIC, b"%06d" % index + os.urandom(1000), on_delivery=delivered)
            producer.poll(0)
        producer.flush(30)
        stop = threading.Event()

        def produce() -> None:
            index = 3000
            while not stop.is_set():
                producer.produce(TOPIC, b"%06d" % index + os.urandom(1000), on_delivery=delivered)
                producer.poll(0.002)
                index += 1
            producer.flush(30)

        thread = threading.Thread(target=produce)
        thread.start()
        try:
            time.sleep(0.3)
            before = len(acknowledged)
            assert alter(sock, destination, TOPIC, 0) == ErrorCode.NONE
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                placement = where(sock, TOPIC)
                if placement[destination] == [(0, False)] and placement[source] == []:
                    break
                time.sleep(0.01)
            assert where(sock, TOPIC)[destination] == [(0, False)]
            time.sleep(0.3)
        finally:
            stop.set()
            thread.join()
    assert len(acknowledged) > before, "records were acknowledged during the move"
    values = consume_all(bootstrap, len(acknowledged))
    assert sorted(values) == sorted(acknowledged)
    moved = os.path.join(destination, f"{TOPIC}-0")
    assert [name for name in os.listdir(moved) if name.endswith(".log")]
    assert not os.path.exists(os.path.join(source, f"{TOPIC}-0"))

    broker.stop()
    broker.start()
    with connect(broker.bootstrap_servers) as sock:
        assert where(sock, TOPIC)[destination] == [(0, False)]
        assert where(sock, TOPIC)[source] == []
    assert sorted(consume_all(broker.bootstrap_servers, len(acknowledged))) == sorted(acknowledged)


def test_kafka_python_admin_moves_a_replica_and_describes_the_log_dirs(kfk_broker_factory, tmp_path) -> None:
    first, second = str(tmp_path / "first"), str(tmp_path / "second")
    broker = kfk_broker_factory({"log.dirs": f"{first},{second}"})
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    try:
        admin.create_topics([NewTopic(TOPIC, 2, 1)])
        with connect(broker.bootstrap_servers) as sock:
            # The replicas are listed once the broker has created their logs (seconds on a loaded machine)
            deadline = time.monotonic() + 30
            while sum(len(partitions) for partitions in where(sock, TOPIC).values()) < 2 \
                    and time.monotonic() < deadline:
                time.sleep(0.05)
            placement = where(sock, TOPIC)
            assert sum(len(partitions) for partitions in placement.values()) == 2, placement
        # one partition per dir: swap them
        targets = {partition: (second if path == first else first)
                   for path, partitions in placement.items() for partition, _ in partitions}
        replicas = {TopicPartitionReplica(TOPIC, partition, broker.node_id): path
                    for partition, path in targets.items()}
        # A partition listed while its log is being created is answered once it is hosted (the test below)
        assert admin.alter_replica_log_dirs(replicas) == {replica: NoError for replica in replicas}
        wanted = {path: [(partition, False)] for partition, path in targets.items()}
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            (described,) = admin.describe_log_dirs()
            placement = {log_dir["log_dir"]: sorted((p["partition_index"], p["is_future_key"])
                                                    for topic in log_dir["topics"] if topic["name"] == TOPIC
                                                    for p in topic["partitions"])
                         for log_dir in described["log_dirs"]}
            if placement == wanted:
                break
            time.sleep(0.02)
        assert placement == wanted
    finally:
        admin.close()


def test_a_partition_listed_while_its_log_is_created_can_be_moved(kfk_broker_factory, tmp_path) -> None:
    """DescribeLogDirs lists a log as soon as the log manager has it, while the replica manager opens the logs of
    a new topic several at a time and hosts them once all are open; AlterReplicaLogDirs for a listed partition must
    not answer REPLICA_NOT_AVAILABLE meanwhile (in Kafka both take the replica state lock, so it waits). A named
    pipe as partition 1's partition.metadata holds that partition's creation, and with it the hosting of partition 0,
    until the test writes the topic id into it."""
    first, second = str(tmp_path / "first"), str(tmp_path / "second")
    broker = kfk_broker_factory({"log.dirs": f"{first},{second}"})
    held = "held"
    pipes = [os.path.join(log_dir, f"{held}-1", "partition.metadata") for log_dir in (first, second)]
    for pipe in pipes:  # either dir may get partition 1
        os.makedirs(os.path.dirname(pipe))
        os.mkfifo(pipe)
    with connect(broker.bootstrap_servers) as sock:
        (created,) = request(sock, CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic(
            name=held, num_partitions=2, replication_factor=1, configs=[])], timeout_ms=10000), 7).topics
        assert created.error_code == ErrorCode.NONE
        content = f"version: 0\ntopic_id: {uuid_to_base64(created.topic_id)}\n".encode()
        try:
            deadline = time.monotonic() + 30
            while sorted(p for partitions in where(sock, held).values() for p, _ in partitions) != [0, 1] \
                    and time.monotonic() < deadline:
                time.sleep(0.05)
            (source,) = [path for path, partitions in where(sock, held).items() if (0, False) in partitions]
            destination = second if source == first else first
            header = RequestHeader(request_api_key=AlterReplicaLogDirsRequest.API_KEY, request_api_version=2,
                                   correlation_id=7, client_id="kfk-tests")
            sock.sendall(encode_request(header, AlterReplicaLogDirsRequest(dirs=[AlterDir(path=destination, topics=[
                AlterTopic(name=held, partitions=[0])])])))
            # partition 0 waits for partition 1's creation: the broker answers once both are hosted
            assert select.select([sock], [], [], 0.5)[0] == [], "answered before partition 0 was hosted"
        finally:
            _release(pipes, content)
        frame = read_frame(sock)
        assert frame is not None
        correlation_id, response = decode_response(frame, AlterReplicaLogDirsRequest.API_KEY, 2)
        assert correlation_id == 7
        assert [(p.partition_index, ErrorCode(p.error_code)) for result in response.results
                for p in result.partitions] == [(0, ErrorCode.NONE)]
        deadline = time.monotonic() + 30
        while (0, False) not in where(sock, held)[destination] and time.monotonic() < deadline:
            time.sleep(0.05)
        placement = where(sock, held)
        assert (0, False) in placement[destination] and (0, False) not in placement[source], placement


def _release(pipes: list[str], content: bytes) -> None:
    """Write `content` into the named pipe the broker is reading (opening one nobody reads fails with ENXIO), put a
    regular file with that content in its place (later reads must not wait for a writer) and remove the other."""
    deadline = time.monotonic() + 30
    while True:
        for pipe in pipes:
            try:
                writer = os.open(pipe, os.O_WRONLY | os.O_NONBLOCK)
            except OSError as error:
                if error.errno != errno.ENXIO:
                    raise
                continue
            os.write(writer, content)
            os.close(writer)
            with open(pipe + ".tmp", "wb") as handle:
                handle.write(content)
            os.replace(pipe + ".tmp", pipe)
            for other in pipes:
                if other != pipe:
                    shutil.rmtree(os.path.dirname(other))
            return
        assert time.monotonic() < deadline, "the broker never read partition 1's partition.metadata"
        time.sleep(0.02)
