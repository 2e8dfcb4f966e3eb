"""The security page's forms read into Admin requests: an ACL to create or delete, a SCRAM credential to set or
delete, client quotas to set or remove. Each reader raises ValueError with a line for the operator, so the page can
show it above the form still holding what was typed.

Why a module of its own: app.py only routes; what a form field means (a blank quota field leaves the quota as it is,
a blank entity name is the <default> entity, as kafka-configs' --entity-default) is decided here, once; so is the
way back, from a quota entity to the fields of its remove button (quota_entity_fields).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import TypeVar, cast

from kfk.client.structs import ClientQuotaAlteration, UserScramCredentialDeletion, UserScramCredentialUpsertion
from kfk.common.client_quotas import (
    CLIENT_ID, IP, IP_QUOTA_KEYS, USER, USER_CLIENT_QUOTA_KEYS, ClientQuotaEntity)
from kfk.security.acl import (
    AccessControlEntry, AclBinding, AclBindingFilter, AclOperation, AclPermissionType, PatternType, ResourcePattern,
    ResourceType, parse_title)

__all__ = ["ACL_FIELDS", "SCRAM_MECHANISMS", "QUOTA_KEYS", "QUOTA_ENTITY_TYPES", "acl_binding", "acl_filter",
           "scram_upsertion", "scram_deletion", "quota_alteration", "quota_entity_fields"]

ACL_FIELDS = ("resource_type", "resource_name", "pattern_type", "principal", "host", "operation", "permission")
SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
#: Kafka's default (ScramCredentialUtils / kafka-configs): 4096 iterations.
DEFAULT_ITERATIONS = 4096
#: Every key the page edits: a user, client-id or user+client-id entity takes the first four, an ip entity the last
#: (the broker refuses a key its entity does not take, with Kafka's reason).
QUOTA_KEYS = (*USER_CLIENT_QUOTA_KEYS, *IP_QUOTA_KEYS)
#: The entities DescribeClientQuotas/AlterClientQuotas know, as the form's choice spells them.
QUOTA_ENTITY_TYPES: dict[str, tuple[str, ...]] = {
    USER: (USER,), CLIENT_ID: (CLIENT_ID,), f"{USER}+{CLIENT_ID}": (USER, CLIENT_ID), IP: (IP,)}

Form = Mapping[str, str]
Choice = TypeVar("Choice", bound=enum.IntEnum)


def _choice(form: Form, field: str, enum_type: type[Choice], label: str) -> Choice:
    try:
        return cast(Choice, parse_title(enum_type, form.get(field, "").strip()))
    except ValueError:
        raise ValueError(f"choose a {label}") from None


def acl_binding(form: Form) -> AclBinding:
    """The ACL the form names; ValueError with Kafka's own reason when the broker would refuse it."""
    binding = AclBinding(
        ResourcePattern(_choice(form, "resource_type", ResourceType, "resource type"),
                        form.get("resource_name", "").strip(),
                        _choice(form, "pattern_type", PatternType, "pattern type")),
        AccessControlEntry(form.get("principal", "").strip(), form.get("host", "").strip() or "*",
                           _choice(form, "operation", AclOperation, "operation"),
                           _choice(form, "permission", AclPermissionType, "permission")))
    reason = binding.validation_error()
    if reason is not None:
        raise ValueError(reason)
    return binding


def acl_filter(binding: AclBinding) -> AclBindingFilter:
    """A filter matching exactly ``binding`` (DeleteAcls takes filters): the delete button removes its row only."""
    return AclBindingFilter(binding.pattern.resource_type, binding.pattern.name, binding.pattern.pattern_type,
                            binding.entry.principal, binding.entry.host, binding.entry.operation,
                            binding.entry.permission_type)


def _user_and_mechanism(form: Form) -> tuple[str, str]:
    user = form.get("user", "").strip()
    mechanism = form.get("mechanism", "").strip().upper()
    if not user:
        raise ValueError("name the user")
    if mechanism not in SCRAM_MECHANISMS:
        raise ValueError(f"the mechanism is {' or '.join(SCRAM_MECHANISMS)}, not {mechanism!r}")
    return user, mechanism


def scram_upsertion(form: Form) -> UserScramCredentialUpsertion:
    user, mechanism = _user_and_mechanism(form)
    text = form.get("iterations", "").strip()
    try:
        iterations = int(text) if text else DEFAULT_ITERATIONS
    except ValueError:
        raise ValueError(f"iterations must be a whole number, not {text!r}") from None
    password = form.get("password", "")
    if not password:
        raise ValueError("type the password")
    return UserScramCredentialUpsertion(user, mechanism, iterations, password)


def scram_deletion(form: Form) -> UserScramCredentialDeletion:
    return UserScramCredentialDeletion(*_user_and_mechanism(form))


def quota_alteration(form: Form, *, remove_all: bool = False) -> ClientQuotaAlteration:
    """The entity (``entity_type``: a user, a client-id, a user and client-id pair or an ip; ``entity_name`` the user,
    client-id or ip, and ``client_id`` the client-id of a pair; a blank name is that type's <default>) and, per
    quota key, the new value; a blank field leaves that quota as it is, a ticked ``remove_<key>`` removes it, and
    ``remove_all`` removes every key the entity takes."""
    kind = form.get("entity_type", "").strip()
    if kind not in QUOTA_ENTITY_TYPES:
        raise ValueError(f"the entity is a {', a '.join(QUOTA_ENTITY_TYPES)}, not {kind!r}")
    names = (form.get("entity_name", ""), form.get("client_id", ""))
    entity = ClientQuotaEntity.of((part, name.strip() or None) for part, name in zip(QUOTA_ENTITY_TYPES[kind], names))
    ops: dict[str, float | None] = {}
    # Every typed key goes to the broker, which refuses one the entity does not take (Kafka's "Invalid
    # configuration key"); removing them all removes the keys of the entity's own kind.
    keys = (IP_QUOTA_KEYS if kind == IP else USER_CLIENT_QUOTA_KEYS) if remove_all else QUOTA_KEYS
    for key in keys:
        text = form.get(key, "").strip()
        if remove_all or form.get(f"remove_{key}"):
            ops[key] = None
        elif text:
            try:
                ops[key] = float(text)
            except ValueError:
                raise ValueError(f"{key} must be a number, not {text!r}") from None
    if not ops:
        raise ValueError("type at least one quota (or tick one to remove)")
    return ClientQuotaAlteration(entity, ops)


def quota_entity_fields(entity: ClientQuotaEntity) -> dict[str, str]:
    """The form fields naming ``entity`` (quota_alteration reads them back), for the buttons of its row."""
    parts = entity.as_dict()
    kind = next(name for name, types in QUOTA_ENTITY_TYPES.items() if set(types) == set(parts))
    names = [parts[part] or "" for part in QUOTA_ENTITY_TYPES[kind]]
    return {"entity_type": kind, "entity_name": names[0], "client_id": names[1] if len(names) > 1 else ""}
