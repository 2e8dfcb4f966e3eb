"""The Authorizer: may this principal, from this host, do this operation on this resource? (Kafka's StandardAuthorizer
semantics.)

Rules, in order: a super user may do anything; the ACLs that apply to the resource are the literal ones naming it,
the literal wildcard `*` of its type, and the prefixed ones whose prefix starts its name; among those that name the
principal (or `User:*`) and the host (or `*`), a DENY of the operation (or ALL) refuses, whatever allows it; an
ALLOW of the operation, of ALL, or of an operation that implies it (READ, WRITE, DELETE, ALTER imply DESCRIBE;
ALTER_CONFIGS implies DESCRIBE_CONFIGS) permits; nothing matching refuses. A resource that no ACL applies to at all
is refused too, unless `allow.everyone.if.no.acl.found`.

The ACLs live in the metadata image; the broker calls `update` with the image's ACLs whenever they change, which
rebuilds the index by resource: authorizing a Produce of one topic is a few dictionary lookups (the literal name,
the wildcard, one per distinct prefix length), however many ACLs the cluster has.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from kfk.security.acl import (
    IMPLIED_BY_ALLOW,
    WILDCARD_HOST,
    WILDCARD_PRINCIPAL,
    WILDCARD_RESOURCE,
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from kfk.security.principal import USER_TYPE, KafkaPrincipal

log = logging.getLogger("kfk.authorizer")

#: The authorizer.class.name values that turn authorization on: Kafka's KRaft and ZooKeeper-mode authorizers, both
#: served by this one implementation over whichever metadata backend the broker uses.
AUTHORIZER_CLASS_NAMES = frozenset({
    "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "kafka.security.authorizer.AclAuthorizer",
})

_NOTHING: frozenset[AclOperation] = frozenset()


class Authorizer:
    def __init__(self, super_users: Iterable[str] = (), allow_everyone_if_no_acl_found: bool = False,
                 acls: Iterable[AclBinding] = ()) -> None:
        self.super_users = frozenset(super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        #: Per resource type, its ACL entries by literal name and by prefix.
        self._literal: dict[ResourceType, dict[str, tuple[AccessControlEntry, ...]]] = {}
        self._prefixed: dict[ResourceType, dict[str, tuple[AccessControlEntry, ...]]] = {}
        #: Per resource type, the lengths of its prefixed ACLs' prefixes, shortest first: the names to look up.
        self._prefix_lengths: dict[ResourceType, tuple[int, ...]] = {}
        self._acls: tuple[AclBinding, ...] = ()
        self.update(acls)

    def update(self, acls: Iterable[AclBinding]) -> None:
        """Replace every ACL (the image's ACLs after a change): the index is rebuilt, then swapped in whole, so a
        request being authorized sees the old or the new set, never half of one."""
        literal: dict[ResourceType, dict[str, list[AccessControlEntry]]] = {}
        prefixed: dict[ResourceType, dict[str, list[AccessControlEntry]]] = {}
        bindings = tuple(acls)
        for binding in bindings:
            pattern = binding.pattern
            index = prefixed if pattern.pattern_type == PatternType.PREFIXED else literal
            index.setdefault(pattern.resource_type, {}).setdefault(pattern.name, []).append(binding.entry)
        self._literal = {kind: {name: tuple(entries) for name, entries in by_name.items()}
                         for kind, by_name in literal.items()}
        self._prefixed = {kind: {name: tuple(entries) for name, entries in by_name.items()}
                          for kind, by_name in prefixed.items()}
        self._prefix_lengths = {kind: tuple(sorted({len(name) for name in by_name}))
                                for kind, by_name in prefixed.items()}
        self._acls = bindings

    @property
    def acls(self) -> tuple[AclBinding, ...]:
        return self._acls

    def _entries(self, resource_type: ResourceType, name: str) -> list[tuple[AccessControlEntry, ...]]:
        """The entries of every pattern that applies to the resource, pattern by pattern."""
        found = []
        literal = self._literal.get(resource_type)
        if literal is not None:
            entries = literal.get(name)
            if entries is not None:
                found.append(entries)
            if name != WILDCARD_RESOURCE:
                entries = literal.get(WILDCARD_RESOURCE)
                if entries is not None:
                    found.append(entries)
        prefixed = self._prefixed.get(resource_type)
        if prefixed is not None:
            for length in self._prefix_lengths[resource_type]:
                if length > len(name):
                    break
                entries = prefixed.get(name[:length])
                if entries is not None:
                    found.append(entries)
        return found

    def is_super_user(self, principal: KafkaPrincipal) -> bool:
        return str(principal) in self.super_users

    def authorize(self, principal: KafkaPrincipal, host: str, operation: AclOperation, resource_type: ResourceType,
                  name: str) -> bool:
        """Whether `principal` connected from `host` may do `operation` on the resource."""
        principal_text = str(principal)
        if principal_text in self.super_users:
            return True
        wildcard_principal = principal.principal_type == USER_TYPE
        implying = IMPLIED_BY_ALLOW.get(operation, _NOTHING)
        found = allowed = False
        for entry in (entry for entries in self._entries(resource_type, name) for entry in entries):
            found = True
            if entry.principal != principal_text and not (wildcard_principal and entry.principal == WILDCARD_PRINCIPAL):
                continue
            if entry.host != WILDCARD_HOST and entry.host != host:
                continue
            if entry.permission_type == AclPermissionType.DENY:
                if entry.operation == operation or entry.operation == AclOperation.ALL:
                    self._log_denied(principal_text, host, operation, resource_type, name, "a DENY ACL")
                    return False
            elif not allowed and (entry.operation == operation or entry.operation == AclOperation.ALL
                                  or entry.operation in implying):
                allowed = True
        if not found:
            allowed = self.allow_everyone_if_no_acl_found
        if not allowed:
            self._log_denied(principal_text, host, operation, resource_type, name, "no ACL allows it")
        return allowed

    def authorize_by_resource_type(self, principal: KafkaPrincipal, host: str, operation: AclOperation,
                                   resource_type: ResourceType) -> bool:
        """Whether `principal` may do `operation` on at least one resource of the type (Kafka's
        authorizeByResourceType, KIP-679: an idempotent producer may write to some topic): some ALLOW that applies
        to it, of a pattern no DENY of it covers."""
        principal_text = str(principal)
        if principal_text in self.super_users:
            return True

        def applies(entry: AccessControlEntry, permission: AclPermissionType) -> bool:
            return entry.permission_type == permission \
                and entry.principal in (principal_text, WILDCARD_PRINCIPAL) \
                and entry.host in (host, WILDCARD_HOST) \
                and entry.operation in (operation, AclOperation.ALL)

        literal, prefixed = self._literal.get(resource_type, {}), self._prefixed.get(resource_type, {})
        denied_literal = {name for name, entries in literal.items()
                          if any(applies(entry, AclPermissionType.DENY) for entry in entries)}
        if WILDCARD_RESOURCE in denied_literal:
            return False
        denied_prefixes = [name for name, entries in prefixed.items()
                           if any(applies(entry, AclPermissionType.DENY) for entry in entries)]
        for index, pattern_type in ((literal, PatternType.LITERAL), (prefixed, PatternType.PREFIXED)):
            for name, entries in index.items():
                if not any(applies(entry, AclPermissionType.ALLOW) for entry in entries):
                    continue
                if pattern_type == PatternType.LITERAL and name in denied_literal:
                    continue
                if not any(name.startswith(prefix) for prefix in denied_prefixes):
                    return True
        if self.allow_everyone_if_no_acl_found:
            return not literal and not prefixed
        return False

    @staticmethod
    def _log_denied(principal: str, host: str, operation: AclOperation, resource_type: ResourceType, name: str,
                    reason: str) -> None:
        if log.isEnabledFor(logging.DEBUG):
            log.debug("Principal = %s is Denied operation = %s from host = %s on resource = %s:%s (%s)",
                      principal, operation.title, host, resource_type.title, name, reason)
