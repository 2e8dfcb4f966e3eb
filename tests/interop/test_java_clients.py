"""Kafka's own Java clients (kafka-clients 4.0.2: producer, consumer, admin) against kfk.

Each Java program (tests/interop/java) runs a whole script of checks in one JVM and prints JSON lines. The data
the Java producer writes is read back with confluent-kafka and with Kafka's DumpLogSegments over kfk's segment
files; the consumer and admin programs run against Apache Kafka too, and must print the same lines there.
"""

from __future__ import annotations

import re
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kfk.testing.apache_kafka import ApacheKafka
from kfk.testing.broker import BrokerProcess
from tests.interop.jvm import java_programs, kafka_tool, kfk_server, run_program, unique_name  # noqa: F401

COMPRESSION_TYPES = ["none", "gzip", "snappy", "lz4", "zstd"]
RECORDS = 30


def create_topics(bootstrap: str, names: list[str], partitions: int) -> None:
    """The programs write fixed timestamps from 1970: retention.ms=-1, or a retention check (every 5 minutes, on
    either broker) could delete them mid-test."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = [NewTopic(name, partitions, 1, config={"retention.ms": "-1"}) for name in names]
    for future in admin.create_topics(topics).values():
        future.result(30)


def read_partition(bootstrap: str, topic: str, partition: int, count: int) -> list:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": unique_name("reader"),
                        "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, partition, 0)])
    messages = []
    try:
        while len(messages) < count:
            message = consumer.poll(30)
            assert message is not None, f"{topic}-{partition}: only {len(messages)} of {count} records"
            assert message.error() is None, message.error()
            messages.append(message)
    finally:
        consumer.close()
    return messages


BATCH = re.compile(r"baseOffset: (\d+) lastOffset: (\d+) count: (\d+) baseSequence: (-?\d+) lastSequence: (-?\d+) "
                   r"producerId: (-?\d+) producerEpoch: (-?\d+) .* compresscodec: (\w+) crc: \d+ isvalid: (\w+)")


def test_java_producer_every_compression_and_acks(kfk_server: BrokerProcess, java_programs: Path) -> None:
    prefix = unique_name("java-produce")
    suffixes = [*COMPRESSION_TYPES, "acks0", "acks1"]
    create_topics(kfk_server.bootstrap_servers, [f"{prefix}-{suffix}" for suffix in suffixes], 1)

    lines = run_program(java_programs, "JavaProducer", [kfk_server.bootstrap_servers, prefix, str(RECORDS)])

    assert sorted(lines) == sorted(f"{prefix}-{suffix}" for suffix in suffixes)
    segments = {suffix: kfk_server.log_dir / f"{prefix}-{suffix}-0" / "00000000000000000000.log"
                for suffix in suffixes}
    # Kafka's own DumpLogSegments reads what kfk stored (one JVM for every segment; it prints "Dumping <file>"
    # before each).
    dump = kafka_tool("dump-log", ["--files", ",".join(str(path) for path in segments.values())]).stdout
    dumps = {Path(part.split("\n", 1)[0].strip()): part for part in dump.split("Dumping ")[1:]}
    for suffix in suffixes:
        topic = f"{prefix}-{suffix}"
        # acks=0 asks for no answer: the Java producer reports offset -1 for each record (Kafka's contract).
        expected_offsets = [-1] * RECORDS if suffix == "acks0" else list(range(RECORDS))
        assert lines[topic]["offsets"] == expected_offsets, suffix

        messages = read_partition(kfk_server.bootstrap_servers, topic, 0, RECORDS)
        assert [(m.offset(), m.key(), m.value(), m.headers(), m.timestamp()[1]) for m in messages] == [
            (i, f"k{i}".encode(), f"{suffix}-{i}".encode(), [("seq", str(i).encode())], 1_000_000 + i)
            for i in range(RECORDS)]

        # The producer's codec is kept, CRCs are valid, and the idempotent producer's id and gapless sequence
        # numbers are on every batch (none without idempotence).
        batches = [match.groups() for match in BATCH.finditer(dumps[segments[suffix]])]
        assert sum(int(batch[2]) for batch in batches) == RECORDS, dump
        for base_offset, last_offset, count, base_sequence, last_sequence, producer_id, epoch, codec, valid \
                in batches:
            assert valid == "true"
            assert codec == (suffix if suffix in COMPRESSION_TYPES else "none")
            if suffix in COMPRESSION_TYPES:
                assert int(producer_id) >= 0 and int(epoch) >= 0
                assert int(base_sequence) == int(base_offset)
                assert int(last_sequence) == int(last_offset)
            else:
                assert (producer_id, base_sequence) == ("-1", "-1")


def fill_consumer_topic(bootstrap: str, topic: str) -> None:
    """4 partitions; in each, record i is "p<partition>-<i>" at timestamp 2_000_000 + 1000 * i (JavaConsumer's
    expectations)."""
    create_topics(bootstrap, [topic], 4)
    producer = Producer({"bootstrap.servers": bootstrap})
    for partition in range(4):
        for i in range(10):
            producer.produce(topic, key=f"k{i}", value=f"p{partition}-{i}", partition=partition,
                             timestamp=2_000_000 + 1000 * i)
    assert producer.flush(30) == 0


def test_java_consumer_groups_seek_and_offsets_for_times(kfk_server: BrokerProcess, apache_kafka: ApacheKafka,
                                                         java_programs: Path) -> None:
    outputs = {}
    for name, bootstrap in (("kfk", kfk_server.bootstrap_servers), ("apache", apache_kafka.bootstrap_server)):
        topic = unique_name("java-consume")
        fill_consumer_topic(bootstrap, topic)
        outputs[name] = run_program(java_programs, "JavaConsumer", [bootstrap, topic, topic, "10"])
        outputs[name]["committed"].pop("group")
    kfk = outputs["kfk"]

    def without_empty_assignments(output: dict) -> dict:
        """Whether a member's listener hears the empty assignment of a cooperative round depends on timing (its
        SyncGroup may come after the next round began: Apache Kafka's b once heard [] before [2, 3], under CI's
        load), so the two brokers are compared without those; kfk's own lists are checked whole below."""
        return {check: {key: [partitions for partitions in value if partitions] if key.endswith("_assigned")
                        else value for key, value in result.items()} if check.startswith("group-") else result
                for check, result in output.items()}

    assert without_empty_assignments(kfk) == without_empty_assignments(outputs["apache"])

    # Range is eager: a gives up everything at each rebalance. The member ids start with the client ids, so a
    # sorts first and gets the first half.
    assert kfk["group-range"] == {
        "check": "group-range", "alone": [0, 1, 2, 3], "a": [0, 1], "b": [2, 3],
        "a_assigned": [[0, 1, 2, 3], [0, 1], [0, 1, 2, 3]], "a_revoked": [[0, 1, 2, 3], [0, 1]],
        "b_assigned": [[2, 3]], "b_revoked": [[2, 3]], "generation": 2, "distinct_values": 40,
        "after_leave": [0, 1, 2, 3]}
    # Cooperative-sticky: a keeps 0 and 1 throughout and revokes only what moves to b, which takes a second
    # rebalance (generation 3); the listener also hears the empty assignments of the rebalances in between.
    assert kfk["group-cooperative-sticky"] == {
        "check": "group-cooperative-sticky", "alone": [0, 1, 2, 3], "a": [0, 1], "b": [2, 3],
        "a_assigned": [[0, 1, 2, 3], [], [], [2, 3]], "a_revoked": [[2, 3]],
        "b_assigned": [[2, 3]], "b_revoked": [[2, 3]], "generation": 3, "distinct_values": 40,
        "after_leave": [0, 1, 2, 3]}
    assert kfk["committed"]["offsets"] == {str(partition): 10 for partition in range(4)}
    assert kfk["seek"] == {"check": "seek", "offset": 5, "value": "p1-5", "timestamp": 2_005_000,
                           "beginning": 0, "end": 10}
    assert kfk["offsets_for_times"] == {
        "check": "offsets_for_times",
        "found": {"0": [1, 2_001_000], "1": [2, 2_002_000], "2": [3, 2_003_000], "3": None},
        "beginning": {str(partition): 0 for partition in range(4)},
        "end": {str(partition): 10 for partition in range(4)}}


def test_java_admin_client(kfk_server: BrokerProcess, apache_kafka: ApacheKafka, java_programs: Path) -> None:
    """The admin script's answers from kfk, written out here, and the same answers from Apache Kafka."""
    prefix = unique_name("java-admin")
    kfk = run_program(java_programs, "JavaAdmin", [kfk_server.bootstrap_servers, prefix])
    apache = run_program(java_programs, "JavaAdmin", [apache_kafka.bootstrap_server, prefix])
    for outputs in (kfk, apache):
        for line in outputs.values():
            line.pop("check")
    assert kfk == apache

    def topic_config(value: str, source: str, read_only: bool = False) -> list:
        return [value, source, read_only, False]

    self_partition = {"leader": "self", "replicas": ["self"], "isr": ["self"]}
    assert kfk == {
        "describe_cluster": {"nodes": 1},
        "create_topics": {"ok": True, "created": [f"{prefix}-a", f"{prefix}-b"]},
        "create_existing_topic": {"error": "TopicExistsException"},
        "create_bad_replication_factor": {"error": "InvalidReplicationFactorException"},
        "list_topics": {"ok": True, "names": [f"{prefix}-a", f"{prefix}-b"]},
        "describe_topic": {"ok": True, "has_topic_id": True, "internal": False,
                           "partitions": [dict(self_partition, partition=p) for p in range(3)]},
        "describe_unknown_topic": {"error": "UnknownTopicOrPartitionException"},
        "describe_topic_configs": {
            "ok": True, "cleanup.policy": topic_config("compact", "DYNAMIC_TOPIC_CONFIG"),
            "max.message.bytes": topic_config("1048588", "DEFAULT_CONFIG"),
            "retention.ms": topic_config("123456", "DYNAMIC_TOPIC_CONFIG"),
            "segment.bytes": topic_config("1073741824", "DEFAULT_CONFIG")},
        "incremental_alter_topic_configs": {
            "ok": True, "cleanup.policy": topic_config("delete", "DEFAULT_CONFIG"),
            "max.message.bytes": topic_config("200000", "DYNAMIC_TOPIC_CONFIG"),
            "retention.ms": topic_config("654321", "DYNAMIC_TOPIC_CONFIG"),
            "segment.bytes": topic_config("1073741824", "DEFAULT_CONFIG")},
        "alter_config_validate_only": {"ok": True, "retention.ms": topic_config("654321", "DYNAMIC_TOPIC_CONFIG")},
        "alter_config_bad_value": {"error": "InvalidConfigurationException"},
        "alter_config_unknown_key": {"error": "InvalidConfigurationException"},
        "describe_broker_configs": {
            "ok": True, "log.retention.hours": topic_config("168", "DEFAULT_CONFIG", read_only=True),
            "message.max.bytes": topic_config("1048588", "DEFAULT_CONFIG"),
            "num.io.threads": topic_config("8", "DEFAULT_CONFIG")},
        "create_partitions": {"ok": True, "count": 5},
        "create_partitions_decrease": {"error": "InvalidPartitionsException"},
        "alter_group_offsets": {"ok": True, "0": [0, "zero"], "1": [0, ""]},
        "list_groups": {"ok": True, "simple": True, "state": "Empty", "type": "Classic"},
        "describe_group": {"ok": True, "assignor": "", "coordinator": "self", "members": 0, "state": "EMPTY",
                           "type": "CLASSIC"},
        "delete_group_offset": {"ok": True, "0": [0, "zero"]},
        "delete_group": {"ok": True, "deleted": f"{prefix}-group"},
        # Kafka 4's group coordinator forgets a deleted group: describing it is GROUP_ID_NOT_FOUND, not Dead.
        "describe_deleted_group": {"error": "GroupIdNotFoundException"},
        "delete_unknown_group": {"error": "GroupIdNotFoundException"},
        "alter_reassignment_same_replicas": {"ok": True, "done": True},
        "list_reassignments": {"ok": True, "ongoing": 0},
        "alter_reassignment_unknown_broker": {"error": "InvalidReplicaAssignmentException"},
        "cancel_no_reassignment": {"error": "NoReassignmentInProgressException"},
        "describe_log_dirs": {"ok": True, "dirs": 1, "error": "null", "has_space": True,
                              "partitions": [0, 1, 2, 3, 4], "sizes_known": True},
        # On one broker the preferred leader already leads: Kafka answers ELECTION_NOT_NEEDED per partition, and
        # the same for an unclean election of a partition whose leader is alive.
        "elect_preferred_leader": {"ok": True, "0": "ElectionNotNeededException"},
        "elect_unclean_leader": {"ok": True, "1": "ElectionNotNeededException"},
        "elect_unknown_partition": {"ok": True, "42": "UnknownTopicOrPartitionException"},
        "delete_topics": {"ok": True, "left": [f"{prefix}-a"]},
        "delete_unknown_topic": {"error": "UnknownTopicOrPartitionException"},
    }
