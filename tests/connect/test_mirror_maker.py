"""MirrorMaker 2: `kfk connect-mirror-maker` replicates between two kfk brokers beside Apache Kafka's own
MirrorMaker (connect-mirror 4.3.1, under other cluster aliases on the same two brokers), and what each writes to the
target is compared: remote topics, records, topic configs, the offset-syncs, checkpoints and heartbeats in Kafka's
record formats, and the ACLs each created for its remote topics. Java's RemoteClusterUtils translates a group's
offsets from kfk's checkpoints; Java's and kfk's MirrorMaker take over the same flow from each other; kfk's
MirrorMaker replicates into Apache Kafka. One pair of brokers serves the module; they run Kafka's StandardAuthorizer
with the tests' PLAINTEXT principal as super user, so topic ACLs can be read and created while nothing is refused.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from kfk.client import (
    Admin,
    ConfigResource,
    ConfigResourceType,
    Consumer,
    NewTopic,
    OffsetAndMetadata,
    Producer,
    TopicPartition,
)
from kfk.errors import UnknownTopicOrPartitionError
from kfk.connect.mirror.records import Checkpoint, Heartbeat, OffsetSync
from kfk.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from kfk.testing.apache_kafka import MIRROR_MAKER_MAIN_CLASS, compile_java, connect_classpath, java_command, run_java
from kfk.testing.broker import start_broker
from kfk.testing.plugin import TEST_OVERRIDES
from tests.connect.workers import wait_for, write_properties

pytestmark = pytest.mark.integration

TOPICS = {"orders": 3, "payments": 1, "excluded": 1}
RECORDS_PER_PARTITION = 40
GROUP = "billing"
AUTHORIZER = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
              "super.users": "User:ANONYMOUS"}


@pytest.fixture(scope="module")
def clusters(tmp_path_factory):
    upstream = start_broker(tmp_path_factory.mktemp("mirror-upstream"), {**TEST_OVERRIDES, **AUTHORIZER})
    downstream = start_broker(tmp_path_factory.mktemp("mirror-downstream"), {**TEST_OVERRIDES, **AUTHORIZER})
    yield upstream.bootstrap_servers, downstream.bootstrap_servers
    upstream.stop()
    downstream.stop()


def mm2_properties(source_alias: str, target_alias: str, source: str, target: str) -> dict[str, str]:
    """An mm2.properties as Kafka's docs write one, with intervals short enough for a test."""
    flow = f"{source_alias}->{target_alias}"
    return {"clusters": f"{source_alias}, {target_alias}", f"{source_alias}.bootstrap.servers": source,
            f"{target_alias}.bootstrap.servers": target, f"{flow}.enabled": "true",
            f"{flow}.topics": "orders, payments", f"{target_alias}->{source_alias}.enabled": "false",
            "replication.factor": "1", "checkpoints.topic.replication.factor": "1",
            "heartbeats.topic.replication.factor": "1", "offset-syncs.topic.replication.factor": "1",
            "offset.storage.replication.factor": "1", "status.storage.replication.factor": "1",
            "config.storage.replication.factor": "1", "refresh.topics.interval.seconds": "2",
            "refresh.groups.interval.seconds": "2", "sync.topic.configs.interval.seconds": "2",
            "sync.topic.acls.interval.seconds": "2",
            "emit.checkpoints.interval.seconds": "1", "sync.group.offsets.enabled": "true",
            "sync.group.offsets.interval.seconds": "1", "emit.heartbeats.interval.seconds": "1",
            f"{target_alias}.offset.flush.interval.ms": "1000", f"{source_alias}.offset.flush.interval.ms": "1000",
            # the herders' groups notice a member gone at the broker's minimum session timeout
            f"{target_alias}.session.timeout.ms": "6000", f"{target_alias}.heartbeat.interval.ms": "1000",
            f"{source_alias}.session.timeout.ms": "6000", f"{source_alias}.heartbeat.interval.ms": "1000"}


def start_mirror_maker(directory: Path, properties: dict[str, str], java: bool) -> subprocess.Popen:
    name = "java" if java else "kfk"
    config = write_properties(directory / f"{name}-mm2.properties", properties)
    command = java_command(MIRROR_MAKER_MAIN_CLASS, [str(config)], connect_classpath()) if java else \
        [sys.executable, "-m", "kfk", "connect-mirror-maker", str(config)]
    with open(directory / f"{name}-mm2.log", "wb") as log:
        return subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)


def stop(process: subprocess.Popen) -> None:
    process.terminate()
    try:
        process.wait(60)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def read_all(bootstrap: str, topic: str) -> dict[int, list]:
    """Every record of `topic` by partition (as far as the end offsets when called); none while it does not exist."""
    with Consumer({"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest",
                   "allow.auto.create.topics": False}) as consumer:
        try:
            partitions = [TopicPartition(topic, partition) for partition in consumer.partitions_for(topic)]
        except UnknownTopicOrPartitionError:
            return {}
        consumer.assign(partitions)
        end = consumer.end_offsets(partitions)
        records: dict[int, list] = {partition.partition: [] for partition in partitions}
        deadline = time.monotonic() + 60
        while any(consumer.position(partition) < end[partition] for partition in partitions) \
                and time.monotonic() < deadline:
            for record in consumer.poll(1.0):
                records[record.partition].append(record)
        return records


def produce_input(bootstrap: str) -> None:
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(topic, partitions, 1, {"retention.ms": "86400000"} if topic == "orders" else {})
                             for topic, partitions in TOPICS.items()])
    with Producer({"bootstrap.servers": bootstrap, "linger.ms": 5}) as producer:
        for topic, partitions in TOPICS.items():
            for partition in range(partitions):
                for index in range(RECORDS_PER_PARTITION):
                    producer.send(topic, f"{topic}-{partition}-{index}".encode(),
                                  None if index % 7 == 0 else f"key-{index}".encode(), partition=partition,
                                  timestamp_ms=1_700_000_000_000 + index,
                                  headers=[("trace", f"t{index}".encode()), ("empty", None)])
        producer.flush()
    # the group has read everything: checkpoints translate its offsets through the last offset sync of each partition
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.alter_consumer_group_offsets(GROUP, {
            TopicPartition(topic, partition): OffsetAndMetadata(RECORDS_PER_PARTITION, "")
            for topic in ("orders", "payments") for partition in range(TOPICS[topic])})


def acl(resource: str, principal: str, operation: AclOperation, permission: AclPermissionType = AclPermissionType.ALLOW,
        pattern_type: PatternType = PatternType.LITERAL, host: str = "*",
        resource_type: ResourceType = ResourceType.TOPIC) -> AclBinding:
    return AclBinding(ResourcePattern(resource_type, resource, pattern_type),
                      AccessControlEntry(principal, host, operation, permission))


#: The source's ACLs before the mirror makers start: what each flow must create on the target, and what it must not
#: (ALLOW WRITE, prefixed patterns, topics outside the flow, other resource types).
SOURCE_ACLS = [acl("orders", "User:alice", AclOperation.READ), acl("orders", "User:bob", AclOperation.WRITE),
               acl("orders", "User:carol", AclOperation.ALL), acl("orders", "User:mallory", AclOperation.READ,
                                                                     AclPermissionType.DENY),
               acl("orders", "User:dave", AclOperation.DESCRIBE, host="10.0.0.7"),
               acl("orders", "User:eve", AclOperation.WRITE, AclPermissionType.DENY),
               acl("pay", "User:frank", AclOperation.READ, pattern_type=PatternType.PREFIXED),
               acl("excluded", "User:alice", AclOperation.READ), acl(GROUP, "User:alice", AclOperation.READ,
                                                                      resource_type=ResourceType.GROUP)]
#: Created once both run: the periodic sync (`sync.topic.acls.interval.seconds`) picks it up.
LATER_ACL = acl("payments", "User:grace", AclOperation.DESCRIBE_CONFIGS)
EXPECTED_REMOTE_ACLS = {acl("orders", "User:alice", AclOperation.READ), acl("orders", "User:carol", AclOperation.READ),
                        acl("orders", "User:mallory", AclOperation.READ, AclPermissionType.DENY),
                        acl("orders", "User:dave", AclOperation.DESCRIBE, host="10.0.0.7"),
                        acl("orders", "User:eve", AclOperation.WRITE, AclPermissionType.DENY), LATER_ACL}


def remote_topic_acls(bootstrap: str, alias: str) -> set[AclBinding]:
    """The topic ACLs of `alias`'s remote topics, named as their source topics."""
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        bindings = admin.describe_acls(AclBindingFilter(ResourceType.TOPIC))
    prefix = f"{alias}."
    return {AclBinding(ResourcePattern(ResourceType.TOPIC, binding.pattern.name.removeprefix(prefix),
                                       binding.pattern.pattern_type), binding.entry)
            for binding in bindings if binding.pattern.name.startswith(prefix)}


def create_acls(bootstrap: str, bindings: list[AclBinding]) -> None:
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        assert all(error is None for error in admin.create_acls(bindings).values())


def wait_until_equal(fetch, expected, what: str, timeout: float) -> None:
    """Poll `fetch()` until it returns `expected`; on timeout the assertion shows what it returned last."""
    seen = []
    try:
        wait_for(lambda: seen.append(fetch()) or seen[-1] == expected, what, timeout)
    except AssertionError:
        assert seen[-1] == expected, what


def latest_checkpoints(bootstrap: str, topic: str, count: int) -> dict | None:
    """The last Checkpoint of each (group, partition) in `topic`, once there are `count` of them."""
    latest = {}
    for record in read_all(bootstrap, topic).get(0, []):
        checkpoint = Checkpoint.deserialize(record.key, record.value)
        latest[checkpoint.consumer_group_id, checkpoint.topic_partition] = checkpoint
    return latest if len(latest) >= count else None


def landed(records: dict[int, list]) -> dict[int, list]:
    return {partition: [(record.offset, record.key, record.value, record.timestamp, record.headers)
                        for record in batch] for partition, batch in records.items()}


def offset_syncs(bootstrap: str, topic: str) -> dict[TopicPartition, list[tuple[int, int]]]:
    syncs: dict[TopicPartition, list[tuple[int, int]]] = {}
    for record in read_all(bootstrap, topic).get(0, []):
        sync = OffsetSync.deserialize(record.key, record.value)
        syncs.setdefault(sync.topic_partition, []).append((sync.upstream_offset, sync.downstream_offset))
    return syncs


def heartbeat_flows(bootstrap: str, topic: str) -> set[tuple[str, str]]:
    beats = [Heartbeat.deserialize(record.key, record.value) for record in read_all(bootstrap, topic).get(0, [])]
    assert all(beat.timestamp > 1_700_000_000_000 for beat in beats)
    return {(beat.source_cluster_alias, beat.target_cluster_alias) for beat in beats}


def topic_configs(bootstrap: str, topic: str) -> dict[str, str | None]:
    resource = ConfigResource(ConfigResourceType.TOPIC, topic)
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        return {name: entry.value for name, entry in admin.describe_configs([resource])[resource].items()
                if not entry.is_default}


def mirrored_offsets(bootstrap: str, group: str, prefix: str) -> dict[TopicPartition, int]:
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        return {TopicPartition(tp.topic[len(prefix):], tp.partition): offset.offset
                for tp, offset in admin.list_consumer_group_offsets(group).items() if tp.topic.startswith(prefix)}


TRANSLATE_OFFSETS = """
import java.time.Duration;
import java.util.Map;
import java.util.TreeMap;
import org.apache.kafka.connect.mirror.RemoteClusterUtils;

public class TranslateOffsets {
    public static void main(String[] args) throws Exception {
        Map<String, Object> properties = Map.of("bootstrap.servers", args[0]);
        TreeMap<String, Long> sorted = new TreeMap<>();
        RemoteClusterUtils.translateOffsets(properties, args[1], args[2], Duration.ofSeconds(60))
            .forEach((partition, offset) -> sorted.put(partition.toString(), offset.offset()));
        sorted.forEach((partition, offset) -> System.out.println(partition + " " + offset));
    }
}
"""


def test_kfk_and_java_mirror_makers_write_the_same(clusters, tmp_path):
    """kfk's flow A->B and Java's flow J->K mirror the same two brokers; everything either writes is compared."""
    upstream, downstream = clusters
    produce_input(upstream)
    create_acls(upstream, SOURCE_ACLS)
    kfk = start_mirror_maker(tmp_path, mm2_properties("A", "B", upstream, downstream), java=False)
    java = start_mirror_maker(tmp_path, mm2_properties("J", "K", upstream, downstream), java=True)
    try:
        # topic ACLs: Kafka's selection and ALL -> READ, for the remote topics; then one added while both run
        for alias in ("A", "J"):
            wait_for(lambda: remote_topic_acls(downstream, alias) >= EXPECTED_REMOTE_ACLS - {LATER_ACL},
                     f"{alias}'s first ACL sync", 120)
        create_acls(upstream, [LATER_ACL])
        for alias in ("A", "J"):
            wait_until_equal(lambda: remote_topic_acls(downstream, alias), EXPECTED_REMOTE_ACLS,
                             f"{alias}'s topic ACLs", 60)
        for topic, partitions in TOPICS.items():
            if topic == "excluded":
                continue
            for alias in ("A", "J"):
                wait_for(lambda: sum(map(len, read_all(downstream, f"{alias}.{topic}").values()))
                         == partitions * RECORDS_PER_PARTITION, f"{alias}.{topic} replicated", 120)
            kfk_copy, java_copy = landed(read_all(downstream, f"A.{topic}")), landed(read_all(downstream, f"J.{topic}"))
            assert kfk_copy == java_copy == landed(read_all(upstream, topic))
            assert topic_configs(downstream, f"A.{topic}") == topic_configs(downstream, f"J.{topic}")
        assert topic_configs(downstream, "A.orders")["retention.ms"] == "86400000"
        with Admin({"bootstrap.servers": downstream}) as admin:
            topics = set(admin.list_topics())
        assert {"A.orders", "A.payments", "A.heartbeats", "heartbeats", "A.checkpoints.internal", "J.orders",
                "J.checkpoints.internal"} <= topics
        assert not {"A.excluded", "J.excluded"} & topics
        # checkpoints: the same translation of the group's offsets, in the same record format
        # (each partition's last offset sync comes with the flush after its last record: until then the group's
        # offset translates to one past the first sync, and the checkpoint is rewritten once it arrives)
        expected = {(GROUP, topic, partition): (RECORDS_PER_PARTITION, RECORDS_PER_PARTITION, "")
                    for topic in ("orders", "payments") for partition in range(TOPICS[topic])}
        for alias in ("A", "J"):
            wait_until_equal(lambda: {(group, tp.topic[2:], tp.partition): (
                checkpoint.upstream_offset, checkpoint.downstream_offset, checkpoint.metadata)
                for (group, tp), checkpoint in
                (latest_checkpoints(downstream, f"{alias}.checkpoints.internal", 4) or {}).items()},
                expected, f"{alias}'s checkpoints", 120)
        # sync.group.offsets.enabled: both commit the translated offsets to the group on the target
        for alias in ("A", "J"):
            wait_for(lambda: mirrored_offsets(downstream, GROUP, f"{alias}.") == {
                TopicPartition(topic, partition): RECORDS_PER_PARTITION
                for topic in ("orders", "payments") for partition in range(TOPICS[topic])},
                f"{alias}'s group offsets synced", 60)
        # offset syncs (on the source cluster): each partition's first and last sync are the same
        syncs = {alias: offset_syncs(upstream, f"mm2-offset-syncs.{target}.internal")
                 for alias, target in (("A", "B"), ("J", "K"))}
        for tp in [TopicPartition(topic, partition) for topic in ("orders", "payments")
                   for partition in range(TOPICS[topic])]:
            assert syncs["A"][tp][0] == syncs["J"][tp][0] == (0, 0)
            assert syncs["A"][tp][-1] == syncs["J"][tp][-1] == (RECORDS_PER_PARTITION - 1, RECORDS_PER_PARTITION - 1)
        # heartbeats: each flow's own into the target, and the reverse flows' replicated from the source
        assert wait_for(lambda: heartbeat_flows(downstream, "heartbeats") >= {("A", "B"), ("J", "K")},
                        "heartbeats on the target", 60)
        for alias in ("A", "J"):
            wait_for(lambda: heartbeat_flows(downstream, f"{alias}.heartbeats") == {("B", "A"), ("K", "J")},
                     f"{alias}.heartbeats replicated", 60)
        # the source offsets each stored: the same keys (Java's JSON bytes) and values
        stored = {alias: {record.key.replace(f'"cluster":"{alias}"'.encode(), b'"cluster":"X"'): record.value
                          for records in read_all(downstream, f"mm2-offsets.{alias}.internal").values()
                          for record in records if b"MirrorSourceConnector" in record.key and b"heartbeats" not in
                          record.key}
                  for alias in ("A", "J")}
        assert stored["A"] == stored["J"] and len(stored["A"]) == 4
        # Java's RemoteClusterUtils reads kfk's checkpoints
        classes = compile_java([write_java(tmp_path)], connect_classpath())
        translated = {}
        for alias in ("A", "J"):
            result = run_java("TranslateOffsets", [downstream, alias, GROUP], connect_classpath(),
                              extra_classpath=[classes])
            assert result.returncode == 0, result.stderr
            translated[alias] = result.stdout.replace(f"{alias}.", "")
        assert translated["A"] == translated["J"] == "".join(
            f"{topic}-{partition} {RECORDS_PER_PARTITION}\n" for topic in ("orders", "payments")
            for partition in range(TOPICS[topic]))
    finally:
        stop(kfk)
        stop(java)


def write_java(directory: Path) -> Path:
    source = directory / "TranslateOffsets.java"
    source.write_text(TRANSLATE_OFFSETS)
    return source


def test_kfk_mirror_maker_replicates_into_apache_kafka(clusters, apache_kafka, tmp_path):
    """Flow kfk -> Apache Kafka: the herder's group, topics and synced offsets live on Apache Kafka's broker."""
    upstream, _ = clusters
    target = apache_kafka.bootstrap_server
    with Admin({"bootstrap.servers": upstream}) as admin:
        admin.create_topics([NewTopic("clicks", 2, 1, {"cleanup.policy": "compact"})])
    with Producer({"bootstrap.servers": upstream}) as producer:
        for index in range(50):
            producer.send("clicks", f"click-{index}".encode(), f"user-{index % 5}".encode(), partition=index % 2)
        producer.flush()
    with Admin({"bootstrap.servers": upstream}) as admin:
        admin.alter_consumer_group_offsets("click-readers", {TopicPartition("clicks", partition): OffsetAndMetadata(25)
                                                             for partition in range(2)})
    properties = {**mm2_properties("kfkup", "apache", upstream, target), "kfkup->apache.topics": "clicks",
                  "kfkup->apache.groups": "click-readers"}
    mirror_maker = start_mirror_maker(tmp_path, properties, java=False)
    try:
        wait_for(lambda: sum(map(len, read_all(target, "kfkup.clicks").values())) == 50, "kfkup.clicks replicated",
                 120)
        assert landed(read_all(target, "kfkup.clicks")) == landed(read_all(upstream, "clicks"))
        assert topic_configs(target, "kfkup.clicks")["cleanup.policy"] == "compact"
        wait_for(lambda: mirrored_offsets(target, "click-readers", "kfkup.") == {
            TopicPartition("clicks", partition): 25 for partition in range(2)}, "the group's offsets synced", 120)
        assert heartbeat_flows(target, "heartbeats") >= {("kfkup", "apache")}
    finally:
        stop(mirror_maker)


def test_java_and_kfk_mirror_makers_take_over_from_each_other(clusters, tmp_path):
    """The same mm2.properties run by kfk, then Java, then kfk again: each resumes where the other stopped (the same
    herder group, config, offsets and status topics), so the remote topic holds every record exactly once."""
    upstream, downstream = clusters
    with Admin({"bootstrap.servers": upstream}) as admin:
        admin.create_topics([NewTopic("ledger", 2, 1)])
    properties = {**mm2_properties("L", "M", upstream, downstream), "L->M.topics": "ledger"}
    sent: dict[int, list[bytes]] = {0: [], 1: []}

    def produce(count: int) -> None:
        with Producer({"bootstrap.servers": upstream}) as producer:
            for _ in range(count):
                for partition in (0, 1):
                    value = f"entry-{partition}-{len(sent[partition])}".encode()
                    producer.send("ledger", value, partition=partition)
                    sent[partition].append(value)
            producer.flush()

    for run, java in enumerate((False, True, False)):
        produce(15)
        directory = tmp_path / f"run-{run}"
        directory.mkdir()
        mirror_maker = start_mirror_maker(directory, properties, java=java)
        try:
            wait_until_equal(lambda: {partition: [record.value for record in records] for partition, records in
                                      read_all(downstream, "L.ledger").items()}, sent,
                             f"L.ledger mirrored by {'Java' if java else 'kfk'}", 120)
        finally:
            stop(mirror_maker)
