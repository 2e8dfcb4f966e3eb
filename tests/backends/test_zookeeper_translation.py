"""Records <-> Kafka's znodes without a server: the controller's records become a multi-op; applying that multi-op
to an in-memory tree and reading the tree back yields records that rebuild the same image."""

from __future__ import annotations

import json
import uuid

import pytest

from kfk.backends.zookeeper import znodes
from kfk.backends.zookeeper.translation import Operation, ZooKeeperSnapshot, operations_for, records_for
from kfk.common.config_types import ConfigResourceType
from kfk.errors import CorruptRecordError
from kfk.metadata.image import Endpoint, MetadataImage
from kfk.protocol.metadata_records import schema_class

TopicRecord = schema_class("TopicRecord")
PartitionRecord = schema_class("PartitionRecord")
PartitionChangeRecord = schema_class("PartitionChangeRecord")
ConfigRecord = schema_class("ConfigRecord")
RemoveTopicRecord = schema_class("RemoveTopicRecord")
ProducerIdsRecord = schema_class("ProducerIdsRecord")


class Tree:
    """ZooKeeper's data model, enough for multi-ops: data and version per path, all-or-nothing commits."""

    def __init__(self) -> None:
        self.nodes: dict[str, tuple[bytes, int]] = {znodes.CONTROLLER_EPOCH_PATH: (b"3", 7)}
        self.sequence = 0

    def commit(self, operations: list[Operation]) -> None:
        nodes = dict(self.nodes)
        for operation in operations:
            current = nodes.get(operation.path)
            if operation.kind == "check":
                assert current is not None and current[1] == operation.version, operation
            elif operation.kind == "create":
                path = operation.path
                if operation.sequential:
                    self.sequence += 1
                    path = f"{path}{self.sequence:010d}"
                assert path not in nodes, path
                nodes[path] = (operation.data, 0)
            elif operation.kind == "set":
                assert current is not None and operation.version in (-1, current[1]), operation
                nodes[operation.path] = (operation.data, current[1] + 1)
            else:
                assert current is not None and not any(p.startswith(operation.path + "/") for p in nodes), operation
                del nodes[operation.path]
        self.nodes = nodes

    def snapshot(self) -> ZooKeeperSnapshot:
        snapshot = ZooKeeperSnapshot()
        for path, (data, version) in self.nodes.items():
            parts = path.split("/")
            if path.startswith(znodes.TOPICS_PATH + "/") and len(parts) == 4:
                snapshot.topics[parts[3]] = znodes.decode_topic(parts[3], data)
            elif path.endswith("/state"):
                snapshot.partition_states[(parts[3], int(parts[5]))] = znodes.decode_partition_state(path, data,
                                                                                                      version)
            elif path.startswith(znodes.CONFIG_TOPICS_PATH + "/"):
                snapshot.configs[(ConfigResourceType.TOPIC, parts[3])] = znodes.decode_config(path, data)
            elif path == znodes.PRODUCER_ID_BLOCK_PATH:
                snapshot.producer_id_block_end = znodes.decode_producer_id_block_end(data)
        return snapshot


def round_trip(tree: Tree, image: MetadataImage, records) -> MetadataImage:
    after = image.apply(records, image.offset + 1)
    tree.commit(operations_for(image, after, records, 3, 7, lambda path: path in tree.nodes))
    read = image.apply(records_for(image, tree.snapshot()), image.offset + 1)
    assert read.topics_by_name == after.topics_by_name
    assert {k: v for k, v in read.configs.items() if v} == {k: v for k, v in after.configs.items() if v}
    assert read.next_producer_id == after.next_producer_id
    return read


def test_topics_partitions_configs_and_producer_ids_survive_the_round_trip() -> None:
    tree = Tree()
    topic_id = uuid.uuid4()
    image = round_trip(tree, MetadataImage(), [
        ConfigRecord(resource_type=ConfigResourceType.TOPIC, resource_name="t", name="cleanup.policy",
                     value="compact"),
        TopicRecord(name="t", topic_id=topic_id),
        PartitionRecord(partition_id=0, topic_id=topic_id, replicas=[1, 2], isr=[1, 2], leader=1, leader_epoch=0,
                        partition_epoch=0),
        PartitionRecord(partition_id=1, topic_id=topic_id, replicas=[2, 1], isr=[2, 1], leader=2, leader_epoch=0,
                        partition_epoch=0)])
    assert json.loads(tree.nodes["/brokers/topics/t"][0])["partitions"] == {"0": [1, 2], "1": [2, 1]}
    image = round_trip(tree, image, [PartitionChangeRecord(partition_id=0, topic_id=topic_id, leader=2, isr=[2])])
    assert tree.nodes["/brokers/topics/t/partitions/0/state"][1] == 1 == image.partition("t", 0).partition_epoch
    # A reassignment step changes only the assignment: the state znode is rewritten all the same, so that its
    # zkVersion keeps following the partition epoch.
    image = round_trip(tree, image, [PartitionChangeRecord(partition_id=1, topic_id=topic_id, replicas=[2, 3, 1],
                                                           adding_replicas=[3], removing_replicas=[1])])
    assert json.loads(tree.nodes["/brokers/topics/t"][0])["adding_replicas"] == {"1": [3]}
    assert tree.nodes["/brokers/topics/t/partitions/1/state"][1] == 1
    image = round_trip(tree, image, [PartitionRecord(partition_id=2, topic_id=topic_id, replicas=[1], isr=[1],
                                                     leader=1, leader_epoch=0, partition_epoch=0)])  # CreatePartitions
    assert "/brokers/topics/t/partitions/2/state" in tree.nodes
    image = round_trip(tree, image, [ProducerIdsRecord(broker_id=2, broker_epoch=5, next_producer_id=1000)])
    assert json.loads(tree.nodes[znodes.PRODUCER_ID_BLOCK_PATH][0]) == {"version": 1, "broker": 2,
                                                                         "block_start": "0", "block_end": "999"}
    image = round_trip(tree, image, [RemoveTopicRecord(topic_id=topic_id)])
    assert not any(path.startswith("/brokers/topics/t") or path == "/config/topics/t" for path in tree.nodes)
    assert image.topic("t") is None


def test_a_write_from_a_stale_partition_state_fails_whole() -> None:
    tree = Tree()
    topic_id = uuid.uuid4()
    image = round_trip(tree, MetadataImage(), [
        TopicRecord(name="t", topic_id=topic_id),
        PartitionRecord(partition_id=0, topic_id=topic_id, replicas=[1, 2], isr=[1, 2], leader=1, leader_epoch=0,
                        partition_epoch=0)])
    path = "/brokers/topics/t/partitions/0/state"
    tree.nodes[path] = (tree.nodes[path][0], 1)  # a leader changed the ISR meanwhile
    records = [PartitionChangeRecord(partition_id=0, topic_id=topic_id, leader=2)]
    operations = operations_for(image, image.apply(records, 5), records, 3, 7, lambda p: p in tree.nodes)
    assert operations[0] == Operation("check", znodes.CONTROLLER_EPOCH_PATH, version=7)
    before = dict(tree.nodes)
    with pytest.raises(AssertionError):
        tree.commit(operations)
    assert tree.nodes == before


def test_brokers_appear_unfenced_and_disappear_fenced() -> None:
    endpoint = Endpoint("PLAINTEXT", "127.0.0.1", 9092)
    broker = znodes.decode_broker(1, znodes.encode_broker([endpoint], "r1", 0), broker_epoch=42)
    snapshot = ZooKeeperSnapshot(brokers={1: broker})
    image = MetadataImage().apply(records_for(MetadataImage(), snapshot), 1)
    assert image.brokers[1].endpoints == (endpoint,) and not image.brokers[1].fenced
    assert image.brokers[1].broker_epoch == 42 and image.brokers[1].rack == "r1"
    assert records_for(image, snapshot) == []
    gone = image.apply(records_for(image, ZooKeeperSnapshot()), 2)
    assert gone.brokers[1].fenced


def test_kafkas_own_znodes_decode() -> None:
    # As a Kafka 3.x broker writes them.
    kafka_broker = (b'{"features":{},"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},'
                    b'"endpoints":["PLAINTEXT://kafka-1:9092"],"jmx_port":-1,"port":9092,"host":"kafka-1",'
                    b'"version":5,"timestamp":"1700000000000"}')
    assert znodes.decode_broker(1, kafka_broker).endpoints == (Endpoint("PLAINTEXT", "kafka-1", 9092, 0),)
    topic = znodes.decode_topic("t", b'{"partitions":{"0":[1,2]},"topic_id":"AAAAAAAAAAAAAAAAAAAAAQ",'
                                     b'"adding_replicas":{},"removing_replicas":{},"version":3}')
    assert topic.topic_id == uuid.UUID(int=1) and topic.partitions == {0: (1, 2)}
    state = znodes.decode_partition_state("s", b'{"controller_epoch":2,"leader":1,"version":1,'
                                               b'"leader_epoch":4,"isr":[1,2]}', 9)
    assert (state.leader, state.leader_epoch, state.isr, state.partition_epoch) == (1, 4, (1, 2), 9)
    with pytest.raises(CorruptRecordError):
        znodes.decode_partition_state("s", b'{"leader":1}', 0)
    with pytest.raises(CorruptRecordError):
        znodes.decode_topic("t", b"not json")


def test_scram_credentials_in_config_users() -> None:
    """A credential written by kfk is Kafka's /config/users/<user> entry (a change notification beside it), and one
    written there by Kafka's own tools becomes a record."""
    from kfk.security.sasl.scram import ScramMechanism, credential_from_password, format_credential

    UserScramCredentialRecord = schema_class("UserScramCredentialRecord")
    RemoveUserScramCredentialRecord = schema_class("RemoveUserScramCredentialRecord")
    credential = credential_from_password(ScramMechanism.SCRAM_SHA_256, "alice-secret", 4096, salt=b"0123")
    records = [UserScramCredentialRecord(name="CN=alice", mechanism=1, salt=credential.salt,
                                         stored_key=credential.stored_key, server_key=credential.server_key,
                                         iterations=4096)]
    tree = Tree()
    after = MetadataImage().apply(records, 0)
    tree.commit(operations_for(MetadataImage(), after, records, 3, 7, lambda path: path in tree.nodes))
    assert json.loads(tree.nodes["/config/users/CN%3Dalice"][0]) == {
        "version": 1, "config": {"SCRAM-SHA-256": format_credential(credential)}}
    assert format_credential(credential).startswith("salt=MDEyMw==,stored_key=")
    changes = [json.loads(data) for path, (data, _) in tree.nodes.items() if path.startswith("/config/changes/")]
    assert changes == [{"version": 2, "entity_path": "users/CN%3Dalice"}]
    snapshot = ZooKeeperSnapshot(user_configs={
        "CN=alice": znodes.decode_config("/config/users/CN%3Dalice", tree.nodes["/config/users/CN%3Dalice"][0]),
        "bob": {"SCRAM-SHA-512": format_credential(credential), "producer_byte_rate": "1024"}})
    read = records_for(after, snapshot)
    assert [(r.NAME, r.name, r.mechanism) for r in read] == [("UserScramCredentialRecord", "bob", 2)]
    removal = [RemoveUserScramCredentialRecord(name="CN=alice", mechanism=1)]
    tree.commit(operations_for(after, after.apply(removal, 1), removal, 3, 7, lambda path: path in tree.nodes))
    assert json.loads(tree.nodes["/config/users/CN%3Dalice"][0]) == {"version": 1, "config": {}}
    assert [(r.NAME, r.name) for r in records_for(after, ZooKeeperSnapshot())] \
        == [("RemoveUserScramCredentialRecord", "CN=alice")]
