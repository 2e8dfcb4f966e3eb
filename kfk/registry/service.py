"""The registry's operations (Confluent Schema Registry's semantics), over a KafkaStore: every change is a record
written through _schemas and applied by the store's reader, every answer read from the state under the store's
lock. Writes are serialized by one lock per instance (on several instances, only the primary writes: see
election.py), so that version numbers and ids are allocated from a state that includes every earlier write."""

from __future__ import annotations

import threading
from typing import Any

from kfk.registry import errors
from kfk.registry.compatibility import COMPATIBILITY_LEVELS, DEFAULT_COMPATIBILITY, check_compatibility
from kfk.registry.errors import RegistryError
from kfk.registry.kafka_store import KafkaStore
from kfk.registry.schema_types import (
    AVRO,
    PROTOBUF,
    SCHEMA_TYPES,
    ParsedSchema,
    SchemaParseError,
    SchemaReference,
    canonical_text,
    parse_schema,
)
from kfk.registry.state import (
    DEFAULT_CONTEXT,
    RegisteredVersion,
    config_key,
    context_of,
    mode_key,
    qualify,
    schema_key,
    unqualified,
)

__all__ = ["SchemaRegistry", "MODES"]

MODES = ("READWRITE", "READONLY", "READONLY_OVERRIDE", "IMPORT")
MAX_VERSION = 2**31 - 1


class SchemaRegistry:
    def __init__(self, store: KafkaStore) -> None:
        self.store = store
        self.state = store.state
        self._write_lock = threading.Lock()
        self._parsed: dict[tuple, ParsedSchema] = {}  # parsed schemas by identity: parsing is the costly part

    # --- reading -----------------------------------------------------------------------------------------------------

    def subjects(self, deleted: bool = False, prefix: str = "") -> list[str]:
        """Subjects of every context (qualified but for the default context's), or those starting with ``prefix``;
        the prefix ``:*:name`` matches ``name`` in any context."""
        if prefix.startswith(":*:"):
            def matches(subject: str) -> bool:
                return unqualified(subject).startswith(prefix[3:])
        else:
            def matches(subject: str) -> bool:
                return subject.startswith(prefix)
        with self.store.lock():
            return sorted(subject for subject in self.state.subjects
                          if matches(subject) and self.state.versions(subject, deleted))

    def contexts(self) -> list[str]:
        with self.store.lock():
            return self.state.contexts()

    def versions(self, subject: str, deleted: bool = False) -> list[int]:
        with self.store.lock():
            found = self.state.versions(subject, deleted)
        if not found:
            raise errors.subject_not_found(subject)
        return [version.version for version in found]

    def version(self, subject: str, version: str, deleted: bool = False) -> RegisteredVersion:
        number = parse_version(version)
        with self.store.lock():
            live = self.state.versions(subject, deleted)
            if not live:
                raise errors.subject_not_found(subject)
            if number == -1:
                return live[-1]
            registered = self.state.subjects[subject].get(number)
        if registered is None or (registered.deleted and not deleted):
            raise errors.version_not_found(number)
        return registered

    def schema_by_id(self, schema_id: int, subject: str | None = None) -> RegisteredVersion:
        found = self._registrations_of(schema_id, subject)
        if subject:
            found = [version for version in found if unqualified(version.subject) == unqualified(subject)] or found
        return found[0]

    def id_usages(self, schema_id: int, deleted: bool = False, subject: str | None = None) -> list[RegisteredVersion]:
        return [version for version in self._registrations_of(schema_id, subject) if deleted or not version.deleted]

    def _registrations_of(self, schema_id: int, subject: str | None) -> list[RegisteredVersion]:
        """An id's registrations in the subject's context; for an unqualified subject (or none), in the default
        context, else in the first other context that has the id (as Confluent's registry looks ids up)."""
        context = context_of(subject)
        with self.store.lock():
            found = self.state.by_id(schema_id, context)
            if not found and context == DEFAULT_CONTEXT:
                found = next((registered for registered in (self.state.by_id(schema_id, other)
                                                            for other in self.state.contexts()[1:]) if registered), [])
        if not found:
            raise errors.schema_not_found(schema_id)
        return found

    def referenced_by(self, subject: str, version: str) -> list[int]:
        registered = self.version(subject, version)
        with self.store.lock():
            return self.state.referenced_by(subject, registered.version)

    def formatted(self, version: RegisteredVersion, fmt: str) -> str:
        """A version's schema in the format a reader asks for: a Protobuf schema as a base64 FileDescriptorProto
        for ``serialized`` (what confluent-kafka's deserializers ask for); otherwise as stored."""
        if fmt == "serialized" and version.schema_type == PROTOBUF:
            return self._parsed_version(version).serialized()
        return version.schema

    def lookup(self, subject: str, body: dict, deleted: bool = False, normalize: bool = False) -> RegisteredVersion:
        """POST /subjects/{subject}: the version under which this schema is registered; with ``normalize``, the
        registered versions are compared in their normalized form too."""
        schema_type, text, references = self._request_schema(body, subject)
        parsed = self._parse(schema_type, text, references, normalize)
        identity = RegisteredVersion(subject, 0, 0, schema_type, parsed.canonical, references).identity()
        with self.store.lock():
            versions = self.state.versions(subject, deleted)
        if not versions:
            raise errors.subject_not_found(subject)
        for registered in reversed(versions):
            if registered.identity() == identity:
                return registered
        if normalize:
            schema_type, _, imports = identity
            for registered in reversed(versions):
                if registered.identity()[::2] == (schema_type, imports) and \
                        self._parsed_version(registered).normalized().canonical == parsed.canonical:
                    return registered
        raise errors.schema_not_found()

    def compatibility(self, subject: str | None, default_to_global: bool = False) -> str:
        """The subject's level; with ``default_to_global``, else its context's (configured at ``:.ctx:``), else the
        global one."""
        with self.store.lock():
            if subject is not None:
                level = self.state.subject_compatibility.get(subject)
                if level is not None:
                    return level
                if not default_to_global:
                    raise RegistryError(404, errors.SUBJECT_COMPATIBILITY_NOT_CONFIGURED,
                                        f"Subject '{subject}' does not have subject-level compatibility configured")
                level = self.state.subject_compatibility.get(_context_subject(subject))
                if level is not None:
                    return level
            return self.state.global_compatibility or DEFAULT_COMPATIBILITY

    def mode(self, subject: str | None, default_to_global: bool = False) -> str:
        with self.store.lock():
            if subject is not None:
                mode = self.state.subject_mode.get(subject)
                if mode is not None:
                    return mode
                if not default_to_global:
                    raise RegistryError(404, errors.SUBJECT_MODE_NOT_CONFIGURED,
                                        f"Subject '{subject}' does not have subject-level mode configured")
                mode = self.state.subject_mode.get(_context_subject(subject))
                if mode is not None:
                    return mode
            return self.state.global_mode or "READWRITE"

    def test_compatibility(self, subject: str, version: str | None, body: dict) -> list[str]:
        """The reasons the schema in ``body`` may not be registered after ``version`` (all live versions the level
        concerns when ``version`` is None); empty when it may."""
        schema_type, text, references = self._request_schema(body, subject)
        candidate = self._parse(schema_type, text, references)
        level = self.compatibility(subject, default_to_global=True)
        if version is None:
            with self.store.lock():
                previous = self.state.versions(subject)
        else:
            try:
                previous = [self.version(subject, version)]
            except RegistryError as error:
                if error.error_code == errors.SUBJECT_NOT_FOUND:
                    return []  # nothing to be incompatible with, as Confluent answers
                raise
            level = level.replace("_TRANSITIVE", "")
        return self._reasons(level, candidate, previous)

    # --- writing -----------------------------------------------------------------------------------------------------

    def register(self, subject: str, body: dict, normalize: bool = False) -> RegisteredVersion:
        schema_type, text, references = self._request_schema(body, subject)
        parsed = self._parse(schema_type, text, references, normalize)
        with self._write_lock:
            self._check_writable(subject)
            candidate = RegisteredVersion(subject, 0, 0, schema_type, parsed.canonical, references)
            identity = candidate.identity()
            with self.store.lock():
                every = self.state.versions(subject, include_deleted=True)
                live = [version for version in every if not version.deleted]
                for registered in live:
                    if registered.identity() == identity:
                        return registered
                existing_id = self.state.id_of(identity, context_of(subject))
                next_id = self.state.next_id(context_of(subject))
            level = self.compatibility(subject, default_to_global=True)
            reasons = self._reasons(level, parsed, live)
            if reasons:
                raise RegistryError(409, errors.INCOMPATIBLE_SCHEMA,
                                    f"Schema being registered is incompatible with an earlier schema for subject "
                                    f"\"{subject}\", details: [{', '.join(reasons)}]")
            candidate.schema_id = existing_id if existing_id is not None else next_id
            candidate.version = (every[-1].version if every else 0) + 1
            self.store.write(schema_key(subject, candidate.version), candidate.record_value())
            return candidate

    def delete_subject(self, subject: str, permanent: bool) -> list[int]:
        with self._write_lock:
            self._check_writable(subject)
            with self.store.lock():
                every = self.state.versions(subject, include_deleted=True)
            if not every:
                raise errors.subject_not_found(subject)
            live = [version for version in every if not version.deleted]
            if permanent:
                if live:
                    raise RegistryError(404, errors.SUBJECT_NOT_SOFT_DELETED,
                                        f"Subject '{subject}' was not deleted first before being permanently deleted")
                self._check_unreferenced(every)
                self.store.write_all([(schema_key(subject, version.version), None) for version in every]
                                     + [(config_key(subject), None)] * (subject in self.state.subject_compatibility))
                return [version.version for version in every]
            if not live:
                raise RegistryError(404, errors.SUBJECT_SOFT_DELETED, f"Subject '{subject}' was soft deleted.Set "
                                    "permanent=true to delete permanently")
            self._check_unreferenced(live)
            self.store.write_all([(schema_key(subject, version.version), _deleted(version)) for version in live])
            return [version.version for version in live]

    def delete_version(self, subject: str, version: str, permanent: bool) -> int:
        number = parse_version(version)
        with self._write_lock:
            self._check_writable(subject)
            # a soft-deleted version is found (to be refused, or deleted permanently); latest is the latest live one
            registered = self.version(subject, version, deleted=number != -1)
            if permanent:
                if not registered.deleted:
                    raise RegistryError(404, errors.VERSION_NOT_SOFT_DELETED,
                                        f"Subject '{subject}' Version {registered.version} was not deleted first "
                                        "before being permanently deleted")
                self._check_unreferenced([registered])
                self.store.write(schema_key(subject, registered.version), None)
            else:
                if registered.deleted:
                    raise RegistryError(404, errors.VERSION_SOFT_DELETED,
                                        f"Subject '{subject}' Version {registered.version} was soft deleted.Set "
                                        "permanent=true to delete permanently")
                self._check_unreferenced([registered])
                self.store.write(schema_key(subject, registered.version), _deleted(registered))
            return registered.version

    def set_compatibility(self, subject: str | None, level: Any) -> str:
        if not isinstance(level, str) or level.upper() not in COMPATIBILITY_LEVELS:
            raise RegistryError(422, errors.INVALID_COMPATIBILITY_LEVEL,
                                "Invalid compatibility level. Valid values are none, backward, forward, full, "
                                "backward_transitive, forward_transitive, and full_transitive")
        with self._write_lock:
            self.store.write(config_key(subject), {"compatibilityLevel": level.upper()})
        return level.upper()

    def delete_compatibility(self, subject: str | None) -> str:
        previous = self.compatibility(subject, default_to_global=subject is None)
        with self._write_lock:
            self.store.write(config_key(subject), None)
        return previous

    def set_mode(self, subject: str | None, mode: Any) -> str:
        if not isinstance(mode, str) or mode.upper() not in MODES:
            raise RegistryError(422, errors.INVALID_MODE,
                                "Invalid mode. Valid values are READWRITE, READONLY, READONLY_OVERRIDE and IMPORT")
        with self._write_lock:
            self.store.write(mode_key(subject), {"mode": mode.upper()})
        return mode.upper()

    def delete_mode(self, subject: str) -> str:
        previous = self.mode(subject)
        with self._write_lock:
            self.store.write(mode_key(subject), None)
        return previous

    # --- helpers -----------------------------------------------------------------------------------------------------

    def _check_writable(self, subject: str) -> None:
        if self.mode(subject, default_to_global=True) in ("READONLY", "READONLY_OVERRIDE"):
            raise RegistryError(422, errors.OPERATION_NOT_PERMITTED, f"Subject {subject} is in read-only mode")

    def _check_unreferenced(self, versions: list[RegisteredVersion]) -> None:
        with self.store.lock():
            for version in versions:
                if self.state.referenced_by(version.subject, version.version):
                    raise RegistryError(422, errors.REFERENCE_EXISTS,
                                        f"One or more references exist to the schema {{magic=1,keytype=SCHEMA,"
                                        f"subject={version.subject},version={version.version}}}.")

    def _request_schema(self, body: Any, subject: str) -> tuple[str, str, list[SchemaReference]]:
        """The schema a request carries: its type, text and references (an unqualified reference names a subject of
        the registering subject's context)."""
        if not isinstance(body, dict) or not isinstance(body.get("schema"), str):
            raise errors.invalid_schema("the request needs a \"schema\" string")
        schema_type = body.get("schemaType") or AVRO
        if schema_type not in SCHEMA_TYPES:
            raise errors.invalid_schema(f"unknown schema type {schema_type!r}")
        references = []
        for reference in body.get("references") or ():
            try:
                name, version = reference["name"], reference["version"]
                registered = self.version(qualify(reference["subject"], context_of(subject)), str(version))
            except (KeyError, TypeError):
                raise errors.invalid_schema("a reference needs a name, a subject and a version") from None
            except RegistryError:
                raise errors.invalid_schema(f"the reference {reference.get('name')!r} names subject "
                                            f"{reference.get('subject')!r} version {reference.get('version')}, "
                                            "which does not exist") from None
            references.append(SchemaReference(name, registered.subject, registered.version, registered.schema))
        return schema_type, body["schema"], references

    def _parse(self, schema_type: str, text: str, references: list[SchemaReference],
               normalize: bool = False) -> ParsedSchema:
        key = (schema_type, canonical_text(schema_type, text),
               tuple((reference.name, reference.subject, reference.version) for reference in references))
        parsed = self._parsed.get(key)
        if parsed is None:
            try:
                parsed = parse_schema(schema_type, text, self._with_dependencies(references))
            except SchemaParseError as error:
                raise errors.invalid_schema(str(error)) from None
            self._parsed[key] = parsed
        return parsed.normalized() if normalize else parsed

    def _with_dependencies(self, references: list[SchemaReference]) -> list[SchemaReference]:
        """The references and, before each, the references of its own version, transitively (a Protobuf file
        linked after the files it imports); each name once."""
        found: dict[str, SchemaReference] = {}

        def add(reference: SchemaReference) -> None:
            if reference.name in found:
                return
            found[reference.name] = reference  # first, so that a cycle ends here
            registered = self.version(reference.subject, str(reference.version), deleted=True)
            for dependency in registered.references:
                add(SchemaReference(dependency.name, dependency.subject, dependency.version,
                                    self.version(dependency.subject, str(dependency.version), deleted=True).schema))
            found[reference.name] = found.pop(reference.name)  # after its dependencies
        for reference in references:
            add(reference)
        return list(found.values())

    def _parsed_version(self, version: RegisteredVersion) -> ParsedSchema:
        references = [SchemaReference(reference.name, reference.subject, reference.version,
                                      self.version(reference.subject, str(reference.version), deleted=True).schema)
                      for reference in version.references]
        return self._parse(version.schema_type, version.schema, references)

    def _reasons(self, level: str, candidate: ParsedSchema, previous: list[RegisteredVersion]) -> list[str]:
        if level == "NONE" or not previous:
            return []
        parsed = [(version.version, self._parsed_version(version)) for version in previous]
        found = check_compatibility(level, candidate, parsed)
        if not found:
            return []
        versions = sorted({version for version, _ in found})
        return [str(reason) for _, reason in found] + [f"{{oldSchemaVersion: {version}}}" for version in versions] + \
            [f"{{compatibility: '{level}'}}"]


def _context_subject(subject: str) -> str | None:
    """Where a context's own config and mode are kept: under the subject ``:.ctx:`` (None for the default context,
    whose are the global ones)."""
    context = context_of(subject)
    return None if context == DEFAULT_CONTEXT else f":{context}:"


def _deleted(version: RegisteredVersion) -> dict:
    value = version.record_value()
    value["deleted"] = True
    return value


def parse_version(version: str) -> int:
    """A version in a path: 1..2^31-1, or latest (-1, as Confluent also accepts)."""
    if version == "latest":
        return -1
    try:
        number = int(version)
    except ValueError:
        raise errors.invalid_version(version) from None
    if number == -1:
        return -1
    if not 1 <= number <= MAX_VERSION:
        raise errors.invalid_version(version)
    return number
