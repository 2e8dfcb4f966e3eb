"""confluent-kafka's SchemaRegistryClient and its Avro, JSON Schema and Protobuf serializers and deserializers,
unmodified, against `kfk schema-registry` (its state in a kfk broker's _schemas): registration, compatible
evolution, an incompatible change refused with 409 and the reason, fetch by id, and typed records produced and
consumed through the broker with confluent-kafka's Producer and Consumer."""

from __future__ import annotations

import base64
import json
import uuid

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.schema_registry import Schema, SchemaReference, SchemaRegistryClient
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


MONEY_PROTO = """syntax = "proto3";
package money;
// amounts in minor units
message Money { int64 units = 1; string currency = 2; }
"""
INVOICE_PROTO = """syntax = "proto3";
package billing;
import "money.proto";
import "google/protobuf/timestamp.proto";
message Invoice {
  string id = 1;
  money.Money total = 2;
  google.protobuf.Timestamp issued = 3;
  map<string, string> labels = 4;
}
"""


def test_protobuf_source_text_registered_and_served(registry, registry_broker) -> None:
    """.proto text registered with an import by reference and a well-known import: served back as text, and as the
    base64 descriptor (format=serialized) from which confluent-kafka's serializer and deserializer work."""
    from google.protobuf import timestamp_pb2

    client = SchemaRegistryClient({"url": registry.url})
    topic = unique("invoices")
    money_subject = unique("money")
    client.register_schema(money_subject, Schema(MONEY_PROTO, "PROTOBUF"))
    reference = SchemaReference("money.proto", money_subject, 1)
    schema_id = client.register_schema(f"{topic}-value", Schema(INVOICE_PROTO, "PROTOBUF", [reference]))
    served = client.get_schema(schema_id)
    assert served.schema_type == "PROTOBUF" and served.schema_str.startswith('syntax = "proto3";\npackage billing;')
    assert "  money.Money total = 2;" in served.schema_str.splitlines()
    assert "// amounts" not in client.get_latest_version(money_subject).schema.schema_str
    # the same text again is the same version; a comment or spacing changes nothing
    assert client.register_schema(f"{topic}-value", Schema(INVOICE_PROTO.replace("\n  ", "\n    "), "PROTOBUF",
                                                           [reference])) == schema_id
    # (the client caches a schema by id whatever the format asked: the serdes get a client of their own)
    client = SchemaRegistryClient({"url": registry.url})
    serialized = client.get_schema(schema_id, fmt="serialized")
    invoice_file = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(serialized.schema_str))
    assert {field.name: field.type_name for field in invoice_file.message_type[0].field}["total"] == ".money.Money"
    money_file = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(
        SchemaRegistryClient({"url": registry.url}).get_version(money_subject, 1, fmt="serialized").schema.schema_str))

    # the message class an application would have (protoc's output for the same files)
    pool = descriptor_pool.DescriptorPool()
    pool.AddSerializedFile(timestamp_pb2.DESCRIPTOR.serialized_pb)
    money_file.name, invoice_file.name = "money.proto", "invoice.proto"
    pool.Add(money_file)
    pool.Add(invoice_file)
    invoice = message_factory.GetMessageClass(pool.FindMessageTypeByName("billing.Invoice"))
    serializer = ProtobufSerializer(invoice, client, {"use.deprecated.format": False, "auto.register.schemas": False,
                                                      "use.latest.version": True})
    deserializer = ProtobufDeserializer(invoice, {"use.deprecated.format": False}, client)
    values = [invoice(id="i-1", labels={"region": "eu"}), invoice(id="i-2")]
    values[0].total.units, values[0].total.currency = 1250, "EUR"
    values[0].issued.seconds = 1_700_000_000
    assert round_trip(registry_broker.bootstrap_servers, topic, serializer, deserializer, values) == values
    # the money type changed under the invoice's import: an incompatible field kind is refused with the reason
    with pytest.raises(SchemaRegistryError) as refused:
        client.register_schema(money_subject, Schema(MONEY_PROTO.replace("int64 units", "string units"), "PROTOBUF"))
    assert refused.value.http_status_code == 409 and "FIELD_SCALAR_KIND_CHANGED" in refused.value.error_message
    with pytest.raises(SchemaRegistryError) as invalid:
        client.register_schema(unique("broken"), Schema("syntax = \"proto3\"; message M { Nope n = 1; }", "PROTOBUF"))
    assert invalid.value.http_status_code == 422 and "Nope" in invalid.value.error_message


def test_protobuf_descriptor_registration_served_as_text(registry) -> None:
    """A schema confluent-kafka's serializer registers (a base64 descriptor) is stored as .proto text, as Confluent's
    registry stores it, and the serializer's lookup of the same descriptor finds it."""
    client = SchemaRegistryClient({"url": registry.url})
    topic = unique("orders-text")
    order = _order_class()
    serializer = ProtobufSerializer(order, client, {"use.deprecated.format": False})
    serializer(order(id=1, item="book"), SerializationContext(topic, MessageField.VALUE))
    text = client.get_latest_version(f"{topic}-value").schema.schema_str
    assert text.splitlines() == ['syntax = "proto3";', "package shop;", "message Order {", "  int64 id = 1;",
                                 "  string item = 2;", "}"]
    lookup = ProtobufSerializer(order, SchemaRegistryClient({"url": registry.url}),
                                {"use.deprecated.format": False, "auto.register.schemas": False})
    assert lookup(order(id=2, item="pen"), SerializationContext(topic, MessageField.VALUE))[0] == 0


def test_protobuf_text_found_by_a_normalizing_serializer(registry) -> None:
    """.proto text registered as written (relative type names) is found by the lookup of confluent-kafka's
    ProtobufSerializer with normalize.schemas, which sends the descriptor: both normalize to the same text."""
    client = SchemaRegistryClient({"url": registry.url})
    topic = unique("normalized")
    text = ('syntax = "proto3";\npackage shop;\n'
            "message Order { int64 id = 1; Line line = 2; message Line { string sku = 1; } }")
    schema_id = client.register_schema(f"{topic}-value", Schema(text, "PROTOBUF"))
    assert "  Line line = 2;" in client.get_schema(schema_id).schema_str.splitlines()
    file = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(
        SchemaRegistryClient({"url": registry.url}).get_schema(schema_id, fmt="serialized").schema_str))
    file.name = f"order_{uuid.uuid4().hex[:6]}.proto"
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    order = message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.Order"))
    context = SerializationContext(topic, MessageField.VALUE)
    plain = ProtobufSerializer(order, SchemaRegistryClient({"url": registry.url}),
                               {"use.deprecated.format": False, "auto.register.schemas": False})
    with pytest.raises(SchemaRegistryError):  # as written, the texts differ
        plain(order(id=1), context)
    normalizing = ProtobufSerializer(order, SchemaRegistryClient({"url": registry.url}), {
        "use.deprecated.format": False, "auto.register.schemas": False, "normalize.schemas": True})
    assert int.from_bytes(normalizing(order(id=1), context)[1:5], "big") == schema_id
    # registered normalized, the text is the descriptor's: type names fully qualified
    normalized_id = client.register_schema(f"{topic}-other", Schema(text, "PROTOBUF"), normalize_schemas=True)
    assert "  .shop.Order.Line line = 2;" in client.get_schema(normalized_id).schema_str.splitlines()
