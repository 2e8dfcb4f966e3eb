"""RequestAuthorizer: the one place handlers ask whether a request's principal may do something (Kafka's AuthHelper).

Built by the composition root from `authorizer.class.name`: empty (the default) means no authorization, and every
check passes without looking at anything; one of Kafka's authorizer class names turns on the Authorizer
(kfk/security/authorizer.py) with `super.users` and `allow.everyone.if.no.acl.found`, following the ACLs of the
metadata image. Handlers call `authorize` / `authorized_names` with the request's context and answer Kafka's
*_AUTHORIZATION_FAILED codes for what is refused.
"""

from __future__ import annotations

from collections.abc import Iterable, Set

from kfk.config import BrokerConfig
from kfk.errors import ErrorCode, InvalidConfigurationError
from kfk.metadata.image import MetadataImage
from kfk.security.acl import CLUSTER_NAME, AclOperation, ResourceType
from kfk.security.authorizer import AUTHORIZER_CLASS_NAMES, Authorizer
from kfk.server.dispatch import RequestContext

#: The error a refused operation on a resource of each type answers.
AUTHORIZATION_FAILED = {
    ResourceType.TOPIC: ErrorCode.TOPIC_AUTHORIZATION_FAILED,
    ResourceType.GROUP: ErrorCode.GROUP_AUTHORIZATION_FAILED,
    ResourceType.CLUSTER: ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
    ResourceType.TRANSACTIONAL_ID: ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    ResourceType.DELEGATION_TOKEN: ErrorCode.DELEGATION_TOKEN_AUTHORIZATION_FAILED,
}


class RequestAuthorizer:
    """`authorizer` None: authorization is off (every check passes)."""

    def __init__(self, authorizer: Authorizer | None = None) -> None:
        self.authorizer = authorizer

    @classmethod
    def from_config(cls, config: BrokerConfig) -> RequestAuthorizer:
        class_name = (config.authorizer_class_name or "").strip()
        if not class_name:
            return cls(None)
        if class_name not in AUTHORIZER_CLASS_NAMES:
            raise InvalidConfigurationError(
                f"authorizer.class.name {class_name!r} is not supported: use "
                f"{' or '.join(sorted(AUTHORIZER_CLASS_NAMES))}, or leave it empty for no authorization")
        return cls(Authorizer(config.super_users, config.allow_everyone_if_no_acl_found))

    @property
    def enabled(self) -> bool:
        return self.authorizer is not None

    def on_metadata_update(self, previous: MetadataImage, current: MetadataImage) -> None:
        """A MetadataCache listener: the authorizer follows the image's ACLs."""
        if self.authorizer is not None and current.acls is not previous.acls:
            self.authorizer.update(current.acls.values())

    def authorize(self, context: RequestContext, operation: AclOperation, resource_type: ResourceType,
                  name: str = CLUSTER_NAME) -> bool:
        authorizer = self.authorizer
        return authorizer is None or authorizer.authorize(context.principal, context.client_host, operation,
                                                          resource_type, name)

    def authorized_names(self, context: RequestContext, operation: AclOperation, resource_type: ResourceType,
                         names: Iterable[str]) -> Set[str]:
        """The names among `names` the principal may do `operation` on (each distinct name authorized once;
        without authorization, `names` itself when it is a set already, e.g. a mapping's keys)."""
        authorizer = self.authorizer
        if authorizer is None:
            return names if isinstance(names, Set) else set(names)
        return {name for name in set(names)
                if authorizer.authorize(context.principal, context.client_host, operation, resource_type, name)}

    def authorize_by_resource_type(self, context: RequestContext, operation: AclOperation,
                                   resource_type: ResourceType) -> bool:
        authorizer = self.authorizer
        return authorizer is None or authorizer.authorize_by_resource_type(context.principal, context.client_host,
                                                                           operation, resource_type)

    def may_create_topic(self, context: RequestContext, name: str) -> bool:
        """CREATE on the cluster or on the topic (CreateTopics, auto-creation)."""
        return self.authorize(context, AclOperation.CREATE, ResourceType.CLUSTER) \
            or self.authorize(context, AclOperation.CREATE, ResourceType.TOPIC, name)

    def authorized_operations(self, context: RequestContext, resource_type: ResourceType, name: str,
                              supported: Iterable[AclOperation]) -> int:
        """The bit field of the `supported` operations the principal may do on the resource (KIP-430's
        authorized operations; without authorization, every supported one)."""
        return sum(1 << operation for operation in supported
                   if self.authorize(context, operation, resource_type, name))


#: The helper of handlers built without authorization (the broker builds one from its config).
ALLOW_ALL = RequestAuthorizer(None)
