"""The record format's varints: kfk.common.varint's codec, raising CorruptRecordError on malformed input (a record
whose varints do not parse is a corrupt record, CORRUPT_MESSAGE on the wire)."""

from __future__ import annotations

from kfk.common.varint import varint_codec
from kfk.errors import CorruptRecordError

__all__ = ["encode_unsigned_varint", "encode_varint", "encode_varlong", "read_unsigned_varint",
           "read_unsigned_varlong", "read_varint", "read_varlong"]

(read_unsigned_varint, read_unsigned_varlong, read_varint, read_varlong,
 encode_unsigned_varint, encode_varint, encode_varlong) = varint_codec(CorruptRecordError)
