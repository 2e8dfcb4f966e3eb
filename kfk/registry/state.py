"""The registry's state as the records of the ``_schemas`` topic build it, in Confluent's record layout so that a
topic written by either registry reads back in the other:

    key   {"keytype":"SCHEMA","subject":S,"version":V,"magic":1}
    value {"subject":S,"version":V,"id":ID,"schemaType":T,"references":[...],"schema":TEXT,"deleted":BOOL}
          (schemaType and references omitted for Avro and none; a null value is a hard delete)
    key   {"keytype":"CONFIG","subject":S or null,"magic":0}   value {"compatibilityLevel":LEVEL} or null
    key   {"keytype":"MODE","subject":S or null,"magic":0}     value {"mode":MODE} or null
    key   {"keytype":"NOOP","magic":0}                         (written to learn the topic's end; no state)

Every instance applies the same records in the same order (the topic has one partition), so all agree; the state
is only changed by apply(), never by a request directly.

Subjects may be qualified with a context (``:.ctx:subject``, Confluent's schema contexts): each context numbers its
schema ids on its own, so ids are indexed per context; an unqualified subject is in the default context ``.``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from kfk.registry.schema_types import AVRO, SchemaReference, canonical_text

__all__ = ["RegisteredVersion", "RegistryState", "schema_key", "config_key", "mode_key", "NOOP_KEY", "encode",
           "DEFAULT_CONTEXT", "context_of", "qualify"]

NOOP_KEY = {"keytype": "NOOP", "magic": 0}
DEFAULT_CONTEXT = "."


def context_of(subject: str | None) -> str:
    """The context of a (possibly qualified) subject: ``:.ctx:name`` (or ``:.ctx``) is in ``.ctx``; anything else,
    ``:ctx:name`` included (a context starts with a dot), is in the default context."""
    if subject and subject.startswith(":."):
        end = subject.find(":", 2)
        return subject[1:] if end < 0 else subject[1:end]
    return DEFAULT_CONTEXT


def unqualified(subject: str) -> str:
    if subject.startswith(":."):
        end = subject.find(":", 2)
        return "" if end < 0 else subject[end + 1:]
    return subject


def qualify(subject: str, context: str) -> str:
    """``subject`` in ``context``: unchanged when it names a context of its own or the context is the default."""
    if context == DEFAULT_CONTEXT or subject.startswith(":."):
        return subject
    return f":{context}:{subject}"


def schema_key(subject: str, version: int) -> dict:
    return {"keytype": "SCHEMA", "subject": subject, "version": version, "magic": 1}


def config_key(subject: str | None) -> dict:
    return {"keytype": "CONFIG", "subject": subject, "magic": 0}


def mode_key(subject: str | None) -> dict:
    return {"keytype": "MODE", "subject": subject, "magic": 0}


def encode(document: dict | None) -> bytes | None:
    return None if document is None else json.dumps(document, separators=(",", ":")).encode()


@dataclass
class RegisteredVersion:
    subject: str
    version: int
    schema_id: int
    schema_type: str
    schema: str
    references: list[SchemaReference] = field(default_factory=list)
    deleted: bool = False

    def record_value(self) -> dict:
        value: dict = {"subject": self.subject, "version": self.version, "id": self.schema_id}
        if self.schema_type != AVRO:
            value["schemaType"] = self.schema_type
        if self.references:
            value["references"] = [reference.to_json() for reference in self.references]
        value["schema"] = self.schema
        value["deleted"] = self.deleted
        return value

    def identity(self) -> tuple:
        """What makes two registrations the same schema (and so the same id)."""
        return (self.schema_type, canonical_text(self.schema_type, self.schema),
                tuple((reference.name, reference.subject, reference.version) for reference in self.references))


class RegistryState:
    def __init__(self) -> None:
        self.subjects: dict[str, dict[int, RegisteredVersion]] = {}
        self.max_ids: dict[str, int] = {}  # context -> the highest id it has used
        self.global_compatibility: str | None = None
        self.subject_compatibility: dict[str, str] = {}
        self.global_mode: str | None = None
        self.subject_mode: dict[str, str] = {}
        # Indexes for the hot lookups (a deserializer asks by id), per context: (context, id) -> its registrations;
        # (context, identity) -> id (kept after a hard delete, so that the same schema registered again gets its old id
        # back).
        self._by_id: dict[tuple[str, int], dict[tuple[str, int], RegisteredVersion]] = {}
        self._ids: dict[tuple[str, tuple], int] = {}

    def apply(self, key: dict, value: dict | None) -> None:
        keytype = key.get("keytype")
        subject = key.get("subject")
        if keytype == "SCHEMA":
            versions = self.subjects.setdefault(subject, {})
            context = context_of(subject)
            old = versions.pop(key["version"], None)
            if old is not None:
                self._by_id.get((context, old.schema_id), {}).pop((subject, old.version), None)
            if value is None:
                if not versions:
                    del self.subjects[subject]
                return
            references = [SchemaReference(ref["name"], ref["subject"], ref["version"])
                          for ref in value.get("references") or ()]
            version = RegisteredVersion(subject, value["version"], value["id"], value.get("schemaType") or AVRO,
                                        value["schema"], references, bool(value.get("deleted")))
            versions[version.version] = version
            self._by_id.setdefault((context, version.schema_id), {})[(subject, version.version)] = version
            self._ids.setdefault((context, version.identity()), version.schema_id)
            self.max_ids[context] = max(self.max_ids.get(context, 0), version.schema_id)
        elif keytype == "CONFIG":
            level = None if value is None else value.get("compatibilityLevel")
            if subject is None:
                self.global_compatibility = level
            elif level is None:
                self.subject_compatibility.pop(subject, None)
            else:
                self.subject_compatibility[subject] = level
        elif keytype == "MODE":
            mode = None if value is None else value.get("mode")
            if subject is None:
                self.global_mode = mode
            elif mode is None:
                self.subject_mode.pop(subject, None)
            else:
                self.subject_mode[subject] = mode
        elif keytype == "DELETE_SUBJECT" and value is not None:
            # Confluent's registry marks a subject's versions up to value["version"] deleted with this record.
            for version in self.subjects.get(subject, {}).values():
                if version.version <= value.get("version", version.version):
                    version.deleted = True

    # --- queries -----------------------------------------------------------------------------------------------------

    def versions(self, subject: str, include_deleted: bool = False) -> list[RegisteredVersion]:
        return sorted((version for version in self.subjects.get(subject, {}).values()
                       if include_deleted or not version.deleted), key=lambda version: version.version)

    def by_id(self, schema_id: int, context: str = DEFAULT_CONTEXT) -> list[RegisteredVersion]:
        return sorted(self._by_id.get((context, schema_id), {}).values(),
                      key=lambda version: (version.subject, version.version))

    def id_of(self, identity: tuple, context: str = DEFAULT_CONTEXT) -> int | None:
        return self._ids.get((context, identity))

    def next_id(self, context: str = DEFAULT_CONTEXT) -> int:
        return self.max_ids.get(context, 0) + 1

    def contexts(self) -> list[str]:
        """The default context, then every context a subject was registered in (soft-deleted subjects included),
        in order."""
        return [DEFAULT_CONTEXT] + sorted({context_of(subject) for subject in self.subjects} - {DEFAULT_CONTEXT})

    def referenced_by(self, subject: str, version: int) -> list[int]:
        return sorted({registered.schema_id for versions in self.subjects.values()
                       for registered in versions.values() if not registered.deleted
                       and any(ref.subject == subject and ref.version == version for ref in registered.references)})
