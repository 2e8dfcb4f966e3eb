"""A reader for Kafka's JSON message schemas (clients/src/main/resources/common/message/*.json).

Kafka defines every request, response, header and internal record as a JSON file: fields with a type, the versions
that carry them, the versions in which they may be null, tags, defaults. scripts/gen_protocol.py turns these into
the straight-line codec in kfk/protocol/messages/, and the property tests build their strategies from the same
model, so both sides agree on what a message is. Nothing here runs when a broker or client serves traffic.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

#: The highest version Kafka's schema language can name: "N+" means N up to this.
MAX_VERSION = 0x7FFF

#: Fixed-width primitives: struct format character and size in bytes.
FIXED_TYPES: dict[str, tuple[str, int]] = {
    "bool": ("?", 1),
    "int8": ("b", 1),
    "int16": ("h", 2),
    "uint16": ("H", 2),
    "int32": ("i", 4),
    "uint32": ("I", 4),
    "int64": ("q", 8),
    "float64": ("d", 8),
}
#: Every primitive type the schema language knows; anything else names a struct.
PRIMITIVE_TYPES = frozenset(FIXED_TYPES) | {"string", "bytes", "records", "uuid"}


@dataclass(frozen=True)
class Versions:
    """An inclusive version range; `Versions.NONE` is empty. Kafka writes them "N", "N-M", "N+" or "none"."""

    low: int
    high: int

    @staticmethod
    def parse(text: str | None) -> Versions:
        if text is None or text == "none":
            return NO_VERSIONS
        text = text.strip()
        if text.endswith("+"):
            return Versions(int(text[:-1]), MAX_VERSION)
        if "-" in text:
            low, high = text.split("-")
            return Versions(int(low), int(high))
        return Versions(int(text), int(text))

    def __contains__(self, version: object) -> bool:
        return isinstance(version, int) and self.low <= version <= self.high

    @property
    def empty(self) -> bool:
        return self.low > self.high

    def intersect(self, other: Versions) -> Versions:
        return Versions(max(self.low, other.low), min(self.high, other.high))


NO_VERSIONS = Versions(1, 0)


def snake_case(name: str) -> str:
    """`TimeoutMs` -> `timeout_ms`, `ZkMigrationReady` -> `zk_migration_ready`: the field names kfk uses."""
    name = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    name = re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name)
    return name.lower()


@dataclass
class Field:
    """One field of a struct, as the schema declares it."""

    name: str
    type: str
    versions: Versions
    nullable_versions: Versions
    tagged_versions: Versions
    tag: int | None
    default: str | None
    ignorable: bool
    flexible_versions: Versions | None  # a field-level override (RequestHeader.ClientId stays non-compact)
    struct: Struct | None = None  # the element/struct type when the type is not a primitive
    about: str = ""

    @property
    def attribute(self) -> str:
        return snake_case(self.name)

    @property
    def is_array(self) -> bool:
        return self.type.startswith("[]")

    @property
    def element_type(self) -> str:
        return self.type[2:] if self.is_array else self.type

    @property
    def is_struct(self) -> bool:
        return self.element_type not in PRIMITIVE_TYPES

    def tagged_at(self, version: int) -> bool:
        return self.tag is not None and version in self.tagged_versions

    def nullable_at(self, version: int) -> bool:
        return version in self.nullable_versions

    @property
    def always_nullable(self) -> bool:
        """True when null is a valid value in every version that carries the field (a `null` default needs it)."""
        return (
            not self.nullable_versions.empty
            and self.nullable_versions.low <= self.versions.low
            and self.nullable_versions.high >= self.versions.high
        )


@dataclass
class Struct:
    name: str
    fields: list[Field] = field(default_factory=list)


@dataclass
class MessageSpec:
    """A whole schema file: a request, response, header or data type."""

    name: str
    type: str  # request | response | header | data | metadata ...
    api_key: int | None
    valid_versions: Versions
    flexible_versions: Versions
    struct: Struct
    structs: dict[str, Struct]  # every named struct of the message, nested and common, by name
    listeners: tuple[str, ...] = ()
    latest_version_unstable: bool = False
    deprecated_versions: Versions = NO_VERSIONS
    path: Path | None = None

    def flexible_at(self, version: int) -> bool:
        return version in self.flexible_versions


def _strip_comments(text: str) -> str:
    # Kafka's schema files carry // line comments, which JSON does not allow.
    return re.sub(r"^\s*//.*$", "", text, flags=re.MULTILINE)


def load_spec(path: Path) -> MessageSpec:
    raw = json.loads(_strip_comments(path.read_text(encoding="utf-8")))
    structs: dict[str, Struct] = {}
    declared: dict[str, list[dict] | None] = {}
    common = {entry["name"]: entry for entry in raw.get("commonStructs", [])}
    valid = Versions.parse(raw["validVersions"])

    def build_fields(entries: list[dict]) -> list[Field]:
        fields = []
        for entry in entries:
            versions = Versions.parse(entry.get("versions", entry.get("taggedVersions")))
            f = Field(
                name=entry["name"],
                type=entry["type"],
                versions=versions,
                nullable_versions=Versions.parse(entry.get("nullableVersions")),
                tagged_versions=Versions.parse(entry.get("taggedVersions")),
                tag=int(entry["tag"]) if "tag" in entry else None,
                default=None if "default" not in entry else str(entry["default"]).lower()
                if isinstance(entry["default"], bool)
                else str(entry["default"]),
                ignorable=bool(entry.get("ignorable", False)),
                flexible_versions=Versions.parse(entry["flexibleVersions"]) if "flexibleVersions" in entry else None,
                about=entry.get("about", ""),
            )
            if f.is_struct:
                f.struct = build_struct(f.element_type, entry.get("fields"))
            fields.append(f)
        return fields

    def build_struct(name: str, entries: list[dict] | None) -> Struct:
        if name in structs:  # a common struct used from several places
            if entries is not None and declared[name] is not None and declared[name] != entries:
                raise ValueError(f"{path.name}: two different structs are both named {name}")
            return structs[name]
        declared[name] = entries
        if entries is None:
            if name not in common:
                raise ValueError(f"{path.name}: struct type {name} has no fields and is not a common struct")
            entries = common[name]["fields"]
        struct = structs[name] = Struct(name)
        struct.fields = build_fields(entries)
        return struct

    top = Struct(raw["name"])
    top.fields = build_fields(raw["fields"])
    return MessageSpec(
        name=raw["name"],
        type=raw["type"],
        api_key=raw.get("apiKey"),
        valid_versions=valid,
        flexible_versions=Versions.parse(raw.get("flexibleVersions")),
        struct=top,
        structs=structs,
        listeners=tuple(raw.get("listeners", ())),
        latest_version_unstable=bool(raw.get("latestVersionUnstable", False)),
        deprecated_versions=Versions.parse(raw.get("deprecatedVersions")),
        path=path,
    )


def load_specs(directory: Path) -> list[MessageSpec]:
    return [load_spec(path) for path in sorted(directory.glob("*.json"))]
