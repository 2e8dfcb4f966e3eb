"""Base classes of the generated messages in kfk/protocol/messages/.

A generated struct is a plain class with `__slots__` whose attributes are the snake_case names of the schema's
fields (every field of every version: a field absent from the version at hand holds its schema default). The
generated module fills in `_encoders`/`_decoders`, tuples indexed by version, so `encode`/`decode` are one tuple
lookup away from straight-line code.
"""

from __future__ import annotations

import struct
from typing import Any, ClassVar, TypeVar

from kfk.errors import KafkaError, ProtocolError, UnsupportedVersionError

Buffer = bytes | bytearray | memoryview
M = TypeVar("M", bound="Message")

# What malformed input can raise inside straight-line decoders; the entry points turn all of it into ProtocolError.
DECODE_FAILURES = (struct.error, IndexError, ValueError, UnicodeDecodeError, OverflowError, MemoryError, TypeError)
# What a value of the wrong shape raises inside the encoders.
ENCODE_FAILURES = (struct.error, AttributeError, TypeError, ValueError, OverflowError)


class Struct:
    """Equality, repr and copying for generated structs, driven by `__slots__`."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return all(getattr(self, name) == getattr(other, name) for name in self.__slots__)

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__slots__)
        return f"{type(self).__qualname__}({fields})"

    def to_dict(self) -> dict[str, Any]:
        """Nested plain data (for logs, `--json` output and tests)."""

        def plain(value: Any) -> Any:
            if isinstance(value, Struct):
                return value.to_dict()
            if isinstance(value, list):
                return [plain(item) for item in value]
            if isinstance(value, memoryview):
                return bytes(value)
            return value

        return {name: plain(getattr(self, name)) for name in self.__slots__}


class Message(Struct):
    """A top-level request, response, header or data schema."""

    __slots__ = ()

    #: Kafka's name of the schema, e.g. "ProduceRequest".
    NAME: ClassVar[str]
    #: The API key of a request or response, None for headers and data schemas.
    API_KEY: ClassVar[int | None]
    #: Inclusive range of valid versions.
    LOWEST_VERSION: ClassVar[int]
    HIGHEST_VERSION: ClassVar[int]
    #: The first flexible version, or None when the schema has none.
    FIRST_FLEXIBLE_VERSION: ClassVar[int | None]

    _encoders: ClassVar[tuple]
    _decoders: ClassVar[tuple]

    def encode(self, version: int) -> bytes:
        """The wire bytes of this message at `version` (without header or size prefix)."""
        out: list = []
        self.encode_into(out, version)
        return b"".join(out)

    def encode_into(self, out: list, version: int) -> None:
        """Append the wire chunks to `out`; large byte fields (records) are appended as-is, not copied."""
        encoder = self._encoders[version] if 0 <= version < len(self._encoders) else None
        if encoder is None:
            raise UnsupportedVersionError(f"{self.NAME} has no version {version}")
        try:
            encoder(self, out)
        except KafkaError:
            raise
        except ENCODE_FAILURES as error:
            raise ProtocolError(f"cannot encode {self.NAME} v{version}: {error}") from error

    @classmethod
    def decode(cls: type[M], buffer: Buffer, version: int, position: int = 0) -> M:
        """Decode a message; bytes after its end are ignored (real clients send some, see golden/README.md)."""
        return cls.decode_from(buffer, version, position)[0]

    @classmethod
    def decode_from(cls: type[M], buffer: Buffer, version: int, position: int = 0) -> tuple[M, int]:
        """Decode a message starting at `position`; returns it and the position just after it."""
        decoder = cls._decoders[version] if 0 <= version < len(cls._decoders) else None
        if decoder is None:
            raise UnsupportedVersionError(f"{cls.NAME} has no version {version}")
        try:
            return decoder(buffer, position)
        except KafkaError:
            raise
        except DECODE_FAILURES as error:
            raise ProtocolError(f"malformed {cls.NAME} v{version}: {error!r}") from error

    @classmethod
    def is_flexible(cls, version: int) -> bool:
        return cls.FIRST_FLEXIBLE_VERSION is not None and version >= cls.FIRST_FLEXIBLE_VERSION
