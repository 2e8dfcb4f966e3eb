"""Converters and the offsets file against bytes Apache Kafka's Connect 4.3.1 wrote (captured from a live
connect-standalone worker: the FileStreamSource's records with JsonConverter, and its offsets file)."""

import datetime
import decimal

import pytest

from kfk.connect.converters import ByteArrayConverter, SimpleHeaderConverter, StringConverter
from kfk.connect.data import (
    BYTES_SCHEMA,
    FLOAT64_SCHEMA,
    INT8_SCHEMA,
    INT32_SCHEMA,
    OPTIONAL_FLOAT32_SCHEMA,
    OPTIONAL_STRING_SCHEMA,
    STRING_SCHEMA,
    TIMESTAMP_SCHEMA,
    SchemaBuilder,
    Struct,
    date_schema,
    decimal_schema,
)
from kfk.connect.errors import DataException
from kfk.connect.json_converter import ENVELOPE_ERROR, JsonConverter
from kfk.connect.offsets import offset_key, offset_value, read_java_hashmap, write_java_hashmap

#: java.offsets of Kafka's connect-standalone after FileStreamSource read 22 characters of /tmp/connect-explore/in.txt
JAVA_OFFSETS_FILE = bytes.fromhex(
    "aced0005737200116a6176612e7574696c2e486173684d61700507dac1c31660d103000246000a6c6f6164466163746f72490009"
    "7468726573686f6c6478703f4000000000000c77080000001000000001757200025b42acf317f8060854e0020000787000000040"
    "5b226c6f63616c2d66696c652d736f75726365222c7b2266696c656e616d65223a222f746d702f636f6e6e6563742d6578706c6f"
    "72652f696e2e747874227d5d7571007e00020000000f7b22706f736974696f6e223a32327d78")


def json_converter(schemas_enable: bool, **extra: str) -> JsonConverter:
    converter = JsonConverter()
    converter.configure({"schemas.enable": str(schemas_enable).lower(), **extra}, False)
    return converter


def test_json_converter_writes_javas_envelope_for_file_source_lines():
    # the exact values Kafka's worker produced for the lines "line one" and "ünï"
    assert json_converter(True).from_connect_data("t", STRING_SCHEMA, "line one") == \
        b'{"schema":{"type":"string","optional":false},"payload":"line one"}'
    assert json_converter(True).from_connect_data("t", STRING_SCHEMA, "ünï") == \
        b'{"schema":{"type":"string","optional":false},"payload":"\xc3\xbcn\xc3\xaf"}'
    assert json_converter(False).from_connect_data("t", STRING_SCHEMA, "line one") == b'"line one"'
    assert json_converter(True).from_connect_data("t", None, None) is None  # a null key stays null


def test_json_converter_struct_schema_layout_and_round_trip():
    schema = (SchemaBuilder.struct().name("com.example.Row").version(2).doc("a row")
              .field("id", INT32_SCHEMA).field("ratio", OPTIONAL_FLOAT32_SCHEMA)
              .field("score", FLOAT64_SCHEMA)
              .field("tags", SchemaBuilder.map(STRING_SCHEMA, INT8_SCHEMA).build())
              .field("pairs", SchemaBuilder.map(INT32_SCHEMA, STRING_SCHEMA).optional().build())
              .field("raw", BYTES_SCHEMA).field("at", TIMESTAMP_SCHEMA)
              .field("day", date_schema().build()).field("amount", decimal_schema(2).build())
              .field("note", SchemaBuilder(OPTIONAL_STRING_SCHEMA.type).optional().default_value("n/a").build())
              .build())
    value = (Struct(schema).put("id", 7).put("ratio", 0.1).put("score", 1e-5).put("tags", {"a": 1})
             .put("pairs", {1: "x"}).put("raw", b"\x00\xff").put("at", datetime.datetime(2024, 1, 2, 3, 4, 5,
                                                                                          tzinfo=datetime.UTC))
             .put("day", datetime.date(2024, 1, 2)).put("amount", decimal.Decimal("12.34")).put("note", None))
    written = json_converter(True).from_connect_data("t", schema, value)
    assert written == (
        b'{"schema":{"type":"struct","fields":[{"type":"int32","optional":false,"field":"id"},'
        b'{"type":"float32","optional":true,"field":"ratio"},'
        b'{"type":"float64","optional":false,"field":"score"},'
        b'{"type":"map","keys":{"type":"string","optional":false},"values":{"type":"int8","optional":false},'
        b'"optional":false,"field":"tags"},'
        b'{"type":"map","keys":{"type":"int32","optional":false},"values":{"type":"string","optional":false},'
        b'"optional":true,"field":"pairs"},'
        b'{"type":"bytes","optional":false,"field":"raw"},'
        b'{"type":"int64","optional":false,"name":"org.apache.kafka.connect.data.Timestamp","version":1,'
        b'"field":"at"},'
        b'{"type":"int32","optional":false,"name":"org.apache.kafka.connect.data.Date","version":1,"field":"day"},'
        b'{"type":"bytes","optional":false,"name":"org.apache.kafka.connect.data.Decimal","version":1,'
        b'"parameters":{"scale":"2"},"field":"amount"},'
        b'{"type":"string","optional":true,"default":"n/a","field":"note"}],'
        b'"optional":false,"name":"com.example.Row","version":2,"doc":"a row"},'
        b'"payload":{"id":7,"ratio":0.1,"score":1.0E-5,"tags":{"a":1},"pairs":[[1,"x"]],"raw":"AP8=",'
        b'"at":1704164645000,"day":19724,"amount":"BNI=","note":"n/a"}}')
    schema_back, value_back = json_converter(True).to_connect_data("t", written)
    assert schema_back == schema
    assert value_back.get("amount") == decimal.Decimal("12.34")
    assert value_back.get("at") == value.get("at")
    assert value_back.get("pairs") == {1: "x"}


def test_json_converter_reading_errors_and_schemaless_values():
    with pytest.raises(DataException) as error:
        json_converter(True).to_connect_data("t", b'{"a":1}')
    assert str(error.value) == ENVELOPE_ERROR
    with pytest.raises(DataException, match="Converting byte\\[\\] to Kafka Connect data failed"):
        json_converter(False).to_connect_data("t", b"{not json")
    assert json_converter(False).to_connect_data("t", b'{"a":[1,2.5,"x",null]}') == (None, {"a": [1, 2.5, "x", None]})
    assert json_converter(False).from_connect_data("t", None, {"k": [1, True, None, 2.0]}) == \
        b'{"k":[1,true,null,2.0]}'
    assert json_converter(False).from_connect_data("t", STRING_SCHEMA, "tab\there\x01") == b'"tab\\there\\u0001"'
    numeric = json_converter(False, **{"decimal.format": "NUMERIC"})
    assert numeric.from_connect_data("t", decimal_schema(2).build(), decimal.Decimal("-1.50")) == b"-1.50"
    with pytest.raises(DataException, match="null value for field that is required"):
        json_converter(True).from_connect_data("t", STRING_SCHEMA, None)


def test_string_bytes_and_header_converters():
    string = StringConverter()
    string.configure({}, False)
    assert string.from_connect_data("t", None, True) == b"true"
    assert string.from_connect_data("t", None, 1.0) == b"1.0"
    assert string.to_connect_data("t", "é".encode()) == (OPTIONAL_STRING_SCHEMA, "é")
    assert string.to_connect_data("t", None).value is None
    raw = ByteArrayConverter()
    assert raw.from_connect_data("t", BYTES_SCHEMA, b"\x01") == b"\x01"
    with pytest.raises(DataException, match="Invalid schema type for ByteArrayConverter: STRING"):
        raw.from_connect_data("t", STRING_SCHEMA, "x")
    headers = SimpleHeaderConverter()
    assert headers.to_connect_header("t", "h", b"42") == (INT8_SCHEMA, 42)
    assert headers.to_connect_header("t", "h", b"true").value is True
    assert headers.to_connect_header("t", "h", b"text") == (STRING_SCHEMA, "text")
    assert headers.from_connect_header("t", "h", None, 300) == b"300"


def test_offsets_file_is_javas_serialized_hashmap():
    entries = read_java_hashmap(JAVA_OFFSETS_FILE)
    key = offset_key("local-file-source", {"filename": "/tmp/connect-explore/in.txt"})
    assert entries == {key: offset_value({"position": 22})}
    assert write_java_hashmap(entries) == JAVA_OFFSETS_FILE  # byte for byte what Kafka wrote
    many = {f'["c",{{"n":{i}}}]'.encode(): (b"{}" if i % 3 else None) for i in range(40)}
    assert read_java_hashmap(write_java_hashmap(many)) == many
