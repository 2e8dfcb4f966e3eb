"""confluent-kafka's SchemaRegistryClient and its Avro, JSON Schema and Protobuf serializers and deserializers,
unmodified, against `kfk schema-registry` (its state in a kfk broker's _schemas): registration, compatible
evolution, an incompatible change refused with 409 and the reason, fetch by id, and typed records produced and
consumed through the broker with confluent-kafka's Producer and Consumer."""

from __future__ import annotations

import json
import uuid

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

pytestmark = pytest.mark.integration

USER_V1 = {"type": "record", "name": "User", "namespace": "com.example",
           "fields": [{"name": "name", "type": "string"}, {"name": "favorite_number", "type": ["null", "int"],
                                                            "default": None}]}
# v2 adds a field with a default: BACKWARD (the default level) accepts it
USER_V2 = {**USER_V1, "fields": [*USER_V1["fields"], {"name": "email", "type": "string", "default": ""}]}
# v3 adds a field without a default: the new schema cannot read v2's records, so BACKWARD refuses it
USER_V3 = {**USER_V1, "fields": [*USER_V2["fields"], {"name": "age", "type": "int"}]}


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def round_trip(bootstrap: str, topic: str, serializer, deserializer, values: list) -> list:
    producer = Producer({"bootstrap.servers": bootstrap})
    for value in values:
        producer.produce(topic, serializer(value, SerializationContext(topic, MessageField.VALUE)))
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("g"), "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    received = []
    try:
        while len(received) < len(values):
            message = consumer.poll(30)
            assert message is not None, f"only {len(received)} of {len(values)} records came back"
            assert message.error() is None, message.error()
            assert message.value()[0] == 0  # Confluent's wire format: magic byte 0, then the 4-byte schema id
            received.append(deserializer(message.value(), SerializationContext(topic, MessageField.VALUE)))
    finally:
        consumer.close()
    return received


def test_avro_register_evolve_refuse_and_fetch_by_id(registry) -> None:
    client = SchemaRegistryClient({"url": registry.url})
    subject = unique("users") + "-value"
    first = client.register_schema(subject, Schema(json.dumps(USER_V1), "AVRO"))
    assert client.register_schema(subject, Schema(json.dumps(USER_V1), "AVRO")) == first  # idempotent
    second = client.register_schema(subject, Schema(json.dumps(USER_V2), "AVRO"))
    assert second != first
    assert client.get_versions(subject) == [1, 2]
    with pytest.raises(SchemaRegistryError) as refused:
        client.register_schema(subject, Schema(json.dumps(USER_V3), "AVRO"))
    assert refused.value.http_status_code == 409
    assert refused.value.error_code == 409
    assert "READER_FIELD_MISSING_DEFAULT_VALUE" in refused.value.error_message
    assert "'age'" in refused.value.error_message
    assert not client.test_compatibility(subject, Schema(json.dumps(USER_V3), "AVRO"))
    assert json.loads(client.get_schema(first).schema_str) == USER_V1
    latest = client.get_latest_version(subject)
    assert (latest.version, latest.schema_id) == (2, second)
    assert client.lookup_schema(subject, Schema(json.dumps(USER_V1), "AVRO")).version == 1

    # FULL: removing a field without a default also breaks the old schema reading new records (forward)
    client.set_compatibility(subject, "FULL")
    assert client.get_compatibility(subject) == "FULL"
    without_name = {**USER_V2, "fields": USER_V2["fields"][1:]}
    with pytest.raises(SchemaRegistryError) as refused:
        client.register_schema(subject, Schema(json.dumps(without_name), "AVRO"))
    assert refused.value.http_status_code == 409 and "'name'" in refused.value.error_message


def test_avro_serdes_through_kfk(registry, registry_broker) -> None:
    client = SchemaRegistryClient({"url": registry.url})
    topic = unique("avro-users")
    serializer = AvroSerializer(client, json.dumps(USER_V2))
    deserializer = AvroDeserializer(client)
    values = [{"name": "ada", "favorite_number": 7, "email": "ada@example.com"},
              {"name": "grace", "favorite_number": None, "email": ""}]
    assert round_trip(registry_broker.bootstrap_servers, topic, serializer, deserializer, values) == values
    assert client.get_subjects().count(f"{topic}-value") == 1  # auto-registered under TopicNameStrategy


def test_json_schema_serdes_and_refusal(registry, registry_broker) -> None:
    client = SchemaRegistryClient({"url": registry.url})
    topic = unique("json-orders")
    schema = {"$schema": "http://json-schema.org/draft-07/schema#", "title": "Order", "type": "object",
              "properties": {"id": {"type": "integer"}, "item": {"type": "string"}},
              "required": ["id"], "additionalProperties": False}
    serializer = JSONSerializer(json.dumps(schema), client)
    deserializer = JSONDeserializer(None, schema_registry_client=client)
    values = [{"id": 1, "item": "book"}, {"id": 2}]
    assert round_trip(registry_broker.bootstrap_servers, topic, serializer, deserializer, values) == values
    # Requiring a property the old schema did not require: old documents may lack it
    narrowed = {**schema, "required": ["id", "item"]}
    with pytest.raises(SchemaRegistryError) as refused:
        client.register_schema(f"{topic}-value", Schema(json.dumps(narrowed), "JSON"))
    assert refused.value.http_status_code == 409 and "'item'" in refused.value.error_message
    # an optional property added to a closed content model is compatible
    widened = {**schema, "properties": {**schema["properties"], "note": {"type": "string"}}}
    assert client.register_schema(f"{topic}-value", Schema(json.dumps(widened), "JSON")) > 0


def _order_class(field_type: int = descriptor_pb2.FieldDescriptorProto.TYPE_STRING, package: str = "shop"):
    """A Protobuf message class made at run time (what protoc would generate from order.proto)."""
    proto = descriptor_pb2.FileDescriptorProto(name=f"order_{uuid.uuid4().hex[:6]}.proto", package=package,
                                               syntax="proto3")
    message = proto.message_type.add(name="Order")
    message.field.add(name="id", number=1, type=descriptor_pb2.FieldDescriptorProto.TYPE_INT64,
                      label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL)
    message.field.add(name="item", number=2, type=field_type, label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{package}.Order"))


def test_protobuf_serdes_and_refusal(registry, registry_broker) -> None:
    client = SchemaRegistryClient({"url": registry.url})
    topic = unique("proto-orders")
    order = _order_class()
    serializer = ProtobufSerializer(order, client, {"use.deprecated.format": False})
    deserializer = ProtobufDeserializer(order, {"use.deprecated.format": False})
    values = [order(id=1, item="book"), order(id=2, item="pen")]
    assert round_trip(registry_broker.bootstrap_servers, topic, serializer, deserializer, values) == values
    registered = client.get_latest_version(f"{topic}-value")
    assert registered.schema.schema_type == "PROTOBUF"
    # field 2 from string to double: not wire-compatible
    changed = _order_class(descriptor_pb2.FieldDescriptorProto.TYPE_DOUBLE)
    with pytest.raises(Exception) as refused:
        ProtobufSerializer(changed, client, {"use.deprecated.format": False})(
            changed(id=3, item=1.5), SerializationContext(topic, MessageField.VALUE))
    assert "409" in str(refused.value) and "FIELD_SCALAR_KIND_CHANGED" in str(refused.value)
