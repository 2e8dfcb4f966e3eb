"""Eligible leader replicas (KIP-966, eligible.leader.replicas.version 1 at metadata.version 4.0-IV1 or later): the
ISR may empty, the replicas it loses below min.insync.replicas stay eligible to lead, a live one leads when no ISR
member is, an unclean shutdown makes a replica ineligible, an ISR back at min.insync.replicas clears the ELR, and the
last known ELR holds the last leader while there is none (Kafka 4.4's default). Pure functions of partition_change,
then the controller with the feature on and off over a real embedded backend."""

from __future__ import annotations

import uuid

from kfk.common.config_types import ConfigResourceType
from kfk.controller import partition_change
from kfk.controller.config_control import OpType
from kfk.errors import ErrorCode
from kfk.metadata.image import NO_LEADER, PartitionRegistration
from kfk.protocol.messages.update_features import UpdateFeaturesRequest
from kfk.protocol.metadata_records import schema_class

from tests.controller.conftest import topic
from tests.controller.test_configs import incremental

FeatureLevelRecord = schema_class("FeatureLevelRecord")
BROKER, TOPIC = ConfigResourceType.BROKER, ConfigResourceType.TOPIC

MIN_ISR = 2


def partition(isr, leader, elr=(), last_known_elr=(), replicas=(1, 2, 3)) -> PartitionRegistration:
    return PartitionRegistration(replicas=tuple(replicas), isr=tuple(isr), leader=leader, leader_epoch=5,
                                 partition_epoch=9, elr=tuple(elr), last_known_elr=tuple(last_known_elr))


def after(registration: PartitionRegistration, change) -> PartitionRegistration:
    record = change.record(uuid.UUID(int=1), 0)
    return registration.merge(record)


def test_replicas_the_isr_loses_below_min_isr_stay_eligible_and_one_leads_when_no_isr_member_is_live() -> None:
    full = partition(isr=(1, 2, 3), leader=1)
    # Broker 3 dies: the ISR keeps min.insync.replicas, nobody is eligible beyond it.
    assert partition_change.elect_after_broker_changes(full, {1, 2}, False, min_isr=MIN_ISR) == \
        partition_change.PartitionChange(isr=(1, 2))
    # Brokers 1 and 3 die: the ISR is below min ISR, so 1 and 3 join the ELR; 2 leads.
    one_left = after(full, partition_change.elect_after_broker_changes(full, {2}, False, min_isr=MIN_ISR))
    assert (one_left.leader, one_left.isr, one_left.elr, one_left.leader_epoch) == (2, (2,), (1, 3), 6)
    # Broker 2 dies too: the ISR empties (no longer kept at its last member), every replica is eligible, and the
    # last leader is the last known ELR.
    empty = after(one_left, partition_change.elect_after_broker_changes(one_left, set(), False, min_isr=MIN_ISR))
    assert (empty.leader, empty.isr, empty.elr, empty.last_known_elr) == (NO_LEADER, (), (1, 2, 3), (2,))
    # Broker 3 returns first: as an eligible leader replica it leads alone, and leaves the ELR.
    back = after(empty, partition_change.elect_after_broker_changes(empty, {3}, False, min_isr=MIN_ISR))
    assert (back.leader, back.isr, back.elr, back.last_known_elr) == (3, (3,), (1, 2), ())
    # Without ELR the same loss keeps the last ISR member and elects nobody else.
    assert partition_change.elect_after_broker_changes(one_left, set(), False) == \
        partition_change.PartitionChange(leader=NO_LEADER)


def test_an_isr_back_at_min_isr_clears_the_elr() -> None:
    shrunk = partition(isr=(2,), leader=2, elr=(1, 3))
    grown = partition_change.with_elr(shrunk, partition_change.PartitionChange(isr=(2, 3)), MIN_ISR)
    assert (grown.isr, grown.elr, grown.last_known_elr) == ((2, 3), (), None)


def test_an_unclean_shutdown_makes_a_replica_ineligible() -> None:
    empty = partition(isr=(), leader=NO_LEADER, elr=(1, 2), last_known_elr=(1,))
    change = partition_change.with_elr(empty, None, MIN_ISR, unclean_shutdown={2})
    assert (change.elr, change.last_known_elr) == ((1,), None)  # the last known leader stays
    nobody = partition_change.with_elr(partition(isr=(), leader=NO_LEADER, elr=(2,)), None, MIN_ISR,
                                       unclean_shutdown={2})
    assert nobody.elr == ()


def test_an_unclean_election_clears_the_elr() -> None:
    registration = partition(isr=(), leader=NO_LEADER, elr=(1,), last_known_elr=(1,), replicas=(1, 2, 3))
    change = partition_change.elect_after_broker_changes(registration, {3}, True, min_isr=MIN_ISR)
    assert (change.leader, change.isr, change.elr, change.last_known_elr) == (3, (3,), (), ())


def test_the_controller_keeps_the_elr_only_with_the_feature(make_cluster) -> None:
    cluster = make_cluster(brokers=0, broker_heartbeats=True, manage_leadership=True)
    for broker_id in (1, 2, 3):
        cluster.register(broker_id)
    assert cluster.image.features["eligible.leader.replicas.version"] == 1  # kfk's default, as Kafka 4.4's
    cluster.create(topic("elr", partitions=1, replication_factor=3, configs={"min.insync.replicas": "3"}))
    before = cluster.image.topic("elr").partitions[0]
    stopping = before.isr[-1]
    cluster.run(cluster.controller.controlled_shutdown(stopping, cluster.broker_epochs[stopping]))
    shrunk = cluster.image.topic("elr").partitions[0]
    assert stopping not in shrunk.isr and shrunk.elr == (stopping,)  # a clean shutdown keeps it eligible

    disable = UpdateFeaturesRequest(feature_updates=[UpdateFeaturesRequest.FeatureUpdateKey(
        feature="eligible.leader.replicas.version", max_version_level=0, upgrade_type=2)])
    assert cluster.run(cluster.controller.update_features(disable, 1)).error_code == 0
    assert not partition_change.elr_enabled(cluster.image)
    assert cluster.image.topic("elr").partitions[0].elr == ()  # a ClearElrRecord went with the feature


def test_min_insync_replicas_is_cluster_wide_while_the_elr_is_on(make_cluster) -> None:
    """Kafka's ConfigurationControlManager with ELR: turning it on writes the cluster default from the static
    config and drops per-broker values; per-broker values and the default's removal are refused; a change clears
    the ELRs it judged."""
    cluster = make_cluster(brokers=0, broker_heartbeats=True, manage_leadership=True, bootstrap_records=[
        FeatureLevelRecord(name="metadata.version", feature_level=33)])
    for broker_id in (1, 2, 3):
        cluster.register(broker_id)
    assert not partition_change.elr_enabled(cluster.image)
    assert incremental(cluster, BROKER, "2", ("min.insync.replicas", OpType.SET, "2")) == (ErrorCode.NONE, None)
    enable = UpdateFeaturesRequest(feature_updates=[UpdateFeaturesRequest.FeatureUpdateKey(
        feature="eligible.leader.replicas.version", max_version_level=1, upgrade_type=1)])
    assert cluster.run(cluster.controller.update_features(enable, 1)).error_code == ErrorCode.NONE
    assert dict(cluster.image.config(BROKER, "")) == {"min.insync.replicas": "1"}
    assert not cluster.image.config(BROKER, "2")  # the per-broker value is gone
    assert incremental(cluster, BROKER, "2", ("min.insync.replicas", OpType.SET, "2")) == (
        ErrorCode.INVALID_CONFIG, "Broker-level min.insync.replicas cannot be altered while ELR is enabled.")
    assert incremental(cluster, BROKER, "", ("min.insync.replicas", OpType.DELETE, None)) == (
        ErrorCode.INVALID_CONFIG, "Cluster-level min.insync.replicas cannot be removed while ELR is enabled.")

    cluster.create(topic("judged", partitions=1, replication_factor=3, configs={"min.insync.replicas": "3"}))
    stopping = cluster.image.topic("judged").partitions[0].isr[-1]
    cluster.run(cluster.controller.controlled_shutdown(stopping, cluster.broker_epochs[stopping]))
    assert cluster.image.topic("judged").partitions[0].elr == (stopping,)
    assert incremental(cluster, TOPIC, "judged", ("min.insync.replicas", OpType.SET, "2")) == (ErrorCode.NONE, None)
    assert cluster.image.topic("judged").partitions[0].elr == ()  # a ClearElrRecord for the topic
