"""Avro schemas: parsed and validated by fastavro, and checked for compatibility by the Avro specification's schema
resolution rules (a reader schema can read data written with a writer schema when, recursively, the types match or
promote, every reader field is in the writer or has a default, every writer enum symbol or union branch has a
place in the reader).

Why fastavro rather than the ``avro`` package: confluent-kafka's own AvroSerializer/AvroDeserializer are built on
it, it is C-accelerated (kfk's console tools encode every record with it), and its parse_schema validates names and
default values as the Java library does. Neither library offers the resolution check itself, so it is here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import fastavro
from fastavro.schema import SchemaParseException, UnknownType

from kfk.registry.schema_types import AVRO, Incompatibility, SchemaParseError, SchemaReference, canonical_text

__all__ = ["AvroSchema"]

PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})
NAMED = frozenset({"record", "error", "enum", "fixed"})

# The specification's promotions: the writer's type (key) may be read as any of these reader types.
PROMOTIONS = {
    "int": {"long", "float", "double"},
    "long": {"float", "double"},
    "float": {"double"},
    "string": {"bytes"},
    "bytes": {"string"},
}


@dataclass
class AvroSchema:
    schema_type = AVRO
    canonical: str
    parsed: Any
    named: dict[str, Any]
    references: list[SchemaReference] = field(default_factory=list)

    @classmethod
    def parse(cls, text: str, references: list[SchemaReference] = ()) -> AvroSchema:
        named: dict[str, Any] = {}
        try:
            for reference in references:
                fastavro.parse_schema(json.loads(reference.schema), named_schemas=named, _write_hint=False)
            parsed = fastavro.parse_schema(json.loads(text), named_schemas=named, _write_hint=False)
        except json.JSONDecodeError as error:
            raise SchemaParseError(f"not JSON: {error}") from None
        except UnknownType as error:
            name = error.name.get("type") if isinstance(error.name, dict) else error.name
            raise SchemaParseError(f"unknown type: {json.dumps(name)}") from None
        except (SchemaParseException, ValueError, TypeError, KeyError, AttributeError) as error:
            raise SchemaParseError(str(error) or type(error).__name__) from None
        return cls(canonical_text(AVRO, text), parsed, named, list(references))

    @cached_property
    def codec_schema(self) -> Any:
        """The schema as fastavro's readers and writers take it (parsed with their hints, references included)."""
        named: dict[str, Any] = {}
        for reference in self.references:
            fastavro.parse_schema(json.loads(reference.schema), named_schemas=named)
        return fastavro.parse_schema(json.loads(self.canonical), named_schemas=named)

    def normalized(self):
        return self  # already canonical JSON

    def record_name(self) -> str | None:
        return self.parsed.get("name") if isinstance(self.parsed, dict) else None

    def incompatibilities(self, writer: AvroSchema) -> list[Incompatibility]:
        check = _Resolution(self.named, writer.named)
        check.can_read(self.parsed, writer.parsed, "")
        return check.found


def _type_name(schema: Any) -> str:
    if isinstance(schema, list):
        return "union"
    if isinstance(schema, dict):
        return schema["type"] if schema["type"] != "error" else "record"
    return schema if schema in PRIMITIVES else "named"


class _Resolution:
    """One reader/writer walk, collecting every mismatch (Confluent's 409 lists them all, not only the first)."""

    def __init__(self, reader_named: dict[str, Any], writer_named: dict[str, Any]) -> None:
        self.reader_named = reader_named
        self.writer_named = writer_named
        self.found: list[Incompatibility] = []
        self._in_progress: set[tuple[str, str]] = set()  # recursive types: a pair being checked is assumed readable

    def _resolve(self, schema: Any, named: dict[str, Any]) -> Any:
        while isinstance(schema, str) and schema not in PRIMITIVES:
            schema = named[schema]
        if isinstance(schema, dict) and schema.get("type") in PRIMITIVES and "logicalType" in schema:
            return schema["type"]  # logical types resolve as their underlying type
        if isinstance(schema, dict) and schema.get("type") in PRIMITIVES:
            return schema["type"]
        return schema

    def _add(self, error_type: str, path: str, description: str) -> None:
        self.found.append(Incompatibility(error_type, path or "/", description))

    def readable(self, reader: Any, writer: Any) -> bool:
        """Whether reader can read writer, without recording why (to pick a union branch)."""
        probe = _Resolution(self.reader_named, self.writer_named)
        probe._in_progress = set(self._in_progress)
        probe.can_read(reader, writer, "")
        return not probe.found

    def can_read(self, reader: Any, writer: Any, path: str) -> None:
        reader = self._resolve(reader, self.reader_named)
        writer = self._resolve(writer, self.writer_named)
        reader_type, writer_type = _type_name(reader), _type_name(writer)
        if writer_type == "union":
            for index, branch in enumerate(writer):
                if reader_type == "union":
                    if not any(self.readable(choice, branch) for choice in reader):
                        self._add("MISSING_UNION_BRANCH", f"{path}/{index}",
                                  f"The reader's union at path '{path or '/'}' has no branch for the writer's "
                                  f"type {_describe(branch)}")
                else:
                    self.can_read(reader, branch, f"{path}/{index}")
            return
        if reader_type == "union":
            if not any(self.readable(choice, writer) for choice in reader):
                self._add("MISSING_UNION_BRANCH", path,
                          f"The reader's union at path '{path or '/'}' has no branch for the writer's type "
                          f"{_describe(writer)}")
            return
        if reader_type != writer_type:
            if reader_type in PROMOTIONS.get(writer_type, ()):
                return
            self._add("TYPE_MISMATCH", path,
                      f"The type (path '{path or '/'}') of the reader's schema ({reader_type}) cannot read the "
                      f"writer's {writer_type}")
            return
        if reader_type in PRIMITIVES:
            return
        if reader_type in NAMED and not self._names_match(reader, writer):
            self._add("NAME_MISMATCH", f"{path}/name",
                      f"The name of the schema has changed (path '{path}/name'): the reader's "
                      f"{reader['name']} is not the writer's {writer['name']} nor one of its aliases")
            return
        if reader_type == "fixed":
            if reader["size"] != writer["size"]:
                self._add("FIXED_SIZE_MISMATCH", f"{path}/size",
                          f"The size of the fixed type at path '{path}/size' differs: the reader's "
                          f"{reader['size']}, the writer's {writer['size']}")
        elif reader_type == "enum":
            missing = [symbol for symbol in writer["symbols"] if symbol not in reader["symbols"]]
            if missing and reader.get("default") is None:
                self._add("MISSING_ENUM_SYMBOLS", f"{path}/symbols",
                          f"The reader's enum at path '{path}/symbols' is missing the writer's symbols "
                          f"{missing} and has no default")
        elif reader_type == "array":
            self.can_read(reader["items"], writer["items"], f"{path}/items")
        elif reader_type == "map":
            self.can_read(reader["values"], writer["values"], f"{path}/values")
        elif reader_type == "record":
            self._records(reader, writer, path)

    def _names_match(self, reader: dict, writer: dict) -> bool:
        if reader["name"] == writer["name"]:
            return True
        namespace = reader["name"].rpartition(".")[0]
        aliases = {alias if "." in alias or not namespace else f"{namespace}.{alias}"
                   for alias in reader.get("aliases", ())}
        return writer["name"] in aliases or writer["name"].rpartition(".")[2] in reader.get("aliases", ())

    def _records(self, reader: dict, writer: dict, path: str) -> None:
        pair = (reader["name"], writer["name"])
        if pair in self._in_progress:
            return
        self._in_progress.add(pair)
        writer_fields = {writer_field["name"]: writer_field for writer_field in writer["fields"]}
        for index, reader_field in enumerate(reader["fields"]):
            names = [reader_field["name"], *reader_field.get("aliases", ())]
            match = next((writer_fields[name] for name in names if name in writer_fields), None)
            if match is None:
                if "default" not in reader_field:
                    self._add("READER_FIELD_MISSING_DEFAULT_VALUE", f"{path}/fields/{index}",
                              f"The field '{reader_field['name']}' at path '{path}/fields/{index}' in the reader's "
                              "schema has no default value and is missing in the writer's schema")
            else:
                self.can_read(reader_field["type"], match["type"], f"{path}/fields/{index}/type")
        self._in_progress.discard(pair)


def _describe(schema: Any) -> str:
    if isinstance(schema, dict):
        return schema.get("name") or schema["type"]
    if isinstance(schema, list):
        return "union"
    return str(schema)
