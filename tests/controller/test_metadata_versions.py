"""What a metadata.version changes in the controller's records (kfk/controller/features.py, Kafka 4.4's
MetadataVersion): the versions it writes registrations and partitions at, log dir ids from 3.7-IV2 on, Kafka's
registration checks on them, an upgrade from Kafka 4's oldest level to its newest online, and the levels SCRAM
credentials and delegation tokens need. Over a real embedded
backend in tmp_path; the record versions are read back from the log's frames."""

from __future__ import annotations

import uuid
from pathlib import Path

from kfk.common.constants import NO_NODE
from kfk.common.internal_topics import CLUSTER_METADATA_TOPIC_NAME
from kfk.errors import ErrorCode
from kfk.metadata.directories import MIGRATING, UNASSIGNED
from kfk.protocol.metadata_frame import read_frame_header
from kfk.protocol.metadata_records import RECORD_TYPES, schema_class
from kfk.protocol.messages.alter_partition_reassignments import AlterPartitionReassignmentsRequest
from kfk.protocol.messages.alter_user_scram_credentials import AlterUserScramCredentialsRequest
from kfk.protocol.messages.create_delegation_token import CreateDelegationTokenRequest
from kfk.protocol.messages.update_features import UpdateFeaturesRequest
from kfk.records import iter_batches
from kfk.security.principal import KafkaPrincipal

from tests.controller.conftest import broker_log_dir, registration, topic

FeatureLevelRecord = schema_class("FeatureLevelRecord")
OLDEST, NEWEST = 7, 33  # 3.3-IV3 and 4.4-IV2


def written_versions(log_dir: str, name: str) -> list[int]:
    """The version of every `name` record in the metadata log, in log order."""
    versions = []
    for segment in sorted((Path(log_dir) / f"{CLUSTER_METADATA_TOPIC_NAME}-0").glob("*.log")):
        for batch in iter_batches(segment.read_bytes()):
            if not batch.is_control:
                for record in batch.records():
                    record_type, version, _ = read_frame_header(record.value)
                    if RECORD_TYPES[record_type] == name:
                        versions.append(version)
    return versions


def at_level(make_cluster, level: int):
    """A KRaft controller bootstrapped at metadata.version `level`, no broker yet."""
    bootstrap = [FeatureLevelRecord(name="metadata.version", feature_level=level)]
    return make_cluster(brokers=0, broker_heartbeats=True, bootstrap_records=bootstrap)


def test_kafka_4_s_oldest_level_writes_no_directories(make_cluster) -> None:
    cluster = at_level(make_cluster, OLDEST)
    cluster.register(1)
    cluster.create(topic("old", partitions=2))
    assert cluster.image.brokers[1].log_dirs == ()
    assert {partition.directories for partition in cluster.image.topic("old").partitions.values()} == {()}
    assert written_versions(cluster.log_dir, "RegisterBrokerRecord") == [1]
    assert written_versions(cluster.log_dir, "PartitionRecord") == [0, 0]
    assert written_versions(cluster.log_dir, "BrokerRegistrationChangeRecord") == [0]  # unfenced: a fencing change


def test_the_newest_level_records_each_replicas_log_dir(make_cluster) -> None:
    cluster = at_level(make_cluster, NEWEST)
    for broker_id in (1, 2, 3):
        cluster.register(broker_id)
    assert cluster.image.brokers[2].log_dirs == (broker_log_dir(2),)
    cluster.create(topic("new", partitions=1, replication_factor=2))
    partition = cluster.image.topic("new").partitions[0]
    assert partition.directories == tuple(broker_log_dir(replica) for replica in partition.replicas)
    assert written_versions(cluster.log_dir, "RegisterBrokerRecord") == [4, 4, 4]
    assert written_versions(cluster.log_dir, "PartitionRecord") == [2]

    # A reassignment keeps the dir of the replica that stays and places the new one on its broker's only dir.
    [staying] = [replica for replica in partition.replicas if replica != partition.replicas[1]]
    newcomer = ({1, 2, 3} - set(partition.replicas)).pop()
    response = cluster.run(cluster.controller.alter_partition_reassignments(AlterPartitionReassignmentsRequest(
        topics=[AlterPartitionReassignmentsRequest.ReassignableTopic(name="new", partitions=[
            AlterPartitionReassignmentsRequest.ReassignablePartition(partition_index=0,
                                                                     replicas=[staying, newcomer])])])))
    assert response.responses[0].partitions[0].error_code == ErrorCode.NONE
    moving = cluster.image.topic("new").partitions[0]
    assert dict(zip(moving.replicas, moving.directories)) == {
        replica: broker_log_dir(replica) for replica in moving.replicas}
    assert set(written_versions(cluster.log_dir, "PartitionChangeRecord")) == {2}


def test_a_broker_with_several_dirs_or_none_gets_kafka_s_placeholders(make_cluster) -> None:
    cluster = at_level(make_cluster, NEWEST)
    request = registration(4)
    request.log_dirs = [uuid.UUID(int=4001), uuid.UUID(int=4002)]
    response = cluster.run(cluster.controller.handle_broker_registration(request))
    assert response.error_code == ErrorCode.NONE
    cluster.run(cluster.controller.unfence_broker(4, response.broker_epoch))
    cluster.create(topic("spread", partitions=1, replication_factor=1))
    assert cluster.image.topic("spread").partitions[0].directories == (UNASSIGNED,)
    assert MIGRATING == uuid.UUID(int=0) and UNASSIGNED == uuid.UUID(int=1)  # Kafka's DirectoryId values


def test_registrations_without_valid_log_dirs_are_refused_in_kafka_s_words(make_cluster) -> None:
    cluster = at_level(make_cluster, NEWEST)
    cluster.register(1)
    cases = {(): "No directories specified in request",
             (uuid.UUID(int=1),): "Reserved directory ID in request",
             (uuid.UUID(int=500), uuid.UUID(int=500)): "Duplicate directory ID in request",
             (broker_log_dir(1),): "Broker 1 is already registered with directory AAAAAAAAAAAAAAAAAAAD6Q"}
    for log_dirs, message in cases.items():
        request = registration(2)
        request.log_dirs = list(log_dirs)
        result = cluster.run(cluster.controller.handle_broker_registration(request))
        assert result.error_code == ErrorCode.INVALID_REGISTRATION, message
        assert 2 not in cluster.image.brokers
    request = registration(2)
    request.log_dirs = []
    older = at_level(make_cluster, OLDEST)  # before 3.7-IV2 no dirs are needed, and none are recorded
    assert older.run(older.controller.handle_broker_registration(request)).error_code == ErrorCode.NONE


def test_an_online_upgrade_from_the_oldest_level_to_the_newest(make_cluster) -> None:
    cluster = at_level(make_cluster, OLDEST)
    cluster.register(1)
    cluster.create(topic("before"))
    update = UpdateFeaturesRequest(feature_updates=[UpdateFeaturesRequest.FeatureUpdateKey(
        feature="metadata.version", max_version_level=NEWEST, upgrade_type=1)])
    assert cluster.run(cluster.controller.update_features(update, 1)).error_code == ErrorCode.NONE
    assert cluster.image.features["metadata.version"] == NEWEST
    cluster.register(1)  # a broker registers again (as after its restart): now with its log dirs
    assert cluster.image.brokers[1].log_dirs == (broker_log_dir(1),)
    cluster.create(topic("after"))
    assert cluster.image.topic("after").partitions[0].directories == (broker_log_dir(1),)
    assert cluster.image.topic("before").partitions[0].directories == ()  # Kafka reads these as MIGRATING
    assert written_versions(cluster.log_dir, "RegisterBrokerRecord") == [1, 4]
    assert written_versions(cluster.log_dir, "PartitionRecord") == [0, 2]

    cluster.reopen()  # the log replays to the same image, and the new controller writes at the newest level
    assert cluster.image.topic("after").partitions[0].directories == (broker_log_dir(1),)
    cluster.create(topic("later"))
    assert written_versions(cluster.log_dir, "PartitionRecord")[-1] == 2

    downgrade = UpdateFeaturesRequest(feature_updates=[UpdateFeaturesRequest.FeatureUpdateKey(
        feature="metadata.version", max_version_level=OLDEST, upgrade_type=2)])
    response = cluster.run(cluster.controller.update_features(downgrade, 1))
    assert response.error_code == ErrorCode.INVALID_UPDATE_VERSION
    assert "might delete metadata information" in response.error_message
    assert cluster.image.topic("later").partitions[0].leader != NO_NODE


def test_scram_credentials_and_tokens_need_the_levels_kafka_gives_them(make_cluster) -> None:
    """SCRAM credentials from 3.5-IV2, delegation tokens from 3.6-IV2: before them, Kafka's refusals."""
    for level, allowed in ((10, False), (11, True)):  # 3.5-IV1, 3.5-IV2
        cluster = at_level(make_cluster, level)
        response = cluster.run(cluster.controller.alter_user_scram_credentials(AlterUserScramCredentialsRequest(
            upsertions=[AlterUserScramCredentialsRequest.ScramCredentialUpsertion(
                name="alice", mechanism=1, iterations=4096, salt=b"salt", salted_password=b"x" * 32)])))
        [result] = response.results
        assert (result.error_code, result.error_message) == ((ErrorCode.NONE, None) if allowed else (
            ErrorCode.UNSUPPORTED_VERSION, "The current metadata.version does not support SCRAM"))
        assert bool(cluster.image.scram_credentials) == allowed
    for level, allowed in ((13, False), (14, True)):  # 3.6-IV1, 3.6-IV2
        bootstrap = [FeatureLevelRecord(name="metadata.version", feature_level=level)]
        cluster = make_cluster({"delegation.token.secret.key": "s"}, brokers=0, broker_heartbeats=True,
                               bootstrap_records=bootstrap)
        response = cluster.run(cluster.controller.create_delegation_token(
            KafkaPrincipal("User", "alice"), CreateDelegationTokenRequest()))
        assert response.error_code == (ErrorCode.NONE if allowed else ErrorCode.UNSUPPORTED_VERSION)
        assert bool(cluster.image.delegation_tokens) == allowed


def test_the_same_incarnation_registering_again_amends_its_registration(make_cluster) -> None:
    """Kafka's ClusterControlManager: a running broker that registers again (to add its log dirs after an upgrade
    to 3.7-IV2) keeps its broker epoch and stays unfenced; another incarnation gets a new epoch, fenced."""
    cluster = at_level(make_cluster, NEWEST)
    request = registration(1)
    first = cluster.run(cluster.controller.handle_broker_registration(request))
    cluster.run(cluster.controller.unfence_broker(1, first.broker_epoch))
    again = cluster.run(cluster.controller.handle_broker_registration(request))
    assert again.broker_epoch == first.broker_epoch
    assert not cluster.image.brokers[1].fenced
    other = registration(1)  # a new incarnation id: the broker restarted
    other.previous_broker_epoch = first.broker_epoch
    restarted = cluster.run(cluster.controller.handle_broker_registration(other))
    assert restarted.broker_epoch > first.broker_epoch and cluster.image.brokers[1].fenced
