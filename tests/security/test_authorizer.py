"""The Authorizer's rules, as Kafka's StandardAuthorizer applies them: implied operations, deny beats allow, literal,
wildcard and prefixed patterns, the User:* principal and `*` host, super users, allow.everyone.if.no.acl.found and
authorize_by_resource_type; and its index answering the same with 10,000 ACLs."""

from __future__ import annotations

import pytest

from kfk.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from kfk.security.authorizer import Authorizer
from kfk.security.principal import ANONYMOUS, KafkaPrincipal

ALICE = KafkaPrincipal.parse("User:alice")
BOB = KafkaPrincipal.parse("User:bob")
HOST = "10.0.0.1"
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
TOPIC = ResourceType.TOPIC
Op = AclOperation


def acl(name: str, operation: AclOperation, permission: AclPermissionType = ALLOW, principal: str = "User:alice",
        host: str = "*", pattern_type: PatternType = PatternType.LITERAL,
        resource_type: ResourceType = TOPIC) -> AclBinding:
    return AclBinding(ResourcePattern(resource_type, name, pattern_type),
                      AccessControlEntry(principal, host, operation, permission))


def allowed(authorizer: Authorizer, operation: AclOperation, name: str, principal: KafkaPrincipal = ALICE,
            host: str = HOST, resource_type: ResourceType = TOPIC) -> bool:
    return authorizer.authorize(principal, host, operation, resource_type, name)


@pytest.mark.parametrize("granted, implied", [
    (Op.READ, Op.DESCRIBE), (Op.WRITE, Op.DESCRIBE), (Op.DELETE, Op.DESCRIBE), (Op.ALTER, Op.DESCRIBE),
    (Op.ALTER_CONFIGS, Op.DESCRIBE_CONFIGS)])
def test_an_allow_implies_the_operations_kafka_says(granted: AclOperation, implied: AclOperation) -> None:
    authorizer = Authorizer(acls=[acl("t", granted)])
    assert allowed(authorizer, granted, "t")
    assert allowed(authorizer, implied, "t")
    assert not allowed(authorizer, Op.CREATE, "t")


def test_a_deny_implies_nothing_but_its_operation() -> None:
    authorizer = Authorizer(acls=[acl("t", Op.ALL), acl("t", Op.READ, DENY)])
    assert not allowed(authorizer, Op.READ, "t")
    assert allowed(authorizer, Op.DESCRIBE, "t")  # DENY READ does not deny DESCRIBE
    assert allowed(authorizer, Op.WRITE, "t")


def test_deny_beats_allow_whatever_pattern_carries_it() -> None:
    authorizer = Authorizer(acls=[acl("orders", Op.WRITE), acl("ord", Op.ALL, DENY, pattern_type=PatternType.PREFIXED)])
    assert not allowed(authorizer, Op.WRITE, "orders")
    authorizer = Authorizer(acls=[acl("orders", Op.WRITE), acl("*", Op.WRITE, DENY, principal="User:*")])
    assert not allowed(authorizer, Op.WRITE, "orders")


def test_prefixed_patterns_apply_to_names_they_start() -> None:
    authorizer = Authorizer(acls=[acl("pay-", Op.READ, pattern_type=PatternType.PREFIXED),
                                  acl("p", Op.WRITE, pattern_type=PatternType.PREFIXED)])
    assert allowed(authorizer, Op.READ, "pay-eu")
    assert allowed(authorizer, Op.READ, "pay-")
    assert not allowed(authorizer, Op.READ, "pay")  # shorter than the prefix
    assert not allowed(authorizer, Op.READ, "other")
    assert allowed(authorizer, Op.WRITE, "pay-eu")
    assert not allowed(authorizer, Op.READ, "pay-eu", resource_type=ResourceType.GROUP)


def test_wildcards_principal_resource_and_host() -> None:
    authorizer = Authorizer(acls=[acl("*", Op.READ, principal="User:*")])
    assert allowed(authorizer, Op.READ, "any-topic", BOB)
    assert allowed(authorizer, Op.READ, "any-topic", ANONYMOUS)
    assert not allowed(authorizer, Op.READ, "any-topic", KafkaPrincipal("Group", "ops"))  # User:* is for users
    authorizer = Authorizer(acls=[acl("t", Op.READ, host="10.0.0.2")])
    assert allowed(authorizer, Op.READ, "t", host="10.0.0.2")
    assert not allowed(authorizer, Op.READ, "t", host=HOST)


def test_no_matching_acl_refuses_and_allow_everyone_applies_only_to_resources_without_acls() -> None:
    acls = [acl("t", Op.READ, principal="User:bob")]
    assert not allowed(Authorizer(acls=acls), Op.READ, "t")
    assert not allowed(Authorizer(acls=acls), Op.READ, "u")
    open_authorizer = Authorizer(allow_everyone_if_no_acl_found=True, acls=acls)
    assert not allowed(open_authorizer, Op.READ, "t")  # t has an ACL, alice is not in it
    assert allowed(open_authorizer, Op.READ, "u")  # u has none


def test_super_users_bypass_every_acl() -> None:
    authorizer = Authorizer(super_users=["User:alice"], acls=[acl("t", Op.ALL, DENY)])
    assert allowed(authorizer, Op.WRITE, "t")
    assert not allowed(authorizer, Op.WRITE, "t", BOB)


def test_update_replaces_every_acl() -> None:
    authorizer = Authorizer(acls=[acl("t", Op.READ)])
    authorizer.update([acl("u", Op.READ)])
    assert not allowed(authorizer, Op.READ, "t")
    assert allowed(authorizer, Op.READ, "u")


def test_authorize_by_resource_type() -> None:
    """KIP-679: an idempotent producer may have WRITE on some topic instead of IDEMPOTENT_WRITE on the cluster."""
    assert Authorizer(acls=[acl("t", Op.WRITE)]).authorize_by_resource_type(ALICE, HOST, Op.WRITE, TOPIC)
    assert Authorizer(acls=[acl("p-", Op.ALL, pattern_type=PatternType.PREFIXED)]).authorize_by_resource_type(
        ALICE, HOST, Op.WRITE, TOPIC)
    assert not Authorizer(acls=[acl("t", Op.READ)]).authorize_by_resource_type(ALICE, HOST, Op.WRITE, TOPIC)
    assert not Authorizer(acls=[acl("t", Op.WRITE), acl("t", Op.WRITE, DENY)]).authorize_by_resource_type(
        ALICE, HOST, Op.WRITE, TOPIC)
    assert not Authorizer(acls=[acl("t", Op.WRITE), acl("*", Op.WRITE, DENY)]).authorize_by_resource_type(
        ALICE, HOST, Op.WRITE, TOPIC)
    assert not Authorizer(acls=[acl("tx", Op.WRITE), acl("t", Op.ALL, DENY, pattern_type=PatternType.PREFIXED)]
                          ).authorize_by_resource_type(ALICE, HOST, Op.WRITE, TOPIC)


def test_filters_match_as_kafka_describes_and_deletes() -> None:
    literal, prefixed, wildcard = acl("pay-eu", Op.READ), acl("pay-", Op.READ, pattern_type=PatternType.PREFIXED), \
        acl("*", Op.READ)
    match = AclBindingFilter(TOPIC, "pay-eu", PatternType.MATCH)
    assert [b for b in (literal, prefixed, wildcard) if match.matches(b)] == [literal, prefixed, wildcard]
    assert [b for b in (literal, prefixed, wildcard)
            if AclBindingFilter(TOPIC, "pay-", PatternType.ANY).matches(b)] == [prefixed]
    assert AclBindingFilter(principal="User:alice", operation=Op.READ).matches(literal)
    assert not AclBindingFilter(permission_type=DENY).matches(literal)


def test_validation_refuses_what_kafka_refuses() -> None:
    assert acl("t", Op.READ).validation_error() is None
    assert acl("t", Op.ANY).validation_error() == "Invalid operation"
    assert acl("t", Op.READ, pattern_type=PatternType.MATCH).validation_error().startswith("Invalid pattern type")
    assert acl("t", Op.READ, resource_type=ResourceType.CLUSTER).validation_error().startswith("The only valid name")
    assert "principal" in acl("t", Op.READ, principal="alice").validation_error()


def test_ten_thousand_acls_are_indexed() -> None:
    """With 10,000 ACLs (literal and prefixed), each answer is the same as with only the ACLs that apply."""
    acls = [acl(f"topic-{i}", Op.READ, principal=f"User:user-{i}") for i in range(9_000)]
    acls += [acl(f"prefix-{i}-", Op.WRITE, principal=f"User:user-{i}", pattern_type=PatternType.PREFIXED)
             for i in range(1_000)]
    authorizer = Authorizer(acls=acls)
    user = KafkaPrincipal.parse("User:user-42")
    assert allowed(authorizer, Op.READ, "topic-42", user)
    assert not allowed(authorizer, Op.READ, "topic-43", user)
    assert allowed(authorizer, Op.WRITE, "prefix-42-orders", user)
    assert not allowed(authorizer, Op.WRITE, "prefix-43-orders", user)
