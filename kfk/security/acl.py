"""ACLs as Kafka defines them: resource types, pattern types, operations, permissions, bindings and filters.

The numeric ids are Kafka's wire and metadata-record ids (CreateAcls, DescribeAcls, AccessControlEntryRecord); the
names are those Kafka's tools print and its ZooKeeper znodes hold (`Topic`, `Read`, `Allow`...). A binding is one
rule: a resource pattern (type, name, literal or prefixed) and an entry (principal, host, operation, permission).
Filters (DescribeAcls, DeleteAcls) use ANY for "every value" and MATCH for "every pattern that applies to this name".
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

#: The resource name that matches every resource of its type (a LITERAL pattern), and the principal (User:*) and
#: host that match everyone.
WILDCARD_RESOURCE = "*"
WILDCARD_PRINCIPAL = "User:*"
WILDCARD_HOST = "*"
#: The only CLUSTER resource's name.
CLUSTER_NAME = "kafka-cluster"


class ResourceType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7

    @property
    def title(self) -> str:
        """`Topic`, `TransactionalId`...: the name in Kafka's znodes and tool output."""
        return "".join(part.capitalize() for part in self.name.split("_"))


class PatternType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14

    @property
    def title(self) -> str:
        """`Read`, `DescribeConfigs`...: the name in Kafka's znodes and tool output."""
        return "".join(part.capitalize() for part in self.name.split("_"))


class AclPermissionType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3

    @property
    def title(self) -> str:
        return self.name.capitalize()


def parse_title(enum_type: type[enum.IntEnum], text: str) -> enum.IntEnum:
    """`Read`, `read`, `READ`, `DescribeConfigs`, `describe_configs` -> the member; ValueError otherwise."""
    wanted = text.replace("_", "").replace("-", "").lower()
    for member in enum_type:
        if member.name.replace("_", "").lower() == wanted:
            return member
    raise ValueError(f"unknown {enum_type.__name__} {text!r}")


#: An ALLOW of the operation on the left also allows those on the right (Kafka's implied operations).
IMPLIED_BY_ALLOW: dict[AclOperation, frozenset[AclOperation]] = {
    AclOperation.DESCRIBE: frozenset({AclOperation.READ, AclOperation.WRITE, AclOperation.DELETE, AclOperation.ALTER}),
    AclOperation.DESCRIBE_CONFIGS: frozenset({AclOperation.ALTER_CONFIGS}),
}


@dataclass(frozen=True, slots=True)
class ResourcePattern:
    resource_type: ResourceType
    name: str
    pattern_type: PatternType

    def matches(self, resource_type: ResourceType, name: str) -> bool:
        """Whether this (literal or prefixed) pattern applies to the resource `name` of `resource_type`."""
        if resource_type != self.resource_type:
            return False
        if self.pattern_type == PatternType.PREFIXED:
            return name.startswith(self.name)
        return self.name == name or self.name == WILDCARD_RESOURCE


@dataclass(frozen=True, slots=True)
class AccessControlEntry:
    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType


@dataclass(frozen=True, slots=True)
class AclBinding:
    pattern: ResourcePattern
    entry: AccessControlEntry

    @staticmethod
    def of(resource_type: int, name: str, pattern_type: int, principal: str, host: str, operation: int,
           permission_type: int) -> AclBinding:
        """A binding from wire or record ids (ValueError for an id Kafka does not define)."""
        return AclBinding(ResourcePattern(ResourceType(resource_type), name, PatternType(pattern_type)),
                          AccessControlEntry(principal, host, AclOperation(operation),
                                             AclPermissionType(permission_type)))

    def validation_error(self) -> str | None:
        """Why Kafka refuses to create this binding (None: it can be created)."""
        pattern, entry = self.pattern, self.entry
        if pattern.resource_type in (ResourceType.ANY, ResourceType.UNKNOWN):
            return "Invalid resource type"
        if pattern.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
            return f"Invalid pattern type {pattern.pattern_type.name}"
        if entry.operation in (AclOperation.ANY, AclOperation.UNKNOWN):
            return "Invalid operation"
        if entry.permission_type not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
            return "Invalid permission type"
        if not pattern.name:
            return "Resource name should not be empty"
        if pattern.resource_type == ResourceType.CLUSTER and pattern.name != CLUSTER_NAME:
            return f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
        principal_type, colon, _ = entry.principal.partition(":")
        if not colon or not principal_type:
            return f"Could not parse principal from `{entry.principal}` (no colon is present separating the " \
                   "principal type from the principal name)"
        return None


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """None in a text field, ANY in an enum field: any value. MATCH as pattern type: every literal or prefixed
    pattern that would apply to resource `name` (and the wildcard literal)."""

    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission_type: AclPermissionType = AclPermissionType.ANY

    def validation_error(self) -> str | None:
        if ResourceType.UNKNOWN == self.resource_type or self.pattern_type == PatternType.UNKNOWN \
                or self.operation == AclOperation.UNKNOWN or self.permission_type == AclPermissionType.UNKNOWN:
            return "The filter has an unknown element"
        return None

    def matches(self, binding: AclBinding) -> bool:
        pattern, entry = binding.pattern, binding.entry
        if self.resource_type != ResourceType.ANY and self.resource_type != pattern.resource_type:
            return False
        if self.pattern_type == PatternType.MATCH:
            if self.name is not None and not pattern.matches(pattern.resource_type, self.name):
                return False
        else:
            if self.pattern_type != PatternType.ANY and self.pattern_type != pattern.pattern_type:
                return False
            if self.name is not None and self.name != pattern.name:
                return False
        return (
            (self.principal is None or self.principal == entry.principal)
            and (self.host is None or self.host == entry.host)
            and (self.operation == AclOperation.ANY or self.operation == entry.operation)
            and (self.permission_type == AclPermissionType.ANY or self.permission_type == entry.permission_type)
        )
