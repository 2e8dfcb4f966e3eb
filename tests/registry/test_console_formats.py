"""`kfk console-produce --value-format avro|json-schema` and `kfk console-consume --value-format ...` with
`kfk schema-registry`: JSON lines in, Confluent's wire format on the topic, JSON out; what kfk's tools write,
confluent-kafka's deserializers read, and what confluent-kafka's serializers write, kfk's console-consume prints
(Protobuf too, kfk writing with a protoc descriptor set); subject naming strategies, auto-registration off, and refusals in one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2

from tests.registry.test_confluent_clients import USER_V2, USER_V3, _order_class

pytestmark = pytest.mark.integration

_REPO = Path(__file__).resolve().parents[2]


def kfk(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(_REPO), os.environ.get("PYTHONPATH")])))
    return subprocess.run([sys.executable, "-m", "kfk", *args], input=stdin, capture_output=True, text=True,
                          timeout=120, env=env)


def consume_json(bootstrap: str, url: str, topic: str, count: int, *extra: str) -> list:
    result = kfk("console-consume", "--bootstrap-server", bootstrap, "--topic", topic, "--from-beginning",
                 "--max-messages", str(count), "--timeout-ms", "30000", "--schema-registry-url", url, *extra)
    assert result.returncode == 0, result.stderr
    return [json.loads(line) for line in result.stdout.splitlines()]


def test_avro_console_round_trip_read_by_confluent(registry, registry_broker, tmp_path: Path) -> None:
    bootstrap, url = registry_broker.bootstrap_servers, registry.url
    topic = f"console-avro-{uuid.uuid4().hex[:8]}"
    schema_file = tmp_path / "user.avsc"
    schema_file.write_text(json.dumps(USER_V2))
    lines = ['{"name": "ada", "favorite_number": {"int": 7}, "email": "ada@example.com"}',  # Avro's JSON encoding
             '{"name": "grace", "favorite_number": null, "email": ""}',
             '{"name": "linus", "favorite_number": 3, "email": "l@x"}']  # plain JSON: the union branch inferred
    produced = kfk("console-produce", "--bootstrap-server", bootstrap, "--topic", topic, "--value-format", "avro",
                   "--value-schema", str(schema_file), "--schema-registry-url", url, stdin="\n".join(lines) + "\n")
    assert produced.returncode == 0, produced.stderr

    expected = [{"name": "ada", "favorite_number": {"int": 7}, "email": "ada@example.com"},
                {"name": "grace", "favorite_number": None, "email": ""},
                {"name": "linus", "favorite_number": {"int": 3}, "email": "l@x"}]
    assert consume_json(bootstrap, url, topic, 3, "--value-format", "avro") == expected
    as_objects = consume_json(bootstrap, url, topic, 3, "--value-format", "avro", "--formatter", "json")
    assert [record["value"] for record in as_objects] == expected

    client = SchemaRegistryClient({"url": url})
    deserializer = AvroDeserializer(client)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex[:6]}",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    values = []
    try:
        while len(values) < 3:
            message = consumer.poll(30)
            assert message is not None and message.error() is None
            values.append(deserializer(message.value(), SerializationContext(topic, MessageField.VALUE)))
    finally:
        consumer.close()
    assert [value["favorite_number"] for value in values] == [7, None, 3]
    assert client.get_latest_version(f"{topic}-value").schema_id == int.from_bytes(
        kfk_first_value(bootstrap, topic)[1:5], "big")

    # an incompatible schema is refused in one line naming the registry's reason
    refused = kfk("console-produce", "--bootstrap-server", bootstrap, "--topic", topic, "--value-format", "avro",
                  "--value-schema", json.dumps(USER_V3), "--schema-registry-url", url,
                  stdin='{"name": "x", "email": "", "age": 1}\n')
    assert refused.returncode == 1
    assert "409" in refused.stderr and "READER_FIELD_MISSING_DEFAULT_VALUE" in refused.stderr
    assert "Traceback" not in refused.stderr


def kfk_first_value(bootstrap: str, topic: str) -> bytes:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex[:6]}",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    try:
        message = consumer.poll(30)
        assert message is not None and message.error() is None
        return message.value()
    finally:
        consumer.close()


def test_json_schema_keys_record_name_strategy_and_no_auto_register(registry, registry_broker) -> None:
    bootstrap, url = registry_broker.bootstrap_servers, registry.url
    topic = f"console-json-{uuid.uuid4().hex[:8]}"
    title = f"Order{uuid.uuid4().hex[:6]}"
    schema = json.dumps({"title": title, "type": "object", "properties": {"id": {"type": "integer"}},
                         "required": ["id"]})
    key_schema = json.dumps({"type": "string"})
    common = ["--bootstrap-server", bootstrap, "--topic", topic, "--schema-registry-url", url]
    missing = kfk("console-produce", *common, "--value-format", "json-schema", "--value-schema", schema,
                  "--no-auto-register", stdin='{"id": 1}\n')
    assert missing.returncode == 1 and "40401" in missing.stderr and "Traceback" not in missing.stderr
    produced = kfk("console-produce", *common, "--value-format", "json-schema", "--value-schema", schema,
                   "--key-format", "json-schema", "--key-schema", key_schema,
                   "--subject-name-strategy", "TopicRecordNameStrategy", "--property", "parse.key=true",
                   stdin='"k1"\t{"id": 1}\n"k2"\t{"id": 2}\n')
    assert produced.returncode == 0, produced.stderr
    subjects = SchemaRegistryClient({"url": url}).get_subjects()
    assert f"{topic}-{title}" in subjects  # TopicRecordNameStrategy: the schema's title is its record name
    invalid = kfk("console-produce", *common, "--value-format", "json-schema", "--value-schema", schema,
                  "--subject-name-strategy", "TopicRecordNameStrategy", stdin='{"id": "one"}\n')
    assert invalid.returncode == 1 and "does not match" in invalid.stderr
    printed = consume_json(bootstrap, url, topic, 2, "--value-format", "json-schema", "--key-format", "json-schema",
                           "--formatter", "json")
    assert [(record["key"], record["value"]) for record in printed] == [("k1", {"id": 1}), ("k2", {"id": 2})]


def test_protobuf_both_ways_with_confluent(registry, registry_broker, tmp_path: Path) -> None:
    bootstrap, url = registry_broker.bootstrap_servers, registry.url
    topic = f"console-proto-{uuid.uuid4().hex[:8]}"
    order = _order_class()
    serializer = ProtobufSerializer(order, SchemaRegistryClient({"url": url}), {"use.deprecated.format": False})
    producer = Producer({"bootstrap.servers": bootstrap})
    producer.produce(topic, serializer(order(id=5, item="lamp"), SerializationContext(topic, MessageField.VALUE)))
    assert producer.flush(30) == 0

    # kfk writes with the descriptor set protoc would write for order.proto (`protoc --descriptor_set_out`)
    descriptors = descriptor_pb2.FileDescriptorSet()
    order.DESCRIPTOR.file.CopyToProto(descriptors.file.add())
    descriptor_file = tmp_path / "order.desc"
    descriptor_file.write_bytes(descriptors.SerializeToString())
    produced = kfk("console-produce", "--bootstrap-server", bootstrap, "--topic", topic, "--value-format", "protobuf",
                   "--value-schema", str(descriptor_file), "--schema-registry-url", url,
                   stdin='{"id": "6", "item": "desk"}\n')
    assert produced.returncode == 0, produced.stderr
    # and with order.proto itself: the same schema as the registered descriptor, so the same version
    proto_file = tmp_path / "order.proto"
    proto_file.write_text('syntax = "proto3";\npackage shop;\n\n// an order\nmessage Order { int64 id = 1; '
                          'string item = 2; }\n')
    produced = kfk("console-produce", "--bootstrap-server", bootstrap, "--topic", topic, "--value-format", "protobuf",
                   "--value-schema", str(proto_file), "--schema-registry-url", url,
                   stdin='{"id": "7", "item": "chair"}\n')
    assert produced.returncode == 0, produced.stderr
    assert SchemaRegistryClient({"url": url}).get_versions(f"{topic}-value") == [1]
    assert consume_json(bootstrap, url, topic, 3, "--value-format", "protobuf") == [
        {"id": "5", "item": "lamp"}, {"id": "6", "item": "desk"}, {"id": "7", "item": "chair"}]
    deserializer = ProtobufDeserializer(order, {"use.deprecated.format": False})
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex[:6]}",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    read = []
    try:
        while len(read) < 3:
            message = consumer.poll(30)
            assert message is not None and message.error() is None
            read.append(deserializer(message.value(), SerializationContext(topic, MessageField.VALUE)))
    finally:
        consumer.close()
    assert read == [order(id=5, item="lamp"), order(id=6, item="desk"), order(id=7, item="chair")]
