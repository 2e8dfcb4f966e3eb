"""CreateAcls and DeleteAcls, decided by the active controller (Kafka's AclControlManager).

A creation that is already in the image succeeds without a record (creating twice is not an error in Kafka); each
new ACL gets a random id and an AccessControlEntryRecord. A deletion filter removes every ACL it matches (one
RemoveAccessControlEntryRecord per ACL, once however many filters match it) and answers with what it removed.
"""

from __future__ import annotations

import uuid

from kfk.controller.result import ControllerResult
from kfk.errors import ErrorCode
from kfk.metadata.acls import RemoveAccessControlEntryRecord, acl_ids, record_of
from kfk.metadata.image import MetadataImage
from kfk.protocol.message import Message
from kfk.protocol.messages.create_acls import CreateAclsRequest, CreateAclsResponse
from kfk.protocol.messages.delete_acls import DeleteAclsRequest, DeleteAclsResponse
from kfk.security.acl import AclBinding, AclBindingFilter, AclOperation, AclPermissionType, PatternType, ResourceType

CreationResult = CreateAclsResponse.AclCreationResult
FilterResult = DeleteAclsResponse.DeleteAclsFilterResult
MatchingAcl = DeleteAclsResponse.DeleteAclsMatchingAcl


def binding_filter_of(message: Message) -> AclBindingFilter:
    """The filter of a DescribeAcls request or a DeleteAcls filter (ValueError for an id Kafka does not define)."""
    return AclBindingFilter(
        ResourceType(message.resource_type_filter), message.resource_name_filter,
        PatternType(message.pattern_type_filter), message.principal_filter, message.host_filter,
        AclOperation(message.operation), AclPermissionType(message.permission_type))


def create_acls(image: MetadataImage, request: CreateAclsRequest) -> ControllerResult[CreateAclsResponse]:
    existing = acl_ids(image.acls)
    records: list[Message] = []
    results = []
    for creation in request.creations:
        try:
            binding = AclBinding.of(creation.resource_type, creation.resource_name, creation.resource_pattern_type,
                                    creation.principal, creation.host, creation.operation, creation.permission_type)
            error = binding.validation_error()
        except ValueError as problem:
            binding, error = None, str(problem)
        if error is not None:
            results.append(CreationResult(error_code=ErrorCode.INVALID_REQUEST, error_message=error))
            continue
        if binding not in existing:
            existing[binding] = acl_id = uuid.uuid4()
            records.append(record_of(acl_id, binding))
        results.append(CreationResult(error_code=ErrorCode.NONE, error_message=None))
    return ControllerResult(CreateAclsResponse(results=results), records)


def delete_acls(image: MetadataImage, request: DeleteAclsRequest) -> ControllerResult[DeleteAclsResponse]:
    removed: set[uuid.UUID] = set()
    records: list[Message] = []
    results = []
    for message in request.filters:
        try:
            acl_filter = binding_filter_of(message)
            error = acl_filter.validation_error()
        except ValueError as problem:
            acl_filter, error = None, str(problem)
        if error is not None:
            results.append(FilterResult(error_code=ErrorCode.INVALID_REQUEST, error_message=error, matching_acls=[]))
            continue
        matching = []
        for acl_id, binding in image.acls.items():
            if not acl_filter.matches(binding):
                continue
            if acl_id not in removed:
                removed.add(acl_id)
                records.append(RemoveAccessControlEntryRecord(id=acl_id))
            pattern, entry = binding.pattern, binding.entry
            matching.append(MatchingAcl(
                error_code=ErrorCode.NONE, error_message=None, resource_type=pattern.resource_type,
                resource_name=pattern.name, pattern_type=pattern.pattern_type, principal=entry.principal,
                host=entry.host, operation=entry.operation, permission_type=entry.permission_type))
        results.append(FilterResult(error_code=ErrorCode.NONE, error_message=None, matching_acls=matching))
    return ControllerResult(DeleteAclsResponse(filter_results=results), records)

