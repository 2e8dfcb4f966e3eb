"""The registry runs on any Kafka: `kfk schema-registry` with its _schemas on Apache Kafka itself, used by
confluent-kafka's client and Avro serdes, and its state read back by a restarted instance."""

from __future__ import annotations

import json
import uuid

import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer

from tests.registry.test_confluent_clients import USER_V1, USER_V2, USER_V3, round_trip

pytestmark = pytest.mark.integration


def test_registry_on_apache_kafka(apache_kafka, registry_factory) -> None:
    bootstrap = apache_kafka.bootstrap_server
    topic = f"_schemas_{uuid.uuid4().hex[:6]}"
    group = f"registry-{uuid.uuid4().hex[:6]}"
    registry = registry_factory(bootstrap, topic, group_id=group)
    client = SchemaRegistryClient({"url": registry.url})
    subject = f"users-{uuid.uuid4().hex[:6]}-value"
    first = client.register_schema(subject, Schema(json.dumps(USER_V1), "AVRO"))
    client.register_schema(subject, Schema(json.dumps(USER_V2), "AVRO"))
    with pytest.raises(Exception, match="409"):
        client.register_schema(subject, Schema(json.dumps(USER_V3), "AVRO"))
    values = [{"name": "ada", "favorite_number": 1, "email": "a@b"}]
    data_topic = f"avro-{uuid.uuid4().hex[:6]}"
    assert round_trip(bootstrap, data_topic, AvroSerializer(client, json.dumps(USER_V2)), AvroDeserializer(client),
                      values) == values

    registry.stop()
    restarted = registry_factory(bootstrap, topic, group_id=group)
    again = SchemaRegistryClient({"url": restarted.url})
    assert again.get_versions(subject) == [1, 2]
    assert json.loads(again.get_schema(first).schema_str) == USER_V1
