"""ACLs in ZooKeeper mode, against a real ZooKeeper: what the controller writes is Kafka's AclAuthorizer layout
(/kafka-acl/<Type>/<name>, /kafka-acl-extended/prefixed/<Type>/<prefix>, a change notification for each), every
node's image follows it with the same ids, ACL znodes written by another tool are read, and DeleteAcls removes the
znode with its last ACL."""

from __future__ import annotations

import json

import pytest

from kfk.backends.zookeeper import znodes
from kfk.controller.acl_control import create_acls, delete_acls
from kfk.protocol.messages.create_acls import CreateAclsRequest
from kfk.protocol.messages.delete_acls import DeleteAclsRequest
from kfk.security.acl import AclOperation, AclPermissionType, PatternType, ResourceType
from tests.backends.conftest import run
from tests.backends.test_zookeeper_backend import backend, eventually

pytestmark = pytest.mark.zookeeper

Creation = CreateAclsRequest.AclCreation


def creation(name: str, pattern_type: PatternType, operation: AclOperation, principal: str = "User:alice",
             permission: AclPermissionType = AclPermissionType.ALLOW) -> Creation:
    return Creation(resource_type=ResourceType.TOPIC, resource_name=name, resource_pattern_type=pattern_type,
                    principal=principal, host="*", operation=operation, permission_type=permission)


def entries(image) -> set[tuple]:
    return {(b.pattern.name, b.pattern.pattern_type, b.entry.principal, b.entry.operation, b.entry.permission_type)
            for b in image.acls.values()}


def test_acls_are_stored_as_kafkas_acl_authorizer_stored_them(zookeeper_connect: str) -> None:
    async def scenario() -> None:
        controller, controller_cache = backend(zookeeper_connect, 1)
        follower, follower_cache = backend(zookeeper_connect, 2)
        await controller.start()
        await follower.start()
        epoch = await controller.elect_controller(1)
        result = create_acls(controller_cache.image, CreateAclsRequest(creations=[
            creation("orders", PatternType.LITERAL, AclOperation.READ),
            creation("orders", PatternType.LITERAL, AclOperation.WRITE, permission=AclPermissionType.DENY),
            creation("pay-", PatternType.PREFIXED, AclOperation.ALL, principal="User:*")]))
        assert [r.error_code for r in result.response.results] == [0, 0, 0]
        await controller.append(result.records, epoch)

        literal = json.loads(await controller.read_znode("/kafka-acl/Topic/orders"))
        assert literal["version"] == 1
        assert sorted(literal["acls"], key=lambda acl: acl["operation"]) == [
            {"principal": "User:alice", "permissionType": "Allow", "operation": "Read", "host": "*"},
            {"principal": "User:alice", "permissionType": "Deny", "operation": "Write", "host": "*"}]
        assert json.loads(await controller.read_znode("/kafka-acl-extended/prefixed/Topic/pay-")) == {
            "version": 1, "acls": [{"principal": "User:*", "permissionType": "Allow", "operation": "All",
                                    "host": "*"}]}
        (literal_change,) = await controller.znode_children(znodes.ACL_CHANGES_PATH)
        assert literal_change.startswith("acl_changes_")
        assert await controller.read_znode(f"{znodes.ACL_CHANGES_PATH}/{literal_change}") == b"Topic:orders"
        (extended_change,) = await controller.znode_children(znodes.ACL_EXTENDED_CHANGES_PATH)
        assert json.loads(await controller.read_znode(f"{znodes.ACL_EXTENDED_CHANGES_PATH}/{extended_change}")) == {
            "version": 1, "resourceType": "Topic", "name": "pay-", "patternType": "PREFIXED"}

        expected = {("orders", PatternType.LITERAL, "User:alice", AclOperation.READ, AclPermissionType.ALLOW),
                    ("orders", PatternType.LITERAL, "User:alice", AclOperation.WRITE, AclPermissionType.DENY),
                    ("pay-", PatternType.PREFIXED, "User:*", AclOperation.ALL, AclPermissionType.ALLOW)}
        assert entries(controller_cache.image) == expected
        await eventually(lambda: entries(follower_cache.image) == expected)
        assert set(follower_cache.image.acls) == set(controller_cache.image.acls)  # the same ids on every node

        # An ACL znode another tool wrote (Kafka's AclAuthorizer, a pre-4.0 kafka-acls.sh) is read too.
        await controller.create_znode("/kafka-acl/Group/billing", json.dumps({"version": 1, "acls": [
            {"principal": "User:bob", "permissionType": "Allow", "operation": "Read", "host": "10.0.0.1"}]}).encode())
        await eventually(lambda: any(b.pattern.resource_type == ResourceType.GROUP and b.entry.host == "10.0.0.1"
                                     for b in follower_cache.image.acls.values()))

        result = delete_acls(controller_cache.image, DeleteAclsRequest(filters=[DeleteAclsRequest.DeleteAclsFilter(
            resource_type_filter=ResourceType.TOPIC, resource_name_filter="orders", pattern_type_filter=PatternType.ANY,
            principal_filter=None, host_filter=None, operation=AclOperation.ANY,
            permission_type=AclPermissionType.ANY)]))
        assert len(result.response.filter_results[0].matching_acls) == 2
        await controller.append(result.records, epoch)
        assert await controller.read_znode("/kafka-acl/Topic/orders") is None
        await eventually(lambda: not any(b.pattern.name == "orders" for b in follower_cache.image.acls.values()))
        assert len(await controller.znode_children(znodes.ACL_CHANGES_PATH)) == 2
        await follower.stop()
        await controller.stop()

    run(scenario())
