"""Broker registration and unfencing, advertised endpoints, producer id blocks."""

from __future__ import annotations

import uuid

import pytest

from kfk.controller.cluster_control import broker_endpoints
from kfk.common.features import METADATA_VERSION_FEATURE_NAME
from kfk.controller.features import METADATA_VERSION_LEVEL
from kfk.controller.producer_ids import PRODUCER_ID_BLOCK_SIZE, ProducerIdManager
from kfk.errors import BrokerIdNotRegisteredError, StaleBrokerEpochError
from kfk.metadata.image import Endpoint
from kfk.protocol.metadata_records import schema_class
from kfk.server.network import Listener
from tests.controller.conftest import topic

PartitionChangeRecord = schema_class("PartitionChangeRecord")
PROTOCOL_MAP = ["CONTROLLER:PLAINTEXT", "PLAINTEXT:PLAINTEXT", "SSL:SSL", "INTERNAL:SASL_SSL"]


def test_an_empty_log_is_bootstrapped_with_the_metadata_version(cluster) -> None:
    assert cluster.image.features[METADATA_VERSION_FEATURE_NAME] == METADATA_VERSION_LEVEL


def test_registration_is_fenced_then_unfenced_and_epochs_grow(cluster) -> None:
    first = cluster.register(2, rack="r2", unfence=False)
    registration = cluster.image.brokers[2]
    assert registration.fenced and registration.rack == "r2" and registration.broker_epoch == first
    assert registration.endpoints == (Endpoint("PLAINTEXT", "127.0.0.1", 9092),)
    cluster.run(cluster.controller.unfence_broker(2, first))
    assert not cluster.image.brokers[2].fenced
    second = cluster.register(2)
    assert second > first
    with pytest.raises(StaleBrokerEpochError):
        cluster.run(cluster.controller.unfence_broker(2, first))
    with pytest.raises(BrokerIdNotRegisteredError):
        cluster.run(cluster.controller.unfence_broker(9, 1))


def test_unfencing_gives_leaderless_partitions_their_leader_back(cluster) -> None:
    cluster.create(topic("t", 2))
    topic_id = cluster.image.topic("t").topic_id
    epoch = cluster.controller.controller_epoch
    cluster.run(cluster.backend.append([PartitionChangeRecord(partition_id=0, topic_id=topic_id, leader=-1)], epoch))
    assert cluster.image.partition("t", 0).leader == -1
    cluster.register(1)
    partition = cluster.image.partition("t", 0)
    assert (partition.leader, partition.leader_epoch) == (1, 2)
    assert cluster.image.partition("t", 1).leader_epoch == 0  # had a leader: untouched


def test_endpoints_come_from_the_bound_sockets_and_advertised_listeners() -> None:
    bound = [Listener("PLAINTEXT", "127.0.0.1", 40001), Listener("CONTROLLER", "127.0.0.1", 40002),
             Listener("INTERNAL", "0.0.0.0", 40003)]
    endpoints = broker_endpoints(bound, None, PROTOCOL_MAP, ["CONTROLLER"])
    assert endpoints[0] == Endpoint("PLAINTEXT", "127.0.0.1", 40001, 0)
    assert endpoints[1].listener_name == "INTERNAL" and endpoints[1].port == 40003
    assert endpoints[1].host not in ("0.0.0.0", "") and endpoints[1].security_protocol == 3
    advertised = broker_endpoints(bound, ["PLAINTEXT://kafka.example:0", "INTERNAL://10.0.0.5:9094"],
                                  PROTOCOL_MAP, ["CONTROLLER"])
    assert advertised == [Endpoint("PLAINTEXT", "kafka.example", 40001, 0), Endpoint("INTERNAL", "10.0.0.5", 9094, 3)]


def test_producer_id_blocks_are_granted_once_even_across_restarts(cluster) -> None:
    epoch = cluster.broker_epochs[1]
    first = cluster.run(cluster.controller.allocate_producer_ids(1, epoch))
    second = cluster.run(cluster.controller.allocate_producer_ids(1, epoch))
    assert (first.first_producer_id, first.last_producer_id) == (0, PRODUCER_ID_BLOCK_SIZE - 1)
    assert second.first_producer_id == PRODUCER_ID_BLOCK_SIZE
    cluster.reopen()
    epoch = cluster.register(1)
    third = cluster.run(cluster.controller.allocate_producer_ids(1, epoch))
    assert third.first_producer_id == 2 * PRODUCER_ID_BLOCK_SIZE
    with pytest.raises(StaleBrokerEpochError):
        cluster.run(cluster.controller.allocate_producer_ids(1, epoch - 1))


def test_the_manager_hands_out_a_block_then_asks_for_the_next(cluster) -> None:
    epoch = cluster.broker_epochs[1]
    manager = ProducerIdManager(lambda: cluster.controller.allocate_producer_ids(1, epoch))

    async def take(count: int) -> list[int]:
        return [await manager.generate_producer_id() for _ in range(count)]

    ids = cluster.run(take(PRODUCER_ID_BLOCK_SIZE + 2))
    assert ids == list(range(PRODUCER_ID_BLOCK_SIZE + 2))
    assert cluster.image.next_producer_id == 2 * PRODUCER_ID_BLOCK_SIZE
    assert len(set(ids)) == len(ids)


def test_topic_ids_are_kafka_style_random_ids(cluster) -> None:
    ids = [cluster.create(topic(f"t{i}"))[f"t{i}"].topic_id for i in range(20)]
    assert len(set(ids)) == 20 and uuid.UUID(int=0) not in ids and uuid.UUID(int=1) not in ids
