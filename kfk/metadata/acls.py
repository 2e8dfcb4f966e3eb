"""The ACL part of the metadata image: every ACL by its id, from AccessControlEntryRecord and
RemoveAccessControlEntryRecord (KRaft's records; the ZooKeeper backend translates /kafka-acl znodes to the same).

The image keeps the ids so DeleteAcls can name what it removes; the authorizer reads the bindings alone.
"""

from __future__ import annotations

import uuid
from typing import Mapping

from kfk.protocol.message import Message
from kfk.protocol.metadata_records import schema_class
from kfk.security.acl import AclBinding

AccessControlEntryRecord = schema_class("AccessControlEntryRecord")
RemoveAccessControlEntryRecord = schema_class("RemoveAccessControlEntryRecord")


def binding_of(record: Message) -> AclBinding:
    """The AclBinding an AccessControlEntryRecord describes."""
    return AclBinding.of(record.resource_type, record.resource_name, record.pattern_type, record.principal,
                         record.host, record.operation, record.permission_type)


def record_of(acl_id: uuid.UUID, binding: AclBinding) -> Message:
    pattern, entry = binding.pattern, binding.entry
    return AccessControlEntryRecord(
        id=acl_id, resource_type=pattern.resource_type, resource_name=pattern.name, pattern_type=pattern.pattern_type,
        principal=entry.principal, host=entry.host, operation=entry.operation, permission_type=entry.permission_type)


def access_control_entry_record(delta, record: Message) -> None:
    """MetadataImage.apply's handler of AccessControlEntryRecord (`delta`: the image's _Delta)."""
    delta.mutable_acls()[record.id] = binding_of(record)


def remove_access_control_entry_record(delta, record: Message) -> None:
    delta.mutable_acls().pop(record.id, None)


def acl_ids(acls: Mapping[uuid.UUID, AclBinding]) -> dict[AclBinding, uuid.UUID]:
    """The id of each binding (a binding is stored once)."""
    return {binding: acl_id for acl_id, binding in acls.items()}
