"""`kfk spark-export --value-format avro`: Avro values in Confluent's wire format (written by confluent-kafka's
AvroSerializer with two compatible schema versions) exported to Parquet through a real local SparkSession, as typed
columns of the subject's latest schema (records of the older version get the new field's default), as Spark's
from_avro types them."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")

import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402
from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.schema_registry import SchemaRegistryClient  # noqa: E402
from confluent_kafka.schema_registry.avro import AvroSerializer  # noqa: E402
from confluent_kafka.serialization import MessageField, SerializationContext  # noqa: E402

from tests.registry.conftest import RegistryProcess  # noqa: E402
from tests.spark.test_export import export  # noqa: E402

pytestmark = [pytest.mark.spark, pytest.mark.integration]

V1 = {"type": "record", "name": "Reading", "fields": [
    {"name": "sensor", "type": "string"},
    {"name": "celsius", "type": "double"},
    {"name": "day", "type": {"type": "int", "logicalType": "date"}},
    {"name": "tags", "type": {"type": "array", "items": "string"}},
    {"name": "level", "type": {"type": "enum", "name": "Level", "symbols": ["LOW", "HIGH"]}},
    {"name": "note", "type": ["null", "string"], "default": None}]}
V2 = {**V1, "fields": [*V1["fields"], {"name": "count", "type": "long", "default": -1}]}


def test_avro_topic_exported_as_typed_columns(spark: Any, kfk_broker: str, tmp_path: Path) -> None:
    registry = RegistryProcess(kfk_broker, "_schemas", tmp_path / "registry.log")
    try:
        client = SchemaRegistryClient({"url": registry.url})
        topic = f"readings-{uuid.uuid4().hex[:6]}"
        producer = Producer({"bootstrap.servers": kfk_broker})
        import datetime

        day = datetime.date(2026, 12, 6)
        for schema, rows in ((V1, [{"sensor": "a", "celsius": 20.5, "day": day, "tags": ["x"], "level": "LOW",
                                    "note": None}]),
                             (V2, [{"sensor": "b", "celsius": -3.0, "day": day, "tags": [], "level": "HIGH",
                                    "note": "cold", "count": 7}])):
            serializer = AvroSerializer(client, json.dumps(schema))
            for row in rows:
                producer.produce(topic, serializer(row, SerializationContext(topic, MessageField.VALUE)))
        assert producer.flush(30) == 0

        output = tmp_path / "out"
        result = export("--bootstrap-server", kfk_broker, "--topic", topic, "--output", str(output),
                        "--value-format", "avro", "--schema-registry-url", registry.url, "--json")
        assert result.exit_code == 0, result.output
        table = pq.read_table(output)
        schema = table.schema
        assert schema.field("sensor").type == pa.string()
        assert schema.field("celsius").type == pa.float64()
        assert schema.field("day").type == pa.date32()
        assert schema.field("tags").type.value_type == pa.string()
        assert schema.field("level").type == pa.string()
        assert schema.field("count").type == pa.int64()
        rows = sorted(table.select(["sensor", "celsius", "day", "tags", "level", "note", "count"]).to_pylist(),
                      key=lambda row: row["sensor"])
        assert rows == [
            {"sensor": "a", "celsius": 20.5, "day": day, "tags": ["x"], "level": "LOW", "note": None, "count": -1},
            {"sensor": "b", "celsius": -3.0, "day": day, "tags": [], "level": "HIGH", "note": "cold", "count": 7}]
    finally:
        registry.stop()
