"""Avro values in Confluent's wire format as Spark columns: the Spark type of an Avro schema as Spark's own
``from_avro`` gives it (its SchemaConverters: records are structs, enums strings, bytes and fixed binary, a union
with null a nullable column, [int, long] long, [float, double] double, other unions a struct of member0, member1...;
the date, timestamp and decimal logical types as Spark's date, timestamp and decimal), and a UDF decoding each
value with its writer's schema (fetched from the registry by the id in its frame) resolved to the reader schema
(the subject's latest), so that records written with older compatible schemas fill the same columns.
"""

from __future__ import annotations

import io
import json
from typing import Any

__all__ = ["spark_type", "avro_decoder", "latest_value_schema"]

_PRIMITIVES = {"boolean": "BooleanType", "int": "IntegerType", "long": "LongType", "float": "FloatType",
               "double": "DoubleType", "bytes": "BinaryType", "string": "StringType", "null": "NullType"}


def latest_value_schema(registry_url: str, topics: list[str]) -> str:
    """The latest schema of the topics' value subjects (TopicNameStrategy); all must be the same schema."""
    from kfk.errors import InvalidConfigurationError
    from kfk.registry.serdes import RegistryClient, RegistryClientError

    client = RegistryClient(registry_url)
    schemas: dict[str, str] = {}
    for topic in topics:
        try:
            latest = client.latest(f"{topic}-value")
        except RegistryClientError as error:
            raise InvalidConfigurationError(f"no Avro schema for topic {topic} (subject {topic}-value) in the schema "
                                            f"registry at {registry_url}: {error}") from None
        if latest.get("schemaType", "AVRO") != "AVRO":
            raise InvalidConfigurationError(f"subject {topic}-value holds a {latest['schemaType']} schema, not Avro")
        schemas[topic] = latest["schema"]
    if len(set(schemas.values())) > 1:
        raise InvalidConfigurationError("the topics' latest value schemas differ; export them one at a time: "
                                        + ", ".join(sorted(schemas)))
    return next(iter(schemas.values()))


def _nullable_branches(union: list) -> tuple[list, bool]:
    branches = [branch for branch in union if branch != "null"]
    return branches, len(branches) != len(union)


def spark_type(schema: Any, named: dict[str, Any] | None = None) -> Any:
    """The Spark DataType of a fastavro-parsed schema."""
    from pyspark.sql import types as T

    named = {} if named is None else named
    if isinstance(schema, str):
        if schema in _PRIMITIVES:
            return getattr(T, _PRIMITIVES[schema])()
        return spark_type(named[schema], named)
    if isinstance(schema, list):
        branches, _ = _nullable_branches(schema)
        if not branches:
            return T.NullType()
        if len(branches) == 1:
            return spark_type(branches[0], named)
        if set(map(str, branches)) == {"int", "long"}:
            return T.LongType()
        if set(map(str, branches)) == {"float", "double"}:
            return T.DoubleType()
        return T.StructType([T.StructField(f"member{index}", spark_type(branch, named), True)
                             for index, branch in enumerate(branches)])
    kind, logical = schema["type"], schema.get("logicalType")
    if kind in ("record", "error"):
        named[schema["name"]] = schema
        return T.StructType([T.StructField(field["name"], spark_type(field["type"], named),
                                           _nullable(field["type"])) for field in schema["fields"]])
    if kind == "enum":
        named[schema["name"]] = schema
        return T.StringType()
    if kind == "fixed":
        named[schema["name"]] = schema
        return T.DecimalType(schema["precision"], schema.get("scale", 0)) if logical == "decimal" else T.BinaryType()
    if kind == "array":
        return T.ArrayType(spark_type(schema["items"], named), _nullable(schema["items"]))
    if kind == "map":
        return T.MapType(T.StringType(), spark_type(schema["values"], named), _nullable(schema["values"]))
    if logical == "date" and kind == "int":
        return T.DateType()
    if logical in ("timestamp-millis", "timestamp-micros") and kind == "long":
        return T.TimestampType()
    if logical in ("local-timestamp-millis", "local-timestamp-micros") and kind == "long":
        return T.TimestampNTZType()
    if logical == "decimal" and kind == "bytes":
        return T.DecimalType(schema["precision"], schema.get("scale", 0))
    return spark_type(kind, named)


def _nullable(schema: Any) -> bool:
    return schema == "null" or (isinstance(schema, list) and "null" in schema)


def _spark_value(value: Any, schema: Any, named: dict[str, Any]) -> Any:
    """A decoded value shaped as spark_type(schema) wants it (only general unions need reshaping)."""
    if value is None:
        return None
    if isinstance(schema, str):
        return _spark_value(value, named[schema], named) if schema in named else value
    if isinstance(schema, list):
        branches, _ = _nullable_branches(schema)
        if len(branches) == 1:
            return _spark_value(value, branches[0], named)
        if set(map(str, branches)) in ({"int", "long"}, {"float", "double"}):
            return value
        for index, branch in enumerate(branches):
            if _matches(value, branch, named):
                return {f"member{index}": _spark_value(value, branch, named)}
        return None
    kind = schema["type"]
    if kind in ("record", "error"):
        return {field["name"]: _spark_value(value.get(field["name"]), field["type"], named)
                for field in schema["fields"]}
    if kind == "array":
        return [_spark_value(item, schema["items"], named) for item in value]
    if kind == "map":
        return {key: _spark_value(item, schema["values"], named) for key, item in value.items()}
    return value


def _matches(value: Any, schema: Any, named: dict[str, Any]) -> bool:
    if isinstance(schema, str) and schema in named:
        schema = named[schema]
    kind = schema if isinstance(schema, str) else schema["type"]
    checks = {"boolean": bool, "int": int, "long": int, "float": float, "double": float, "string": str,
              "bytes": bytes, "enum": str, "fixed": bytes, "array": list, "map": dict, "record": dict}
    expected = checks.get(kind)
    if expected is int and isinstance(value, bool):
        return False
    return expected is not None and isinstance(value, expected)


def avro_decoder(reader_schema_text: str, registry_url: str):
    """A function from a framed value to the Python value of spark_type(reader schema): run in Spark's Python
    workers, each keeping the writer schemas it fetched."""
    writers: dict[int, Any] = {}
    state: dict[str, Any] = {}

    def decode(data: bytes | None) -> Any:
        if data is None:
            return None
        import fastavro

        from kfk.registry.serdes import RegistryClient, unframe

        if "reader" not in state:
            state["named"] = {}
            state["reader"] = fastavro.parse_schema(json.loads(reader_schema_text), named_schemas=state["named"])
            state["client"] = RegistryClient(registry_url)
        schema_id, payload = unframe(bytes(data))
        writer = writers.get(schema_id)
        if writer is None:
            registered = state["client"].schema(schema_id)
            writer = writers[schema_id] = fastavro.parse_schema(json.loads(registered["schema"]))
        value = fastavro.schemaless_reader(io.BytesIO(payload), writer, state["reader"])
        return _spark_value(value, state["reader"], state["named"])
    return decode
