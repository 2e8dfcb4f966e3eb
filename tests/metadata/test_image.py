"""MetadataImage additions of the metadata layer: BrokerRegistrationChangeRecord, alive brokers per listener."""

from __future__ import annotations

import uuid

from kfk.common.config_types import ConfigResourceType
from kfk.metadata.image import MetadataImage
from kfk.protocol.metadata_records import schema_class

RegisterBrokerRecord = schema_class("RegisterBrokerRecord")
BrokerRegistrationChangeRecord = schema_class("BrokerRegistrationChangeRecord")
TopicRecord = schema_class("TopicRecord")


def registration(broker_id: int, listeners: dict[str, int], fenced: bool = True):
    return RegisterBrokerRecord(
        broker_id=broker_id, incarnation_id=uuid.uuid4(), broker_epoch=broker_id * 10, fenced=fenced, rack=None,
        end_points=[RegisterBrokerRecord.BrokerEndpoint(name=name, host="127.0.0.1", port=port)
                    for name, port in listeners.items()])


def test_registration_change_record_fences_and_unfences() -> None:
    image = MetadataImage().apply([registration(1, {"PLAINTEXT": 9092})], 0)
    assert image.brokers[1].fenced
    image = image.apply([BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=10, fenced=-1)], 1)
    assert not image.brokers[1].fenced
    image = image.apply([BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=10, fenced=0,
                                                        in_controlled_shutdown=1)], 2)
    assert not image.brokers[1].fenced and image.brokers[1].in_controlled_shutdown
    image = image.apply([BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=10, fenced=1)], 3)
    assert image.brokers[1].fenced
    # a change for an unknown broker changes nothing
    assert image.apply([BrokerRegistrationChangeRecord(broker_id=7, fenced=-1)], 4).brokers == image.brokers


def test_alive_brokers_are_the_unfenced_ones_with_the_listener_sorted_by_id() -> None:
    image = MetadataImage().apply([
        registration(3, {"PLAINTEXT": 9093}, fenced=False),
        registration(1, {"PLAINTEXT": 9091, "INTERNAL": 9191}, fenced=False),
        registration(2, {"PLAINTEXT": 9092}, fenced=True),
        registration(4, {"INTERNAL": 9194}, fenced=False),
    ], 3)
    assert [(b.broker_id, e.port) for b, e in image.alive_brokers("PLAINTEXT")] == [(1, 9091), (3, 9093)]
    assert [b.broker_id for b, _ in image.alive_brokers("INTERNAL")] == [1, 4]
    assert image.alive_endpoint(2, "PLAINTEXT") is None
    assert image.alive_endpoint(4, "PLAINTEXT") is None
    assert image.alive_endpoint(9, "PLAINTEXT") is None
    assert image.alive_endpoint(1, "INTERNAL").port == 9191


def test_is_internal_follows_kafkas_list() -> None:
    image = MetadataImage().apply([TopicRecord(name="__consumer_offsets", topic_id=uuid.uuid4()),
                                   TopicRecord(name="__mine", topic_id=uuid.uuid4())], 1)
    assert image.topic("__consumer_offsets").is_internal
    assert not image.topic("__mine").is_internal


def test_config_resource_names_lists_one_type_sorted_and_drops_emptied_resources() -> None:
    ConfigRecord = schema_class("ConfigRecord")
    image = MetadataImage().apply([
        ConfigRecord(resource_type=ConfigResourceType.CLIENT_METRICS, resource_name="slow-clients",
                     name="interval.ms", value="60000"),
        ConfigRecord(resource_type=ConfigResourceType.CLIENT_METRICS, resource_name="all-clients",
                     name="metrics", value="*"),
        ConfigRecord(resource_type=ConfigResourceType.TOPIC, resource_name="t", name="retention.ms", value="1"),
    ], 0)
    assert image.config_resource_names(ConfigResourceType.CLIENT_METRICS) == ["all-clients", "slow-clients"]
    assert image.config_resource_names(ConfigResourceType.TOPIC) == ["t"]
    image = image.apply([ConfigRecord(resource_type=ConfigResourceType.CLIENT_METRICS,
                                      resource_name="slow-clients", name="interval.ms", value=None)], 1)
    assert image.config_resource_names(ConfigResourceType.CLIENT_METRICS) == ["all-clients"]
