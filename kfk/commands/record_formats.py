"""How console-consume turns records into output: Kafka's deserializers for keys and values, and the formatters
(--formatter): Kafka's DefaultMessageFormatter, its LoggingMessageFormatter (the same output, plus a log line per
record on stderr), and JSON lines (kfk's own, one object per record, for jq and scripts).

The deserializers produce what Kafka's console consumer prints with the same class: StringDeserializer (UTF-8,
invalid bytes replaced), BytesDeserializer (printable ASCII as is, every other byte and the backslash as
``\\xHH``), LongDeserializer / IntegerDeserializer (big-endian, exactly 8 / 4 bytes), DoubleDeserializer (8 bytes,
printed as Java prints a double: ``1.0``, ``1.0E10``) and UUIDDeserializer (the UUID's text). Without one, the
default formatter writes the raw bytes: what was produced is what is printed.
"""

from __future__ import annotations

import json
import math
import struct
import sys
import time
import uuid
from collections.abc import Callable
from decimal import Decimal
from typing import Any, BinaryIO

TRUE_VALUES = ("true", "1", "yes")

Deserializer = Callable[[bytes], Any]


class DeserializationError(ValueError):
    """A key or value the chosen deserializer cannot read (--skip-message-on-error skips its record)."""


def unescape(text: str) -> str:
    """Separators are given as shell arguments: accept \\t and \\n as Kafka users type them."""
    return text.encode("utf-8").decode("unicode_escape")


def _string(data: bytes) -> str:
    return data.decode("utf-8", "replace")


def _bytes(data: bytes) -> str:
    return "".join(chr(byte) if 0x20 <= byte <= 0x7E and byte != 0x5C else f"\\x{byte:02X}" for byte in data)


def _fixed(fmt: str, name: str) -> Deserializer:
    size = struct.calcsize(fmt)

    def read(data: bytes) -> Any:
        if len(data) != size:
            raise DeserializationError(f"Size of data received by {name} is not {size}")
        return struct.unpack(fmt, data)[0]

    return read


def _uuid(data: bytes) -> str:
    text = data.decode("utf-8", "replace")
    try:
        if text.count("-") != 4:
            raise ValueError(text)
        return str(uuid.UUID(text))
    except ValueError:
        raise DeserializationError(f"Error parsing data into UUID: {text!r}") from None


def java_double(value: float) -> str:
    """A double as Java's Double.toString writes it: shortest digits, ``.0`` on whole numbers, and E notation
    below 10^-3 and from 10^7 on."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if math.copysign(1, value) < 0 else "0.0"
    sign = "-" if value < 0 else ""
    magnitude = abs(value)
    digits_tuple, exponent = Decimal(repr(magnitude)).normalize().as_tuple()[1:]
    digits = "".join(map(str, digits_tuple))
    point = len(digits) + exponent  # the decimal point's place in the digits
    if 1e-3 <= magnitude < 1e7:
        if point <= 0:
            return f"{sign}0.{'0' * -point}{digits}"
        whole, fraction = digits[:point].ljust(point, "0"), digits[point:]
        return f"{sign}{whole}.{fraction or '0'}"
    return f"{sign}{digits[0]}.{digits[1:] or '0'}E{point - 1}"


def _double(data: bytes) -> str:
    return java_double(_fixed(">d", "Deserializer")(data))


DESERIALIZERS: dict[str, Deserializer] = {
    "string": _string,
    "bytes": _bytes,
    "long": _fixed(">q", "LongDeserializer"),
    "int": _fixed(">i", "IntegerDeserializer"),
    "double": _double,
    "uuid": _uuid,
}

#: Kafka's class names (simple or qualified) for the same deserializers; ByteArrayDeserializer is "no
#: deserializer": the raw bytes.
_KAFKA_CLASSES = {"StringDeserializer": "string", "BytesDeserializer": "bytes", "LongDeserializer": "long",
                  "IntegerDeserializer": "int", "DoubleDeserializer": "double", "UUIDDeserializer": "uuid",
                  "ByteArrayDeserializer": None}


def find_deserializer(name: str | None) -> Deserializer | None:
    """The deserializer a --key-deserializer / --value-deserializer names (a short name or Kafka's class name);
    None for the raw bytes. An unknown name raises ValueError naming the known ones."""
    if name is None:
        return None
    simple = name.rsplit(".", 1)[-1]
    if simple in _KAFKA_CLASSES:
        short = _KAFKA_CLASSES[simple]
        return None if short is None else DESERIALIZERS[short]
    if name.lower() in DESERIALIZERS:
        return DESERIALIZERS[name.lower()]
    raise ValueError(f"unknown deserializer {name!r} (one of {', '.join(DESERIALIZERS)}, or Kafka's class name)")


class MessageFormatter:
    """Kafka's DefaultMessageFormatter: timestamp, partition, offset, delivery count, leader epoch, headers, key,
    value, each followed by the key.separator when something else follows it, then line.separator."""

    def __init__(self, properties: dict[str, str], key_deserializer: Deserializer | None = None,
                 value_deserializer: Deserializer | None = None) -> None:
        def flag(name: str, default: str = "false") -> bool:
            return properties.get(name, default).lower() in TRUE_VALUES

        self.print_timestamp = flag("print.timestamp")
        self.print_partition = flag("print.partition")
        self.print_offset = flag("print.offset")
        self.print_delivery = flag("print.delivery")
        self.print_epoch = flag("print.epoch")
        self.print_headers = flag("print.headers")
        self.print_key = flag("print.key")
        self.print_value = flag("print.value", "true")
        self.key_separator = unescape(properties.get("key.separator", "\t")).encode()
        self.line_separator = unescape(properties.get("line.separator", "\n")).encode()
        self.headers_separator = unescape(properties.get("headers.separator", ",")).encode()
        self.headers_key_separator = unescape(properties.get("headers.key.separator", ":")).encode()
        self.null_literal = properties.get("null.literal", "null").encode()
        self.key_deserializer = key_deserializer
        self.value_deserializer = value_deserializer

    def _text(self, data: bytes | None, deserializer: Deserializer | None) -> bytes:
        if data is None:
            return self.null_literal
        return data if deserializer is None else str(deserializer(data)).encode()

    def format(self, record) -> bytes:
        fields: list[bytes] = []
        if self.print_timestamp:
            kind = "LogAppendTime" if record.timestamp_type == 1 else "CreateTime"
            fields.append(f"{kind}:{record.timestamp}".encode() if record.timestamp >= 0 else b"NO_TIMESTAMP")
        if self.print_partition:
            fields.append(f"Partition:{record.partition}".encode())
        if self.print_offset:
            fields.append(f"Offset:{record.offset}".encode())
        if self.print_delivery:  # a share consumer's records have a delivery count, others none
            delivery_count = getattr(record, "delivery_count", None)
            fields.append(f"Delivery:{'NOT_PRESENT' if delivery_count is None else delivery_count}".encode())
        if self.print_epoch:
            epoch = record.leader_epoch
            fields.append(f"Epoch:{'NOT_PRESENT' if epoch is None or epoch < 0 else epoch}".encode())
        if self.print_headers:
            fields.append(self.headers_separator.join(
                name.encode() + self.headers_key_separator + (value if value is not None else self.null_literal)
                for name, value in record.headers) if record.headers else b"NO_HEADERS")
        if self.print_key:
            fields.append(self._text(record.key, self.key_deserializer))
        if self.print_value:
            fields.append(self._text(record.value, self.value_deserializer))
        return self.key_separator.join(fields) + self.line_separator

    def write(self, record, out: BinaryIO) -> None:
        out.write(self.format(record))


class LoggingMessageFormatter(MessageFormatter):
    """Kafka's LoggingMessageFormatter: the default output, and for each record an INFO log line on stderr with
    its timestamp, key and value."""

    def write(self, record, out: BinaryIO) -> None:
        line = self.format(record)
        out.write(line)
        kind = "LogAppendTime" if record.timestamp_type == 1 else "CreateTime"
        stamp = f"{kind}:{record.timestamp}, " if record.timestamp >= 0 else ""
        key = "null" if record.key is None else self._text(record.key, self.key_deserializer).decode("utf-8",
                                                                                                     "replace")
        value = "null" if record.value is None else self._text(record.value, self.value_deserializer).decode(
            "utf-8", "replace")
        now = time.time()
        logged = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(now)) + f",{int(now * 1000) % 1000:03d}"
        sys.stderr.write(f"[{logged}] INFO {stamp}key:{key}, value:{value} (kfk.console.LoggingMessageFormatter)\n")
        sys.stderr.flush()


class JsonMessageFormatter(MessageFormatter):
    """One JSON object per line: topic, partition, offset, timestamp and its type, headers, key and value. Keys
    and values are text (UTF-8) unless a deserializer says otherwise (long, int and double give numbers)."""

    def format(self, record) -> bytes:
        def field(data: bytes | None, deserializer: Deserializer | None) -> Any:
            if data is None:
                return None
            result = (deserializer or _string)(data)
            if hasattr(result, "json_value"):  # a schema-registry format's JSON: embedded as the value it encodes
                return result.json_value()
            return float(result) if deserializer is _double else result

        kind = "LogAppendTime" if record.timestamp_type == 1 else "CreateTime"
        return (json.dumps({
            "topic": record.topic, "partition": record.partition, "offset": record.offset,
            "timestamp": record.timestamp, "timestampType": kind if record.timestamp >= 0 else "NoTimestampType",
            "headers": [[name, None if value is None else _string(value)] for name, value in record.headers],
            "key": field(record.key, self.key_deserializer),
            "value": field(record.value, self.value_deserializer)}, ensure_ascii=False) + "\n").encode()


#: --formatter names: kfk's short ones and Kafka's class names (with the old kafka.tools package too).
FORMATTERS: dict[str, type[MessageFormatter]] = {"default": MessageFormatter, "logging": LoggingMessageFormatter,
                                                 "json": JsonMessageFormatter}
_KAFKA_FORMATTERS = {"DefaultMessageFormatter": "default", "LoggingMessageFormatter": "logging"}


def find_formatter(name: str) -> type[MessageFormatter]:
    """The formatter class --formatter names; ValueError naming the known ones."""
    short = _KAFKA_FORMATTERS.get(name.rsplit(".", 1)[-1], name.lower())
    if short not in FORMATTERS:
        raise ValueError(f"unknown formatter {name!r} (one of {', '.join(FORMATTERS)}, or Kafka's "
                         f"DefaultMessageFormatter / LoggingMessageFormatter)")
    return FORMATTERS[short]
