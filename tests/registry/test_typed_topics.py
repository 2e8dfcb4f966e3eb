"""One wire format across the platform: typed topics written by kfk connect's AvroConverter, by confluent-kafka's
AvroSerializer and by kfk.streams' Avro serde (Confluent's GenericAvroSerde) are read by each of the others and by
`kfk console-consume --value-format avro`, all against the session's `kfk schema-registry` and kfk broker.

One pipeline for the module: a kfk connect worker (a real `kfk connect standalone`) runs the example plugin's
CounterSource (structs example.Count{n: int64, label: string}) with AvroConverter into `counts`, and a
FileStreamSink with AvroConverter reading `order-lines`; a kfk.streams application maps `counts` to `counts-x10`
(serdes per operation) and `orders`, written by confluent-kafka, to `order-lines` in a schema of its own (the Avro
serde as default.value.serde)."""

from __future__ import annotations

import datetime
import decimal
import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from kfk.client import Admin, NewTopic
from kfk.connect.avro_converter import AvroConverter
from kfk.connect.data import (
    DATE_SCHEMA,
    FLOAT32_SCHEMA,
    INT8_SCHEMA,
    INT64_SCHEMA,
    OPTIONAL_STRING_SCHEMA,
    STRING_SCHEMA,
    TIMESTAMP_SCHEMA,
    SchemaBuilder,
    Struct,
    decimal_schema,
)
from kfk.connect.errors import DataException
from kfk.connect.json_schema_converter import JsonSchemaConverter
from kfk.connect.plugins import find
from kfk.streams import KafkaStreams, Serdes, State, StreamsBuilder
from kfk.streams.avro_serde import GenericRecord, generic_avro_serde
from kfk.streams.test_driver import TopologyTestDriver
from tests.connect.workers import start_kfk_worker, wait_for
from tests.registry.test_console_formats import consume_json

pytestmark = pytest.mark.integration

PLUGIN_DIRECTORY = Path(__file__).resolve().parents[1] / "connect" / "plugin_example"
COUNTS = 5
ORDER = {"type": "record", "name": "Order", "namespace": "shop",
         "fields": [{"name": "id", "type": "int"}, {"name": "item", "type": "string"},
                    {"name": "quantity", "type": ["null", "int"], "default": None},
                    {"name": "unit_price", "type": "double"}]}
ORDER_LINE = {"type": "record", "name": "OrderLine", "namespace": "shop",
              "fields": [{"name": "id", "type": "long"}, {"name": "item", "type": "string"},
                         {"name": "total", "type": "double"}, {"name": "bulk", "type": "boolean"}]}
ORDERS = [{"id": 1, "item": "apple", "quantity": 3, "unit_price": 0.5},
          {"id": 2, "item": "pear", "quantity": None, "unit_price": 2.0},
          {"id": 3, "item": "fig", "quantity": 2, "unit_price": 1.25}]


def order_line(order: dict) -> GenericRecord:
    quantity = order["quantity"] or 1
    return GenericRecord(ORDER_LINE, id=order["id"], item=order["item"], total=quantity * order["unit_price"],
                         bulk=quantity > 2)


def read_avro(bootstrap: str, url: str, topic: str, count: int) -> list:
    """The values of `count` records of `topic`, read with confluent-kafka's AvroDeserializer."""
    deserializer = AvroDeserializer(SchemaRegistryClient({"url": url}))
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex[:8]}",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    values = []
    try:
        def more() -> bool:
            message = consumer.poll(1)
            if message is not None:
                assert message.error() is None, message.error()
                values.append(deserializer(message.value(), SerializationContext(topic, MessageField.VALUE)))
            return len(values) >= count
        wait_for(more, f"{count} records of {topic}", timeout=90)
    finally:
        consumer.close()
    return values


@pytest.fixture(scope="module")
def pipeline(registry, registry_broker, tmp_path_factory) -> Iterator[dict]:
    bootstrap, url = registry_broker.bootstrap_servers, registry.url
    suffix = uuid.uuid4().hex[:8]
    topics = {name: f"{name}-{suffix}" for name in ("counts", "counts-x10", "orders", "order-lines")}
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(topic, 1, 1) for topic in topics.values()])
    directory = tmp_path_factory.mktemp("typed-topics")
    avro = {"value.converter": "io.confluent.connect.avro.AvroConverter", "value.converter.schema.registry.url": url}
    worker_config = {"bootstrap.servers": bootstrap,
                     "key.converter": "org.apache.kafka.connect.storage.StringConverter", **avro, "offset.storage.file.filename": str(directory / "offsets"),
                     "offset.flush.interval.ms": "300"}
    source = {"name": "counter", "connector.class": "example.CounterSource", "topic": topics["counts"],
              "limit": str(COUNTS)}
    sink = {"name": "lines", "connector.class": "FileStreamSink", "topics": topics["order-lines"],
            "file": str(directory / "order-lines.txt")}
    with pytest.MonkeyPatch.context() as patch:  # the example plugin on the worker's path, as pip would put it
        patch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(PLUGIN_DIRECTORY),
                                                                 os.environ.get("PYTHONPATH")])))
        worker = start_kfk_worker(directory, worker_config, [source, sink])

    per_operation = generic_avro_serde(url)
    builder = StreamsBuilder()
    (builder.stream(topics["counts"], value_serde=per_operation)
     .map_values(lambda count: GenericRecord(count.schema, n=count["n"] * 10, label=count["label"].upper()))
     .to(topics["counts-x10"], value_serde=per_operation))
    builder.stream(topics["orders"], key_serde=Serdes.bytes()).map_values(order_line).to(topics["order-lines"])
    streams = KafkaStreams(builder.build(), {
        "application.id": f"typed-{suffix}", "bootstrap.servers": bootstrap, "state.dir": str(directory / "state"),
        "default.key.serde": "string", "default.value.serde": "io.confluent.kafka.streams.serdes.avro.GenericAvroSerde",
        "schema.registry.url": url, "commit.interval.ms": 100})
    streams.start()
    try:
        assert streams.wait_for_state(State.RUNNING, State.ERROR) is State.RUNNING, streams.error
        serializer = AvroSerializer(SchemaRegistryClient({"url": url}), json.dumps(ORDER))
        producer = Producer({"bootstrap.servers": bootstrap})
        for order in ORDERS:
            producer.produce(topics["orders"], serializer(order, SerializationContext(topics["orders"],
                                                                                      MessageField.VALUE)))
        assert producer.flush(30) == 0
        yield {"bootstrap": bootstrap, "url": url, "topics": topics, "directory": directory, "streams": streams}
    finally:
        streams.close()
        worker.stop()


def test_connect_avro_converter_read_by_confluent_and_streams(pipeline) -> None:
    bootstrap, url, topics = pipeline["bootstrap"], pipeline["url"], pipeline["topics"]
    assert read_avro(bootstrap, url, topics["counts"], COUNTS) == [
        {"n": n, "label": f"label-{n}"} for n in range(COUNTS)]
    # the schema AvroConverter registered is the Avro schema Confluent's converter makes of example.Count
    registered = SchemaRegistryClient({"url": url}).get_latest_version(f"{topics['counts']}-value").schema
    assert json.loads(registered.schema_str) == {
        "type": "record", "name": "Count", "namespace": "example",
        "fields": [{"name": "n", "type": "long"}, {"name": "label", "type": "string"}],
        "connect.name": "example.Count"}
    # kfk.streams read them with its Avro serde and wrote them back with the records' own schema
    assert read_avro(bootstrap, url, topics["counts-x10"], COUNTS) == [
        {"n": n * 10, "label": f"LABEL-{n}"} for n in range(COUNTS)]


def test_confluent_records_through_streams_to_connect_sink_and_console(pipeline) -> None:
    bootstrap, url, topics = pipeline["bootstrap"], pipeline["url"], pipeline["topics"]
    expected = [dict(order_line(order)) for order in ORDERS]
    assert read_avro(bootstrap, url, topics["order-lines"], len(ORDERS)) == expected
    # Avro's JSON encoding, as kafka-avro-console-consumer prints it
    assert consume_json(bootstrap, url, topics["order-lines"], len(ORDERS), "--value-format", "avro") == expected
    # FileStreamSink got Structs from AvroConverter and wrote them as Java's Struct.toString does
    lines = pipeline["directory"] / "order-lines.txt"
    wanted = ("Struct{id=1,item=apple,total=1.5,bulk=true}\nStruct{id=2,item=pear,total=2.0,bulk=false}\n"
              "Struct{id=3,item=fig,total=2.5,bulk=false}\n")
    wait_for(lambda: lines.exists() and lines.read_text() == wanted, "the sink's lines", timeout=60)


def test_avro_converter_maps_connect_types_as_confluent_both_ways(registry) -> None:
    """Each common Connect type through AvroConverter and confluent-kafka's Avro serdes, in both directions."""
    topic = f"mapped-{uuid.uuid4().hex[:8]}"
    address = SchemaBuilder.struct().field("city", STRING_SCHEMA).field("zip", OPTIONAL_STRING_SCHEMA).build()
    price = decimal_schema(2).build()
    schema = (SchemaBuilder.struct().name("com.example.Customer").field("id", INT64_SCHEMA)
              .field("level", INT8_SCHEMA).field("score", FLOAT32_SCHEMA).field("email", OPTIONAL_STRING_SCHEMA)
              .field("tags", SchemaBuilder.array(STRING_SCHEMA).build())
              .field("visits", SchemaBuilder.map(STRING_SCHEMA, INT64_SCHEMA).build())
              .field("address", address).field("balance", price).field("born", DATE_SCHEMA)
              .field("seen", TIMESTAMP_SCHEMA).build())
    value = (Struct(schema).put("id", 7).put("level", 3).put("score", 0.5).put("tags", ["a", "b"])
             .put("visits", {"home": 2}).put("address", Struct(address).put("city", "Oslo"))
             .put("balance", decimal.Decimal("12.34")).put("born", datetime.date(1990, 5, 17))
             .put("seen", datetime.datetime(2024, 1, 2, 3, 4, 5, 678000, tzinfo=datetime.timezone.utc)))
    converter = AvroConverter()
    converter.configure({"schema.registry.url": registry.url}, False)
    data = converter.from_connect_data(topic, schema, value)

    client = SchemaRegistryClient({"url": registry.url})
    registered = json.loads(client.get_latest_version(f"{topic}-value").schema.schema_str)
    fields = {field["name"]: field for field in registered["fields"]}
    assert (registered["name"], registered["namespace"], registered["connect.name"]) == \
        ("Customer", "com.example", "com.example.Customer")
    assert fields["level"]["type"] == {"type": "int", "connect.type": "int8"}
    assert fields["score"]["type"] == "float"
    assert fields["email"] == {"name": "email", "type": ["null", "string"], "default": None}
    assert fields["tags"]["type"] == {"type": "array", "items": "string"}
    assert fields["visits"]["type"] == {"type": "map", "values": "long"}
    assert fields["address"]["type"]["name"] == "ConnectDefault"
    assert fields["address"]["type"]["namespace"] == "io.confluent.connect.avro"
    assert (fields["balance"]["type"]["logicalType"], fields["balance"]["type"]["scale"]) == ("decimal", 2)
    assert fields["born"]["type"]["logicalType"] == "date"
    assert fields["seen"]["type"]["logicalType"] == "timestamp-millis"

    read = AvroDeserializer(client)(data, SerializationContext(topic, MessageField.VALUE))
    assert read == {"id": 7, "level": 3, "score": 0.5, "email": None, "tags": ["a", "b"], "visits": {"home": 2},
                    "address": {"city": "Oslo", "zip": None}, "balance": decimal.Decimal("12.34"),
                    "born": datetime.date(1990, 5, 17),
                    "seen": datetime.datetime(2024, 1, 2, 3, 4, 5, 678000, tzinfo=datetime.timezone.utc)}
    # what confluent-kafka writes with that schema reads back as the same Connect schema and struct
    written = AvroSerializer(client, json.dumps(registered))(read, SerializationContext(topic, MessageField.VALUE))
    back = converter.to_connect_data(topic, written)
    assert back.schema == schema and back.value == value
    assert converter.to_connect_data(topic, None) == (None, None)


def test_avro_converter_without_auto_register_uses_the_latest_version(registry) -> None:
    topic = f"latest-{uuid.uuid4().hex[:8]}"
    client = SchemaRegistryClient({"url": registry.url})
    wide = SchemaBuilder.struct().name("example.Count").field("n", INT64_SCHEMA).field("label", STRING_SCHEMA).build()
    value = Struct(wide).put("n", 4).put("label", "four")
    refusing = AvroConverter()
    refusing.configure({"schema.registry.url": registry.url, "auto.register.schemas": "false"}, False)
    with pytest.raises(DataException, match="Failed to access Avro data"):  # no such subject yet
        refusing.from_connect_data(topic, wide, value)
    narrow = {"type": "record", "name": "Count", "namespace": "example", "fields": [{"name": "n", "type": "long"}]}
    client.register_schema(f"{topic}-value", Schema(json.dumps(narrow), "AVRO"))
    latest = AvroConverter()
    latest.configure({"schema.registry.url": registry.url, "auto.register.schemas": "false",
                      "use.latest.version": "true"}, False)
    data = latest.from_connect_data(topic, wide, value)
    assert AvroDeserializer(client)(data, SerializationContext(topic, MessageField.VALUE)) == {"n": 4}


def test_json_schema_converter_both_ways_with_confluent(registry) -> None:
    topic = f"json-{uuid.uuid4().hex[:8]}"
    schema = (SchemaBuilder.struct().name("example.Reading").field("sensor", STRING_SCHEMA)
              .field("level", INT8_SCHEMA).field("value", FLOAT32_SCHEMA).field("note", OPTIONAL_STRING_SCHEMA)
              .field("counts", SchemaBuilder.map(STRING_SCHEMA, INT64_SCHEMA).build()).build())
    value = Struct(schema).put("sensor", "t1").put("level", 2).put("value", 21.5).put("counts", {"a": 1})
    converter = find("io.confluent.connect.json.JsonSchemaConverter", ("converter",)).instantiate()
    assert isinstance(converter, JsonSchemaConverter)
    converter.configure({"schema.registry.url": registry.url}, False)
    data = converter.from_connect_data(topic, schema, value)
    client = SchemaRegistryClient({"url": registry.url})
    registered = client.get_latest_version(f"{topic}-value").schema
    assert registered.schema_type == "JSON"
    document = json.loads(registered.schema_str)
    assert document["title"] == "example.Reading" and document["required"] == ["sensor", "level", "value", "counts"]
    assert document["properties"]["note"] == {"oneOf": [{"type": "null"}, {"type": "string"}], "connect.index": 3}
    context = SerializationContext(topic, MessageField.VALUE)
    read = JSONDeserializer(None, schema_registry_client=client)(data, context)
    assert read == {"sensor": "t1", "level": 2, "value": 21.5, "counts": {"a": 1}}
    # confluent-kafka's JSONSerializer writing with that schema: the converter reads the same struct back
    written = JSONSerializer(registered.schema_str, client, conf={"auto.register.schemas": False})(read, context)
    back = converter.to_connect_data(topic, written)
    assert back.schema == schema and back.value == value


def test_protobuf_converter_both_ways_with_confluent(registry) -> None:
    """kfk connect's ProtobufConverter registers .proto text for a struct (map, repeated, optional, nested message,
    google.protobuf.Timestamp); confluent-kafka's ProtobufDeserializer reads its records with the class built from
    the registered schema, and what confluent-kafka's ProtobufSerializer writes the converter reads back."""
    import base64

    from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, timestamp_pb2

    from kfk.connect.data import INT32_SCHEMA, OPTIONAL_TIMESTAMP_SCHEMA
    from kfk.connect.protobuf_converter import ProtobufConverter

    topic = f"proto-{uuid.uuid4().hex[:8]}"
    address = SchemaBuilder.struct().name("example.Reading.Address").field("city", STRING_SCHEMA).optional().build()
    schema = (SchemaBuilder.struct().name("example.Reading").field("sensor", STRING_SCHEMA)
              .field("level", INT32_SCHEMA).field("value", FLOAT32_SCHEMA).field("note", OPTIONAL_STRING_SCHEMA)
              .field("counts", SchemaBuilder.map(STRING_SCHEMA, INT64_SCHEMA).build())
              .field("tags", SchemaBuilder.array(STRING_SCHEMA).build())
              .field("at", OPTIONAL_TIMESTAMP_SCHEMA).field("where", address).build())
    at = datetime.datetime(2026, 5, 1, 12, 30, tzinfo=datetime.timezone.utc)
    value = (Struct(schema).put("sensor", "t1").put("level", 2).put("value", 21.5).put("counts", {"a": 1})
             .put("tags", ["x", "y"]).put("at", at).put("where", Struct(address).put("city", "Oslo")))
    converter = find("io.confluent.connect.protobuf.ProtobufConverter", ("converter",)).instantiate()
    assert isinstance(converter, ProtobufConverter)
    converter.configure({"schema.registry.url": registry.url}, False)
    data = converter.from_connect_data(topic, schema, value)
    client = SchemaRegistryClient({"url": registry.url})
    registered = client.get_latest_version(f"{topic}-value").schema
    assert registered.schema_type == "PROTOBUF"
    assert "  optional string note = 4;" in registered.schema_str.splitlines()
    assert 'import "google/protobuf/timestamp.proto";' in registered.schema_str

    serialized = SchemaRegistryClient({"url": registry.url}).get_latest_version(f"{topic}-value", fmt="serialized")
    file = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(serialized.schema.schema_str))
    pool = descriptor_pool.DescriptorPool()
    pool.AddSerializedFile(timestamp_pb2.DESCRIPTOR.serialized_pb)
    pool.Add(file)
    reading = message_factory.GetMessageClass(pool.FindMessageTypeByName("example.Reading"))
    context = SerializationContext(topic, MessageField.VALUE)
    read = ProtobufDeserializer(reading, {"use.deprecated.format": False})(data, context)
    assert (read.sensor, read.level, read.value, read.HasField("note"), dict(read.counts), list(read.tags),
            read.at.ToDatetime(tzinfo=datetime.timezone.utc), read.where.city) == (
        "t1", 2, 21.5, False, {"a": 1}, ["x", "y"], at, "Oslo")
    # confluent-kafka's serializer writing with the registered schema: the converter reads the same struct back (a
    # client of its own: the client caches a subject's latest version whatever the format asked)
    read.note = "checked"
    written = ProtobufSerializer(reading, SchemaRegistryClient({"url": registry.url}), {
        "use.deprecated.format": False, "auto.register.schemas": False, "use.latest.version": True})(read, context)
    back = converter.to_connect_data(topic, written)
    assert back.schema == schema and back.value == value.put("note", "checked")


def test_converters_name_subjects_by_the_configured_strategy(registry) -> None:
    topic = f"strategy-{uuid.uuid4().hex[:8]}"
    record_name = f"example.Count{uuid.uuid4().hex[:8]}"
    schema = SchemaBuilder.struct().name(record_name).field("n", INT64_SCHEMA).build()
    client = SchemaRegistryClient({"url": registry.url})
    for converter, strategy in ((AvroConverter(), "TopicRecordNameStrategy"),
                                (JsonSchemaConverter(), "RecordNameStrategy")):
        converter.configure({"schema.registry.url": registry.url, "key.subject.name.strategy":
                             f"io.confluent.kafka.serializers.subject.{strategy}"}, True)
        converter.from_connect_data(topic, schema, Struct(schema).put("n", 1))
    assert client.get_latest_version(f"{topic}-{record_name}").schema.schema_type == "AVRO"
    assert client.get_latest_version(record_name).schema.schema_type == "JSON"
    assert f"{topic}-key" not in client.get_subjects()
    with pytest.raises(DataException, match="Unknown subject name strategy"):
        AvroConverter().configure({"schema.registry.url": registry.url, "value.subject.name.strategy": "Nope"}, False)


def test_streams_avro_serde_in_a_state_store(registry) -> None:
    """A reduce whose store and changelog hold Avro records: the store's serde writes under the changelog's
    subject, as Kafka Streams' store serdes do."""
    builder = StreamsBuilder()
    (builder.stream("lines").group_by_key()
     .reduce(lambda total, line: GenericRecord(total.schema, id=total["id"], item=total["item"],
                                               total=total["total"] + line["total"], bulk=True), "totals")
     .to_stream().to("totals"))
    driver = TopologyTestDriver(builder.build(), {
        "application.id": f"avro-store-{uuid.uuid4().hex[:8]}", "default.key.serde": "string",
        "default.value.serde": "io.confluent.kafka.streams.serdes.avro.GenericAvroSerde",
        "schema.registry.url": registry.url})
    for order in ORDERS:
        driver.pipe_input("lines", "all", order_line(order))
    assert [record.value["total"] for record in driver.read_output("totals")] == [1.5, 3.5, 6.0]
    assert driver.get_key_value_store("totals").get("all") == {"id": 1, "item": "apple", "total": 6.0, "bulk": True}
    subjects = SchemaRegistryClient({"url": registry.url}).get_subjects()
    assert f"{driver.config.application_id}-totals-changelog-value" in subjects
