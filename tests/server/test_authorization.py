"""RequestAuthorizer.from_config: authorizer.class.name turns authorization on (Kafka's two class names), off when
empty, and refuses any other class at start; super.users and allow.everyone.if.no.acl.found reach the Authorizer;
the authorizer follows the metadata image's ACLs."""

from __future__ import annotations

import uuid

import pytest

from kfk.config import BrokerConfig
from kfk.errors import InvalidConfigurationError
from kfk.metadata.acls import record_of
from kfk.metadata.image import MetadataImage
from kfk.protocol.headers import RequestHeader
from kfk.security.acl import AclBinding, AclOperation, ResourceType
from kfk.security.principal import KafkaPrincipal
from kfk.server.authorization import RequestAuthorizer
from kfk.server.dispatch import RequestContext

BASE = {"process.roles": "broker,controller", "node.id": "1"}


def context(principal: str) -> RequestContext:
    header = RequestHeader(request_api_key=0, request_api_version=9, correlation_id=1, client_id="test")
    return RequestContext(header, 9, "10.0.0.1", 5000, "PLAINTEXT", KafkaPrincipal.parse(principal))


@pytest.mark.parametrize("class_name", ["org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                                        "kafka.security.authorizer.AclAuthorizer"])
def test_kafkas_class_names_turn_authorization_on(class_name: str) -> None:
    auth = RequestAuthorizer.from_config(BrokerConfig({**BASE, "authorizer.class.name": class_name,
                                                       "super.users": "User:admin; User:broker"}))
    assert auth.enabled
    assert auth.authorize(context("User:broker"), AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER)
    assert not auth.authorize(context("User:alice"), AclOperation.READ, ResourceType.TOPIC, "t")


def test_empty_turns_it_off_and_another_class_is_refused() -> None:
    assert not RequestAuthorizer.from_config(BrokerConfig(BASE)).enabled
    assert RequestAuthorizer.from_config(BrokerConfig(BASE)).authorize(context("User:x"), AclOperation.ALTER,
                                                                         ResourceType.CLUSTER)
    with pytest.raises(InvalidConfigurationError, match="is not supported"):
        RequestAuthorizer.from_config(BrokerConfig({**BASE, "authorizer.class.name": "com.example.MyAuthorizer"}))


def test_allow_everyone_and_the_images_acls() -> None:
    auth = RequestAuthorizer.from_config(BrokerConfig({
        **BASE, "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "allow.everyone.if.no.acl.found": "true"}))
    alice = context("User:alice")
    assert auth.authorize(alice, AclOperation.READ, ResourceType.TOPIC, "t")
    binding = AclBinding.of(ResourceType.TOPIC, "t", 3, "User:bob", "*", AclOperation.READ, 3)
    previous = MetadataImage()
    current = previous.apply([record_of(uuid.uuid4(), binding)], 1)
    auth.on_metadata_update(previous, current)
    assert not auth.authorize(alice, AclOperation.READ, ResourceType.TOPIC, "t")
    assert auth.authorize(context("User:bob"), AclOperation.DESCRIBE, ResourceType.TOPIC, "t")
    assert auth.authorized_names(alice, AclOperation.READ, ResourceType.TOPIC, ["t", "u"]) == {"u"}
