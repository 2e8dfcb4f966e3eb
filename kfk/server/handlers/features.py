"""UpdateFeatures (key 57, v0-2): an operator's change of the finalized feature levels (kafka-features.sh upgrade /
downgrade / disable, Admin.updateFeatures), decided by the active controller (kfk/controller/feature_control.py).
It needs ALTER on the cluster (CLUSTER_AUTHORIZATION_FAILED).

A KRaft broker forwards it to the active controller (kfk/server/forwarding.py), as Kafka 4 does. In ZooKeeper mode
the controller is the broker the ZooKeeper election chose, and it keeps the levels in the /feature znode as Kafka
3.x's did; another broker answers NOT_CONTROLLER, and the client goes to the controller its Metadata names.
The levels themselves are read with ApiVersions (handlers/api_versions.py): there is no DescribeFeatures request.
"""

from __future__ import annotations

from kfk.controller.quorum_controller import QuorumController
from kfk.errors import ERROR_INFO, ErrorCode
from kfk.protocol.messages import ApiKey
from kfk.protocol.messages.update_features import UpdateFeaturesRequest, UpdateFeaturesResponse
from kfk.security.acl import AclOperation, ResourceType
from kfk.server.authorization import ALLOW_ALL, RequestAuthorizer
from kfk.server.dispatch import Dispatcher, RequestContext


class FeaturesHandler:
    def __init__(self, controller: QuorumController, auth: RequestAuthorizer = ALLOW_ALL) -> None:
        self.controller = controller
        self.auth = auth

    def register(self, dispatcher: Dispatcher) -> None:
        dispatcher.register(ApiKey.UPDATE_FEATURES, self.update_features)

    async def update_features(self, context: RequestContext, request: UpdateFeaturesRequest) -> UpdateFeaturesResponse:
        if not self.auth.authorize(context, AclOperation.ALTER, ResourceType.CLUSTER):
            return _refused(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        if not self.controller.is_active:
            return _refused(ErrorCode.NOT_CONTROLLER)
        return await self.controller.update_features(request, context.api_version)


def _refused(error_code: ErrorCode) -> UpdateFeaturesResponse:
    """A refusal is the top-level error alone, as Kafka 4 answers it (no per-feature results)."""
    return UpdateFeaturesResponse(error_code=error_code, error_message=ERROR_INFO[error_code].message)
