"""What dump-log's --offsets-decoder, --transaction-log-decoder and --cluster-metadata-decoder print for a record
of __consumer_offsets, __transaction_state or __cluster_metadata: Kafka's DumpLogSegments JSON, decoded with the
generated record codecs (kfk/protocol/group_records, transaction_records, metadata_records).

- A coordinator record (offsets, transaction log) prints ``key: {"type":"<key version>","data":{...}}`` and
  ``payload: {"version":"<value version>","data":{...}}`` (``<DELETE>`` for a tombstone). The key's int16 prefix
  is the record type, which is also the version of its key schema (OffsetCommitKey 0-1, GroupMetadataKey 2, ...);
  the value schema is the key's with Value for Key.
- A metadata record prints only ``payload: {"type":"TOPIC_RECORD","version":0,"data":{...}}``.
Field names are Kafka's JSON names (the schema's, first letter lower-case), byte fields base64 and uuids as Kafka
writes them; as Kafka's generated JsonConverters, only the fields of the record's version are printed, and a tagged
field only when it is not at its default (the generated json_fields tables). A record that does not decode prints
Kafka's "Error at offset N, skipping. ..." in its place.
"""

from __future__ import annotations

import base64
import json
import re
import struct
import uuid
from collections.abc import Callable
from types import ModuleType
from typing import Any

from kfk.common.uuids import uuid_to_base64
from kfk.protocol import group_records, transaction_records
from kfk.protocol.group_records.json_fields import JSON_FIELDS as GROUP_JSON_FIELDS
from kfk.protocol.message import Message, Struct
from kfk.protocol.metadata_frame import read_frame_header
from kfk.protocol.metadata_records import RECORD_TYPES, record_type_class
from kfk.protocol.metadata_records.json_fields import JSON_FIELDS as METADATA_JSON_FIELDS
from kfk.protocol.transaction_records.json_fields import JSON_FIELDS as TRANSACTION_JSON_FIELDS

Decoded = tuple[str | None, str | None]
"""What a decoder prints for a record: its key and payload text (None: not printed)."""

_INT16 = struct.Struct(">h")


def _json_name(attribute: str) -> str:
    head, *rest = attribute.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def _plain(value: Any, version: int, layouts: dict[str, tuple]) -> Any:
    """A decoded record as Kafka's generated JsonConverter writes it at `version`: the fields that version carries,
    in schema order, a tagged field only when it is not at its default (`layouts`: the schema's json_fields)."""
    if isinstance(value, Struct):
        default = type(value)()
        data = {}
        for attribute, low, high, tagged_low, tagged_high in layouts[type(value).__name__]:
            item = getattr(value, attribute)
            if low <= version <= high and not (tagged_low <= version <= tagged_high
                                               and item == getattr(default, attribute)):
                data[_json_name(attribute)] = _plain(item, version, layouts)
        return data
    if isinstance(value, list):
        return [_plain(item, version, layouts) for item in value]
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode()
    if isinstance(value, uuid.UUID):
        return uuid_to_base64(value)
    return value


def _json(data: dict[str, Any]) -> str:
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False)


def _key_schema(package: ModuleType, record_type: int) -> type[Message] | None:
    """The key schema of a record type (the int16 a coordinator record's key opens with)."""
    name = package.RECORD_TYPES.get(record_type)
    return None if name is None else package.schema_class(name)


def _coordinator_record(package: ModuleType, json_fields: dict[str, dict[str, tuple]],
                        topic_decoder: str) -> Callable[[Any], Decoded]:
    def decode(record) -> Decoded:
        if record.key is None:
            return (f"Failed to decode message at offset {record.offset} using {topic_decoder} decoder (message "
                    f"had a missing key)", None)
        try:
            record_type = _INT16.unpack_from(record.key)[0]
            key_schema = _key_schema(package, record_type)
            if key_schema is None:
                return f"Unknown record type {record_type} at offset {record.offset}, skipping.", None
            key_data = key_schema.decode(record.key, 0, 2)  # every key schema has the one version 0
            key = _json({"type": str(record_type),
                         "data": _plain(key_data, 0, json_fields[key_schema.NAME])})
            if record.value is None:
                return key, "<DELETE>"
            version = _INT16.unpack_from(record.value)[0]
            value_schema = package.schema_class(key_schema.NAME.removesuffix("Key") + "Value")
            value = value_schema.decode(record.value, version, 2)
            return key, _json({"version": str(version),
                               "data": _plain(value, version, json_fields[value_schema.NAME])})
        except Exception as error:  # noqa: BLE001 - one bad record is reported in place, as Kafka's tool does
            return f"Error at offset {record.offset}, skipping. {error}", None

    return decode


def _record_type_name(schema: type[Message]) -> str:
    """TopicRecord -> TOPIC_RECORD (Kafka's MetadataRecordType names)."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", schema.NAME).upper()


def cluster_metadata_record(record) -> Decoded:
    """A __cluster_metadata record: no key, the payload the framed metadata record."""
    try:
        record_type, version, position = read_frame_header(record.value)
        if record_type not in RECORD_TYPES:
            raise ValueError(f"Unknown metadata record type {record_type}")
        schema = record_type_class(record_type)
        message, _ = schema.decode_from(record.value, version, position)
        return None, _json({"type": _record_type_name(schema), "version": version,
                            "data": _plain(message, version, METADATA_JSON_FIELDS[schema.NAME])})
    except Exception as error:  # noqa: BLE001 - as above
        return None, f"Error at {record.offset}, skipping. {error}"


offsets_record = _coordinator_record(group_records, GROUP_JSON_FIELDS, "offset topic")
transaction_log_record = _coordinator_record(transaction_records, TRANSACTION_JSON_FIELDS, "transaction log")
