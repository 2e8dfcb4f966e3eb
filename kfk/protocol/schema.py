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


def _read(path: Path) -> dict:
    return json.loads(_strip_comments(path.read_text(encoding="utf-8")))


def load_spec(path: Path, older: Path | None = None) -> MessageSpec:
    """The schema at `path`; with `older`, a previous release's schema of the same message, the versions the newer
    release removed are added back from it (see merge_removed_versions)."""
    raw = _read(path)
    if older is not None:
        raw = merge_removed_versions(raw, _read(older), path.name)
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
    top.fields = build_fields(raw.get("fields", []))
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


def load_specs(directory: Path, removed_versions: Path | None = None) -> list[MessageSpec]:
    """Every schema of `directory` that has a version; those that also have a file in `removed_versions` get their
    removed versions back from it. Kafka 4.0 keeps the files of the ZooKeeper-era APIs it removed (LeaderAndIsr,
    StopReplica, UpdateMetadata) with no version and no field: there is nothing to generate for them."""

    def older(path: Path) -> Path | None:
        candidate = removed_versions / path.name if removed_versions is not None else None
        return candidate if candidate is not None and candidate.exists() else None

    specs = (load_spec(path, older(path)) for path in sorted(directory.glob("*.json")))
    return [spec for spec in specs if not spec.valid_versions.empty]


# ---------------------------------------------------------------------------------------------------------------
# Versions a newer release removed (KIP-896 dropped the oldest versions of many APIs in Kafka 4.0)


def _text(versions: Versions) -> str:
    if versions.empty:
        return "none"
    if versions.high == MAX_VERSION:
        return f"{versions.low}+"
    return str(versions.low) if versions.low == versions.high else f"{versions.low}-{versions.high}"


def _join(older: Versions, newer: Versions, cut: int, where: str) -> Versions:
    """`older` below version `cut`, `newer` from it on; the result must still be one range."""
    below = older.intersect(Versions(0, cut - 1))
    above = newer.intersect(Versions(cut, MAX_VERSION))
    if below.empty or above.empty:
        return above if below.empty else below
    if below.high + 1 != above.low:
        raise ValueError(f"{where}: versions {_text(below)} and {_text(above)} do not join")
    return Versions(below.low, above.high)


_VERSION_KEYS = ("versions", "nullableVersions", "taggedVersions")


def _merge_field(newer: dict, older: dict, cut: int, where: str) -> dict:
    where = f"{where}.{newer['name']}"
    if newer["type"] != older["type"] or newer.get("tag") != older.get("tag"):
        raise ValueError(f"{where}: type or tag differs between the releases")
    merged = dict(newer)
    for key in _VERSION_KEYS:
        if key in newer or key in older:
            merged[key] = _text(_join(Versions.parse(older.get(key)), Versions.parse(newer.get(key)), cut, where))
    if older.get("ignorable"):  # the older versions that lack the field may drop it (RequestHeader.ClientId at v0)
        merged["ignorable"] = True
    if "fields" in newer or "fields" in older:
        merged["fields"] = _merge_fields(newer.get("fields", []), older.get("fields", []), cut, where)
    return merged


def _merge_fields(newer: list[dict], older: list[dict], cut: int, where: str) -> list[dict]:
    """The newer release's fields, each widened to the older versions, with the fields only older versions carry
    put back where they were. The fields both releases have must keep their order, so that the one list encodes
    every version in its own release's order."""
    old_by_name = {entry["name"]: entry for entry in older}
    shared = [entry["name"] for entry in newer if entry["name"] in old_by_name]
    if shared != [entry["name"] for entry in older if entry["name"] in set(shared)]:
        raise ValueError(f"{where}: the releases order their fields differently")
    merged = [_merge_field(e, old_by_name[e["name"]], cut, where) if e["name"] in old_by_name else e for e in newer]
    position = 0
    for entry in older:
        if entry["name"] in shared:
            position = next(i for i, e in enumerate(merged) if e["name"] == entry["name"]) + 1
            continue
        removed = Versions.parse(entry.get("versions", entry.get("taggedVersions"))).intersect(Versions(0, cut - 1))
        if removed.empty:
            continue  # a field the newer release dropped with versions it still has: not ours to restore
        merged.insert(position, {**entry, "versions": _text(removed)})
        position += 1
    return merged


def merge_removed_versions(newer: dict, older: dict, where: str) -> dict:
    """One schema serving the older release's lowest versions and the newer release's others.

    Kafka 4.0 removed the oldest versions of many APIs (KIP-896) and ControlledShutdown altogether; the newer
    schema then drops the fields only those versions carried. kfk keeps serving them to old clients: versions below
    the newer release's lowest take their layout from the older schema, the rest from the newer one."""
    new_valid, old_valid = Versions.parse(newer["validVersions"]), Versions.parse(older["validVersions"])
    if new_valid.empty:
        return older  # the newer release removed the whole API (and its fields with it)
    cut = new_valid.low
    if old_valid.empty or old_valid.low >= cut:
        raise ValueError(f"{where}: the older schema has no version the newer one removed")
    if newer.get("flexibleVersions") != older.get("flexibleVersions"):
        raise ValueError(f"{where}: flexible versions differ between the releases")
    merged = dict(newer)
    merged["validVersions"] = _text(_join(old_valid, new_valid, cut, where))
    if "commonStructs" in newer or "commonStructs" in older:
        raise ValueError(f"{where}: merging common structs is not supported")
    merged["fields"] = _merge_fields(newer["fields"], older["fields"], cut, where)
    return merged
