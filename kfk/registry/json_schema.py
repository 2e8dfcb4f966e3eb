"""JSON Schema schemas: validated with ``jsonschema`` (the draft the schema's $schema names, draft 7 without one),
and checked for compatibility by the main rules Confluent documents for JSON Schema: a reader schema can read what a
writer schema wrote when it accepts every document the writer's accepts, so types, enums and bounds may only widen,
a reader may not require a property the writer did not, a closed content model (additionalProperties: false) may
not lose a property, and a property may not be added to a writer's open content model (the writer's documents could
hold anything under that name).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import jsonschema
from jsonschema.exceptions import SchemaError

from kfk.registry.schema_types import JSON, Incompatibility, SchemaParseError, SchemaReference, canonical_text

__all__ = ["JsonSchema"]


@dataclass
class JsonSchema:
    schema_type = JSON
    canonical: str
    document: Any
    references: dict[str, Any]

    @classmethod
    def parse(cls, text: str, references: list[SchemaReference] = ()) -> JsonSchema:
        try:
            document = json.loads(text)
        except json.JSONDecodeError as error:
            raise SchemaParseError(f"not JSON: {error}") from None
        if not isinstance(document, (dict, bool)):
            raise SchemaParseError("a JSON Schema is an object or a boolean")
        try:
            jsonschema.validators.validator_for(document, default=jsonschema.Draft7Validator).check_schema(document)
        except SchemaError as error:
            raise SchemaParseError(error.message) from None
        loaded = {reference.name: json.loads(reference.schema) for reference in references}
        return cls(canonical_text(JSON, text), document, loaded)

    def record_name(self) -> str | None:
        return self.document.get("title") if isinstance(self.document, dict) else None

    def validator(self) -> jsonschema.protocols.Validator:
        """A validator for documents, with the references resolvable by their names."""
        from referencing import Registry, Resource
        from referencing.jsonschema import DRAFT7

        registry = Registry().with_resources(
            (name, Resource.from_contents(contents, default_specification=DRAFT7))
            for name, contents in self.references.items())
        cls = jsonschema.validators.validator_for(self.document, default=jsonschema.Draft7Validator)
        return cls(self.document, registry=registry)

    def incompatibilities(self, writer: JsonSchema) -> list[Incompatibility]:
        found: list[Incompatibility] = []
        _compare(self.document, writer.document, "#", found)
        return found


_NUMERIC = {"integer", "number"}


def _types(schema: dict) -> set[str] | None:
    kind = schema.get("type")
    if kind is None:
        return None
    return {kind} if isinstance(kind, str) else set(kind)


def _compare(reader: Any, writer: Any, path: str, found: list[Incompatibility]) -> None:
    if reader is True or reader == {}:
        return
    if writer is True or writer == {}:
        found.append(Incompatibility("TYPE_NARROWED", path, f"At '{path}' the reader's schema restricts what the "
                                     "writer's schema (any document) allows"))
        return
    if reader is False or writer is False or not isinstance(reader, dict) or not isinstance(writer, dict):
        if reader is False and writer is not False:
            found.append(Incompatibility("TYPE_NARROWED", path, f"At '{path}' the reader's schema accepts nothing"))
        return
    reader_types, writer_types = _types(reader), _types(writer)
    if reader_types is not None:
        if writer_types is None:
            found.append(Incompatibility("TYPE_NARROWED", path,
                                         f"At '{path}' the reader's schema allows only {sorted(reader_types)}, the "
                                         "writer's any type"))
            return
        widened = reader_types | ({"integer"} if "number" in reader_types else set())
        missing = writer_types - widened
        if missing:
            error_type = "TYPE_NARROWED" if writer_types & widened else "TYPE_CHANGED"
            found.append(Incompatibility(error_type, f"{path}/type",
                                         f"At '{path}/type' the reader's schema {sorted(reader_types)} does not "
                                         f"accept the writer's {sorted(missing)}"))
            return
    if "enum" in reader:
        missing = [value for value in writer.get("enum", [None]) if value not in reader["enum"]]
        if "enum" not in writer:
            found.append(Incompatibility("ENUM_ARRAY_NARROWED", f"{path}/enum",
                                         f"At '{path}/enum' the reader's schema adds an enum the writer's lacks"))
        elif missing:
            found.append(Incompatibility("ENUM_ARRAY_NARROWED", f"{path}/enum",
                                         f"At '{path}/enum' the reader's schema lacks the writer's values {missing}"))
    for keyword, narrower in (("maxLength", min), ("maxItems", min), ("maxProperties", min), ("maximum", min),
                              ("minLength", max), ("minItems", max), ("minProperties", max), ("minimum", max)):
        if keyword not in reader:
            continue
        if keyword not in writer or narrower(reader[keyword], writer[keyword]) != writer[keyword]:
            found.append(Incompatibility(f"{_snake(keyword)}_{'DECREASED' if narrower is min else 'INCREASED'}"
                                         if keyword in writer else f"{_snake(keyword)}_ADDED", f"{path}/{keyword}",
                                         f"At '{path}/{keyword}' the reader's schema narrows the writer's bound"))
    if "pattern" in reader and reader.get("pattern") != writer.get("pattern"):
        found.append(Incompatibility("PATTERN_CHANGED" if "pattern" in writer else "PATTERN_ADDED", f"{path}/pattern",
                                     f"At '{path}/pattern' the reader's pattern differs from the writer's"))
    _compare_object(reader, writer, path, found)
    if "items" in reader and isinstance(reader["items"], (dict, bool)):
        _compare(reader["items"], writer.get("items", True), f"{path}/items", found)


def _open(schema: dict) -> bool:
    return schema.get("additionalProperties", True) is not False


def _compare_object(reader: dict, writer: dict, path: str, found: list[Incompatibility]) -> None:
    reader_properties = reader.get("properties", {})
    writer_properties = writer.get("properties", {})
    writer_required = set(writer.get("required", ()))
    for name in reader.get("required", ()):
        if name not in writer_required:
            found.append(Incompatibility("REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL"
                                         if not _open(writer) else "REQUIRED_ATTRIBUTE_ADDED",
                                         f"{path}/required", f"The reader's schema requires the property '{name}', "
                                         "which the writer's schema does not"))
    for name, schema in reader_properties.items():
        here = f"{path}/properties/{name}"
        if name in writer_properties:
            _compare(schema, writer_properties[name], here, found)
        elif _open(writer) and schema not in (True, {}):
            found.append(Incompatibility("PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL", here,
                                         f"The reader's schema adds the property '{name}' to the writer's open "
                                         "content model, whose documents may hold any value under that name"))
    for name, schema in writer_properties.items():
        if name in reader_properties:
            continue
        here = f"{path}/properties/{name}"
        additional = reader.get("additionalProperties", True)
        if additional is False:
            found.append(Incompatibility("PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL", here,
                                         f"The reader's closed content model lacks the writer's property '{name}'"))
        elif isinstance(additional, dict):
            _compare(additional, schema, here, found)
    if _open(writer) and not _open(reader):
        found.append(Incompatibility("ADDITIONAL_PROPERTIES_REMOVED", f"{path}/additionalProperties",
                                     "The reader's schema closes the content model the writer's leaves open"))


def _snake(keyword: str) -> str:
    return "".join(f"_{char}" if char.isupper() else char for char in keyword).upper()
