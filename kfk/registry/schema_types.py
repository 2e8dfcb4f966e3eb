"""What the registry needs of a schema, whatever its type: a parse that refuses what is not a schema (42201), the
canonical text two registrations are compared by, and the list of reasons a reader schema cannot read what a writer
schema wrote (the compatibility checks build on that one question)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

__all__ = ["Incompatibility", "ParsedSchema", "SchemaParseError", "SchemaReference", "SCHEMA_TYPES", "parse_schema",
           "canonical_text"]

AVRO, JSON, PROTOBUF = "AVRO", "JSON", "PROTOBUF"
SCHEMA_TYPES = (JSON, PROTOBUF, AVRO)  # the order GET /schemas/types lists them in


@dataclass(frozen=True)
class Incompatibility:
    """One reason for a 409: Confluent's error type name, the path in the schema, and a sentence."""

    error_type: str
    path: str
    description: str

    def __str__(self) -> str:
        return f"{{errorType:'{self.error_type}', description:'{self.description}'}}"


@dataclass(frozen=True)
class SchemaReference:
    """A schema imported by name (an Avro named type, a JSON Schema $ref, a Protobuf import) from a subject's
    version; ``schema`` is that version's text, resolved by the registry."""

    name: str
    subject: str
    version: int
    schema: str = ""

    def to_json(self) -> dict:
        return {"name": self.name, "subject": self.subject, "version": self.version}


class ParsedSchema(Protocol):
    schema_type: str
    canonical: str

    def incompatibilities(self, writer: ParsedSchema) -> list[Incompatibility]:
        """Why this schema, reading, cannot read data written with ``writer`` (empty when it can)."""

    def record_name(self) -> str | None:
        """The fully qualified name RecordNameStrategy uses (None where the schema has none)."""

    def normalized(self) -> ParsedSchema:
        """The schema in its normalized canonical form (``?normalize=true``), under which equivalent texts are
        equal."""


class SchemaParseError(ValueError):
    """Not a valid schema of its type; the message says why."""


def parse_schema(schema_type: str, text: str, references: list[SchemaReference] = ()) -> ParsedSchema:
    if schema_type == AVRO:
        from kfk.registry.avro_schema import AvroSchema
        return AvroSchema.parse(text, references)
    if schema_type == JSON:
        from kfk.registry.json_schema import JsonSchema
        return JsonSchema.parse(text, references)
    if schema_type == PROTOBUF:
        from kfk.registry.protobuf_schema import ProtobufSchema
        return ProtobufSchema.parse(text, references)
    raise SchemaParseError(f"unknown schema type {schema_type!r} (one of {', '.join(SCHEMA_TYPES)})")


def canonical_text(schema_type: str, text: str) -> str:
    """The text a registration is stored and compared as, without parsing it again (the registry computes it for
    every record it replays from _schemas): JSON schemas lose their insignificant whitespace, keeping key order as
    Avro's own Schema.toString() does; a Protobuf schema is kept as stored (the registry stores its canonical .proto
    text, made when it was registered)."""
    if schema_type in (AVRO, JSON):
        import json
        try:
            return json.dumps(json.loads(text), separators=(",", ":"), ensure_ascii=False)
        except ValueError:
            return text
    return text
