"""The single message transforms and predicates, configured as a connector's properties configure them."""

import datetime

import pytest

from kfk.connect.config_def import ConfigException
from kfk.connect.connector_config import build_transformations
from kfk.connect.data import INT32_SCHEMA, INT64_SCHEMA, STRING_SCHEMA, SchemaBuilder, Struct, Type
from kfk.connect.errors import DataException
from kfk.connect.records import Headers, SinkRecord, SourceRecord

SCHEMA = SchemaBuilder.struct().name("row").field("id", INT32_SCHEMA).field("name", STRING_SCHEMA) \
    .field("at", INT64_SCHEMA).build()


PREDICATES = "org.apache.kafka.connect.transforms.predicates."


def sink(value, schema=None, topic="orders", headers=None):
    return SinkRecord(topic, 3, None, None, schema, value, 1_700_000_000_000, headers or Headers(), kafka_offset=42)


def chain(**props):
    config = {key.replace("__", "."): value for key, value in props.items()}
    return build_transformations(config)


def test_insert_field_schemaless_and_with_schema():
    transforms = chain(transforms="ins", transforms__ins__type="org.apache.kafka.connect.transforms.InsertField$Value",
                       **{"transforms.ins.topic.field": "t", "transforms.ins.partition.field": "p!",
                          "transforms.ins.offset.field": "o", "transforms.ins.timestamp.field": "ts",
                          "transforms.ins.static.field": "src", "transforms.ins.static.value": "db1"})
    out = transforms.apply(sink({"id": 1}))
    assert out.value == {"id": 1, "t": "orders", "p": 3, "o": 42, "ts": 1_700_000_000_000, "src": "db1"}
    struct = Struct(SCHEMA).put("id", 1).put("name", "a").put("at", 5)
    out = transforms.apply(sink(struct, SCHEMA))
    assert [field.name for field in out.value_schema.fields] == ["id", "name", "at", "t", "p", "o", "ts", "src"]
    assert out.value_schema.field("p").schema.optional is False and out.value_schema.field("t").schema.optional
    assert out.value.get("ts") == datetime.datetime.fromtimestamp(1_700_000_000, datetime.UTC)
    assert transforms.apply(sink(None)).value is None  # tombstones pass
    with pytest.raises(DataException, match="Only SinkRecord supported"):
        transforms.apply(SourceRecord("t", None, None, None, None, {"a": 1}))


def test_replace_field_and_mask_field():
    transforms = chain(transforms="r,m", transforms__r__type="ReplaceField$Value", transforms__r__exclude="at",
                       transforms__r__renames="name:label", transforms__m__type="MaskField$Value",
                       transforms__m__fields="id")
    struct = Struct(SCHEMA).put("id", 9).put("name", "a").put("at", 5)
    out = transforms.apply(sink(struct, SCHEMA))
    assert [field.name for field in out.value_schema.fields] == ["id", "label"]
    assert (out.value.get("id"), out.value.get("label")) == (0, "a")
    out = transforms.apply(sink({"id": 9, "name": "a", "at": 5}))
    assert out.value == {"id": 0, "label": "a"}
    replaced = chain(transforms="m", transforms__m__type="org.apache.kafka.connect.transforms.MaskField$Value",
                     transforms__m__fields="name,id", transforms__m__replacement="77")
    assert replaced.apply(sink({"id": 9, "name": "secret"})).value == {"id": 77, "name": "77"}
    with pytest.raises(ConfigException, match="fields"):
        chain(transforms="m", transforms__m__type="MaskField$Value")


def test_cast_whole_value_and_fields():
    whole = chain(transforms="c", transforms__c__type="Cast$Value", transforms__c__spec="int8")
    out = whole.apply(sink(300, INT32_SCHEMA))
    assert (out.value_schema.type, out.value) == (Type.INT8, 44)  # Java's narrowing
    fields = chain(transforms="c", transforms__c__type="org.apache.kafka.connect.transforms.Cast$Value",
                   transforms__c__spec="id:string,at:float64,name:boolean")
    out = fields.apply(sink(Struct(SCHEMA).put("id", 1).put("name", "true").put("at", 5), SCHEMA))
    assert (out.value.get("id"), out.value.get("at"), out.value.get("name")) == ("1", 5.0, True)
    assert out.value_schema.field("at").schema.type is Type.FLOAT64
    assert fields.apply(sink({"id": 2, "at": "7", "other": 1})).value == {"id": "2", "at": 7.0, "other": 1}
    with pytest.raises(ConfigException, match="Invalid type found in casting spec: int128"):
        chain(transforms="c", transforms__c__type="Cast$Value", transforms__c__spec="a:int128")


def test_timestamp_converter():
    to_string = chain(transforms="ts", transforms__ts__type="TimestampConverter$Value", transforms__ts__field="at",
                      **{"transforms.ts.target.type": "string", "transforms.ts.format": "yyyy-MM-dd'T'HH:mm:ss.SSS"})
    out = to_string.apply(sink({"at": 1_700_000_000_123}))
    assert out.value == {"at": "2023-11-14T22:13:20.123"}
    back = chain(transforms="ts", transforms__ts__type="TimestampConverter$Value", transforms__ts__field="at",
                 **{"transforms.ts.target.type": "unix", "transforms.ts.format": "yyyy-MM-dd'T'HH:mm:ss.SSS",
                    "transforms.ts.unix.precision": "seconds"})
    assert back.apply(out).value == {"at": 1_700_000_000}
    to_date = chain(transforms="ts", transforms__ts__type="TimestampConverter$Value",
                    **{"transforms.ts.target.type": "Date"})
    out = to_date.apply(sink(1_700_000_000_123, INT64_SCHEMA))
    assert out.value == datetime.date(2023, 11, 14)
    assert out.value_schema.name == "org.apache.kafka.connect.data.Date"
    with pytest.raises(ConfigException, match="requires format"):
        chain(transforms="ts", transforms__ts__type="TimestampConverter$Value",
              **{"transforms.ts.target.type": "string"})


def test_regex_router_and_filter_with_predicates():
    router = chain(transforms="r", transforms__r__type="org.apache.kafka.connect.transforms.RegexRouter",
                   transforms__r__regex="(.*)ders", transforms__r__replacement="$1-routed")
    assert router.apply(sink({})).topic == "or-routed"
    assert router.apply(sink({}, topic="orders-x")).topic == "orders-x"  # the whole name must match
    drop_tombstones = chain(transforms="f", transforms__f__type="Filter", transforms__f__predicate="tomb",
                            predicates="tomb", predicates__tomb__type="RecordIsTombstone")
    assert drop_tombstones.apply(sink(None)) is None
    assert drop_tombstones.apply(sink({"a": 1})) is not None
    keep_only_orders = chain(transforms="f", transforms__f__type="org.apache.kafka.connect.transforms.Filter",
                             transforms__f__predicate="isOrders", transforms__f__negate="true",
                             predicates="isOrders",
                             predicates__isOrders__type=PREDICATES + "TopicNameMatches",
                             predicates__isOrders__pattern="ord.*")
    assert keep_only_orders.apply(sink({}, topic="orders")) is not None
    assert keep_only_orders.apply(sink({}, topic="payments")) is None
    by_header = chain(transforms="f", transforms__f__type="Filter", transforms__f__predicate="h", predicates="h",
                      predicates__h__type="HasHeaderKey", predicates__h__name="skip")
    assert by_header.apply(sink({}, headers=Headers().add("skip", "1"))) is None
    assert by_header.apply(sink({}, headers=Headers().add("keep", "1"))) is not None


def test_value_to_key_with_schema_and_schemaless():
    transforms = chain(transforms="key", transforms__key__type="org.apache.kafka.connect.transforms.ValueToKey",
                       transforms__key__fields="id,name")
    out = transforms.apply(sink(Struct(SCHEMA).put("id", 7).put("name", "a").put("at", 5), SCHEMA))
    assert [(field.name, field.schema) for field in out.key_schema.fields] == [("id", INT32_SCHEMA),
                                                                                ("name", STRING_SCHEMA)]
    assert (out.key.get("id"), out.key.get("name")) == (7, "a") and out.value.get("at") == 5
    assert transforms.apply(sink({"id": 1, "name": "b", "x": 2})).key == {"id": 1, "name": "b"}
    missing = chain(transforms="key", transforms__key__type="org.apache.kafka.connect.transforms.ValueToKey",
                    transforms__key__fields="nope")
    with pytest.raises(DataException, match="Field does not exist: nope"):
        missing.apply(sink(Struct(SCHEMA).put("id", 7).put("name", "a").put("at", 5), SCHEMA))
