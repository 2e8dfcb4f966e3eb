"""Source offsets: their record format and the standalone worker's offsets file.

A source offset is stored as Kafka's workers store it: key = JSON `["<connector>",{<source partition>}]`, value =
JSON `{<source offset>}` (the internal JsonConverter, schemas disabled), a null value deleting it. The standalone
worker keeps those key/value byte pairs in `offset.storage.file.filename`, which Kafka writes as a Java-serialized
java.util.HashMap<byte[],byte[]>: this module reads and writes that stream, so kfk and Kafka resume each other's
standalone offsets; distributed workers put the same pairs in `offset.storage.topic`.
"""

from __future__ import annotations

import json
import os
import struct
import threading
from pathlib import Path
from typing import Any, Iterator, Mapping

from kfk.connect.connector import OffsetStorageReader, frozen_partition
from kfk.connect.errors import ConnectException
from kfk.connect.json_converter import jackson_text


def offset_key(connector: str, partition: Mapping[str, Any]) -> bytes:
    return jackson_text([connector, dict(partition)]).encode()


def offset_value(offset: Mapping[str, Any] | None) -> bytes | None:
    return None if offset is None else jackson_text(dict(offset)).encode()


def parse_offset_key(key: bytes) -> tuple[str, dict[str, Any]] | None:
    """(connector, partition) of a stored key, or None for a key not in Kafka's format (Kafka skips those too)."""
    try:
        parsed = json.loads(key)
    except ValueError:
        return None
    if not isinstance(parsed, list) or len(parsed) != 2 or not isinstance(parsed[0], str) \
            or not isinstance(parsed[1], dict):
        return None
    return parsed[0], parsed[1]


# --- java.util.HashMap<byte[],byte[]> in Java's object serialization stream -----------------------------------------

STREAM_MAGIC = b"\xac\xed\x00\x05"
TC_NULL, TC_REFERENCE, TC_CLASSDESC, TC_OBJECT, TC_ARRAY, TC_BLOCKDATA, TC_ENDBLOCKDATA = (
    0x70, 0x71, 0x72, 0x73, 0x75, 0x77, 0x78)
HASHMAP_CLASS = b"java.util.HashMap"
HASHMAP_SERIAL_VERSION_UID = 0x0507DAC1C31660D1
BYTE_ARRAY_CLASS = b"[B"
BYTE_ARRAY_SERIAL_VERSION_UID = 0xACF317F8060854E0
BASE_HANDLE = 0x7E0000
LOAD_FACTOR = 0.75


def _capacity(size: int) -> int:
    """The table size java.util.HashMap has grown to after `size` puts (16, doubling past 75 % full)."""
    capacity = 16
    while size > capacity * LOAD_FACTOR:
        capacity *= 2
    return capacity


def write_java_hashmap(entries: Mapping[bytes, bytes | None]) -> bytes:
    capacity = _capacity(len(entries))
    out = bytearray(STREAM_MAGIC)
    out += bytes([TC_OBJECT, TC_CLASSDESC]) + struct.pack(">H", len(HASHMAP_CLASS)) + HASHMAP_CLASS
    out += struct.pack(">QBH", HASHMAP_SERIAL_VERSION_UID, 0x03, 2)  # SC_WRITE_METHOD | SC_SERIALIZABLE, 2 fields
    out += b"F" + struct.pack(">H", 10) + b"loadFactor" + b"I" + struct.pack(">H", 9) + b"threshold"
    out += bytes([TC_ENDBLOCKDATA, TC_NULL])  # no class annotations, no superclass
    out += struct.pack(">fi", LOAD_FACTOR, int(capacity * LOAD_FACTOR))
    out += bytes([TC_BLOCKDATA, 8]) + struct.pack(">ii", capacity, len(entries))
    byte_array_handle = None  # handles: 0 the HashMap class, 1 the map, then the [B class and each array
    next_handle = BASE_HANDLE + 2

    def array(data: bytes | None) -> None:
        nonlocal byte_array_handle, next_handle
        if data is None:
            out.append(TC_NULL)
            return
        out.append(TC_ARRAY)
        if byte_array_handle is None:
            out.extend(bytes([TC_CLASSDESC]) + struct.pack(">H", 2) + BYTE_ARRAY_CLASS)
            out.extend(struct.pack(">QBH", BYTE_ARRAY_SERIAL_VERSION_UID, 0x02, 0) + bytes([TC_ENDBLOCKDATA, TC_NULL]))
            byte_array_handle = next_handle
            next_handle += 1
        else:
            out.extend(bytes([TC_REFERENCE]) + struct.pack(">I", byte_array_handle))
        next_handle += 1
        out.extend(struct.pack(">i", len(data)) + data)

    for key, value in entries.items():
        array(key)
        array(value)
    out.append(TC_ENDBLOCKDATA)
    return bytes(out)


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.position = data, 0

    def take(self, size: int) -> bytes:
        if self.position + size > len(self.data):
            raise ConnectException("Truncated offsets file")
        chunk = self.data[self.position:self.position + size]
        self.position += size
        return chunk

    def unpack(self, fmt: str) -> tuple:
        return struct.unpack(fmt, self.take(struct.calcsize(fmt)))

    def byte(self) -> int:
        return self.take(1)[0]

    def class_desc(self) -> None:
        """Skip a class descriptor (new or a back reference)."""
        tag = self.byte()
        if tag == TC_REFERENCE:
            self.take(4)
            return
        if tag == TC_NULL:
            return
        if tag != TC_CLASSDESC:
            raise ConnectException(f"Unexpected tag {tag:#x} in offsets file")
        (name_length,) = self.unpack(">H")
        self.take(name_length + 9)
        (field_count,) = self.unpack(">H")
        for _ in range(field_count):
            type_code = chr(self.byte())
            (length,) = self.unpack(">H")
            self.take(length)
            if type_code in "L[":  # object fields name their class as a string
                tag = self.byte()
                if tag == TC_REFERENCE:
                    self.take(4)
                else:
                    (length,) = self.unpack(">H")
                    self.take(length)
        if self.byte() != TC_ENDBLOCKDATA:
            raise ConnectException("Unsupported class annotation in offsets file")
        self.class_desc()  # the superclass

    def byte_array(self) -> bytes | None:
        tag = self.byte()
        if tag == TC_NULL:
            return None
        if tag != TC_ARRAY:
            raise ConnectException(f"Expected a byte[] in offsets file, found tag {tag:#x}")
        self.class_desc()
        (length,) = self.unpack(">i")
        return self.take(length)


def read_java_hashmap(data: bytes) -> dict[bytes, bytes | None]:
    reader = _Reader(data)
    if reader.take(4) != STREAM_MAGIC or reader.byte() != TC_OBJECT:
        raise ConnectException("Not a Java serialized HashMap")
    reader.class_desc()
    reader.unpack(">fi")  # loadFactor, threshold
    if reader.byte() != TC_BLOCKDATA:
        raise ConnectException("Unexpected HashMap layout in offsets file")
    reader.take(reader.byte() - 4)  # the bucket count
    (size,) = reader.unpack(">i")
    entries: dict[bytes, bytes | None] = {}
    for _ in range(size):
        key = reader.byte_array()
        entries[key] = reader.byte_array()
    return entries


class OffsetStore:
    """The worker's source offsets: key/value byte pairs in memory, persisted by `flush` (to the file here;
    kfk.connect.distributed keeps them in the offsets topic)."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._data: dict[bytes, bytes] = {}
        if path is not None and path.exists() and path.stat().st_size:
            self._data = {key: value for key, value in read_java_hashmap(path.read_bytes()).items()
                          if value is not None}

    def set_all(self, entries: Mapping[bytes, bytes | None]) -> None:
        self.remember(entries)
        self.flush()

    def remember(self, entries: Mapping[bytes, bytes | None]) -> None:
        """Take offsets already persisted elsewhere (an exactly-once source task writes them in its transaction)."""
        with self._lock:
            for key, value in entries.items():
                if value is None:
                    self._data.pop(key, None)
                else:
                    self._data[key] = value

    def flush(self) -> None:
        if self.path is None:
            return
        with self._lock:
            data = write_java_hashmap(self._data)
        temporary = self.path.with_name(self.path.name + ".tmp")
        temporary.write_bytes(data)
        os.replace(temporary, self.path)

    def get(self, key: bytes) -> bytes | None:
        with self._lock:
            return self._data.get(key)

    def connector_offsets(self, connector: str) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
        with self._lock:
            items = list(self._data.items())
        for key, value in items:
            parsed = parse_offset_key(key)
            if parsed is not None and parsed[0] == connector:
                yield parsed[1], json.loads(value)

    def reader(self, connector: str) -> ConnectorOffsetReader:
        return ConnectorOffsetReader(self, connector)


class ConnectorOffsetReader(OffsetStorageReader):
    def __init__(self, store: OffsetStore, connector: str) -> None:
        self.store, self.connector = store, connector

    def offsets(self, partitions: list[Mapping[str, Any]]) -> dict[Any, dict[str, Any] | None]:
        result = {}
        for partition in partitions:
            value = self.store.get(offset_key(self.connector, partition))
            result[frozen_partition(partition)] = json.loads(value) if value is not None else None
        return result
