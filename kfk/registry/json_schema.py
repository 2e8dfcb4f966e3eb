"""JSON Schema schemas: validated with ``jsonschema`` (the draft the schema's $schema names, draft 7 without one),
and checked for compatibility by the main rules Confluent documents for JSON Schema: a reader schema can read what a
writer schema wrote when it accepts every document the writer's accepts, so types, enums and bounds may only widen,
a reader may not require a property the writer did not, a closed content model (additionalProperties: false) may
not lose a property, and a property may not be added to a writer's open content model (the writer's documents could
hold anything under that name).

Combined schemas (oneOf, anyOf, allOf) follow Confluent's rules for them: a sum type (oneOf/anyOf) may gain
subschemas and a product type (allOf) lose them, the reverse is incompatible (SUM_TYPE_NARROWED,
PRODUCT_TYPE_EXTENDED); the criterion may change only where that widens what is accepted (to anyOf, or between
single-subschema combinations: COMBINED_TYPE_EXTENDED), else COMBINED_TYPE_CHANGED; and each subschema on the
smaller side must be matched, one to one, with a compatible subschema of the other side
(COMBINED_TYPE_SUBSCHEMAS_CHANGED otherwise). A plain schema reads as a sum type one of whose subschemas reads it, and
a product type as a plain schema that reads one of its subschemas.
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

    def normalized(self):
        return self  # already canonical JSON

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
    reader_combined, writer_combined = _combined(reader), _combined(writer)
    if reader_combined is not None or writer_combined is not None:
        _compare_combined(reader, writer, reader_combined, writer_combined, path, found)
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


_COMBINERS = ("allOf", "anyOf", "oneOf")
_ANNOTATIONS = {"$schema", "$id", "id", "title", "description", "$comment", "default", "examples", "definitions",
                "$defs"}
_SUM_TYPES = ("anyOf", "oneOf")


def _combined(schema: dict) -> tuple[str, list] | None:
    """A schema's combination (criterion, subschemas), or None for a plain schema. A schema that has validation
    keywords beside a combiner, or several combiners, is the product (allOf) of its parts, as a validator reads it."""
    present = [keyword for keyword in _COMBINERS if isinstance(schema.get(keyword), list)]
    if not present:
        return None
    rest = {key: value for key, value in schema.items() if key not in _COMBINERS and key not in _ANNOTATIONS}
    if not rest and len(present) == 1:
        return present[0], schema[present[0]]
    return "allOf", [rest] * bool(rest) + [{keyword: schema[keyword]} for keyword in present]


def _reads(reader: Any, writer: Any, path: str) -> bool:
    found: list[Incompatibility] = []
    _compare(reader, writer, path, found)
    return not found


def _distinct(schemas: list) -> list:
    seen: dict[str, Any] = {}
    for schema in schemas:
        seen.setdefault(json.dumps(schema, sort_keys=True), schema)
    return list(seen.values())


def _compare_combined(reader: dict, writer: dict, reader_combined: tuple[str, list] | None,
                      writer_combined: tuple[str, list] | None, path: str, found: list[Incompatibility]) -> None:
    if writer_combined is None:
        criterion, subschemas = reader_combined
        if len(subschemas) == 1 and _reads(subschemas[0], writer, path):
            return
        if criterion in _SUM_TYPES and any(_reads(subschema, writer, path) for subschema in subschemas):
            return  # SUM_TYPE_EXTENDED
        found.append(Incompatibility("TYPE_CHANGED", path, f"At '{path}' no subschema of the reader's {criterion} "
                                     "reads the writer's schema"))
        return
    if reader_combined is None:
        criterion, subschemas = writer_combined
        if len(subschemas) == 1 and _reads(reader, subschemas[0], path):
            return
        if criterion == "allOf" and any(_reads(reader, subschema, path) for subschema in subschemas):
            return  # PRODUCT_TYPE_NARROWED
        found.append(Incompatibility("TYPE_CHANGED", path, f"At '{path}' the reader's schema does not read every "
                                     f"document the writer's {criterion} allows"))
        return
    (reader_criterion, reader_subschemas), (writer_criterion, writer_subschemas) = reader_combined, writer_combined
    if reader_criterion != writer_criterion and not (
            reader_criterion == "anyOf" or (len(writer_subschemas) == 1 and len(reader_subschemas) == 1)
            or (len(writer_subschemas) == 1 and reader_criterion == "oneOf")
            or (len(reader_subschemas) == 1 and writer_criterion == "allOf")):
        found.append(Incompatibility("COMBINED_TYPE_CHANGED", path, f"At '{path}' the writer's {writer_criterion} "
                                     f"became {reader_criterion} in the reader's schema"))
        return
    writer_subschemas, reader_subschemas = _distinct(writer_subschemas), _distinct(reader_subschemas)
    if len(writer_subschemas) < len(reader_subschemas) and reader_criterion == "allOf":
        found.append(Incompatibility("PRODUCT_TYPE_EXTENDED", f"{path}/allOf",
                                     f"At '{path}/allOf' the reader's schema requires more subschemas"))
    elif len(writer_subschemas) > len(reader_subschemas) and writer_criterion in _SUM_TYPES:
        found.append(Incompatibility("SUM_TYPE_NARROWED", f"{path}/{writer_criterion}",
                                     f"At '{path}/{writer_criterion}' the reader's schema has fewer alternatives"))
    readers_of = [[index for index, reader_subschema in enumerate(reader_subschemas)
                   if _reads(reader_subschema, writer_subschema, f"{path}/{writer_criterion}/{position}")]
                  for position, writer_subschema in enumerate(writer_subschemas)]
    if _matching_size(readers_of, len(reader_subschemas)) < min(len(writer_subschemas), len(reader_subschemas)):
        found.append(Incompatibility("COMBINED_TYPE_SUBSCHEMAS_CHANGED", f"{path}/{writer_criterion}",
                                     f"At '{path}/{writer_criterion}' the subschemas cannot be paired with compatible "
                                     "subschemas of the other schema"))


def _matching_size(edges: list[list[int]], right_size: int) -> int:
    """The size of a maximum matching of the bipartite graph (left i -- right j for j in edges[i]), by augmenting
    paths: which writer subschemas can each be read by a reader subschema of their own."""
    matched_to: list[int | None] = [None] * right_size

    def augment(left: int, visited: set[int]) -> bool:
        for right in edges[left]:
            if right not in visited:
                visited.add(right)
                if matched_to[right] is None or augment(matched_to[right], visited):
                    matched_to[right] = left
                    return True
        return False
    return sum(augment(left, set()) for left in range(len(edges)))


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
