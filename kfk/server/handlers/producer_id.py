"""InitProducerId (key 22), v0-v5.

An idempotent producer (no transactional id) gets a fresh producer id from this broker's block
(kfk/controller/producer_ids.py) at producer epoch 0; the producer id and epoch a v3+ client may send are ignored
for it, as Kafka's TransactionCoordinator ignores them, but sending only one of the two is INVALID_REQUEST
(KafkaApis). A transactional producer is answered by the transaction coordinator (kfk/coordinator/transaction/):
NOT_COORDINATOR when this broker does not lead the id's __transaction_state partition (the client looks the
coordinator up again), otherwise the id's producer id and its next epoch, the open transaction of an earlier
instance being aborted first.

Versions: v1 only changes throttling, v2 is flexible, v3 adds producer_id/producer_epoch (KIP-360: a producer may
re-initialize after an error and keep its id), v4 adds PRODUCER_FENCED (INVALID_PRODUCER_EPOCH before), v5
TRANSACTION_ABORTABLE.
"""

from __future__ import annotations

from kfk.controller.producer_ids import ProducerIdManager
from kfk.coordinator.transaction.service import TransactionCoordinatorService
from kfk.errors import ErrorCode
from kfk.protocol.messages import ApiKey
from kfk.protocol.messages.init_producer_id import InitProducerIdRequest, InitProducerIdResponse
from kfk.records import NO_PRODUCER_EPOCH, NO_PRODUCER_ID
from kfk.security.acl import AclOperation, ResourceType
from kfk.server.authorization import ALLOW_ALL, RequestAuthorizer
from kfk.server.dispatch import Dispatcher, RequestContext
from kfk.server.handlers.transactions import error_for_version


def _error(code: ErrorCode) -> InitProducerIdResponse:
    return InitProducerIdResponse(error_code=code, producer_id=NO_PRODUCER_ID, producer_epoch=NO_PRODUCER_EPOCH)


class ProducerIdHandler:
    def __init__(self, producer_id_manager: ProducerIdManager,
                 transaction_coordinator: TransactionCoordinatorService, auth: RequestAuthorizer = ALLOW_ALL) -> None:
        self.producer_id_manager = producer_id_manager
        self.auth = auth
        self.transaction_coordinator = transaction_coordinator

    def register(self, dispatcher: Dispatcher) -> None:
        dispatcher.register(ApiKey.INIT_PRODUCER_ID, self.init_producer_id)

    async def init_producer_id(self, context: RequestContext,
                               request: InitProducerIdRequest) -> InitProducerIdResponse:
        if (request.producer_id == NO_PRODUCER_ID) != (request.producer_epoch == NO_PRODUCER_EPOCH):
            return _error(ErrorCode.INVALID_REQUEST)
        transactional_id = request.transactional_id
        auth = self.auth
        if transactional_id is None:
            # An idempotent producer: IDEMPOTENT_WRITE on the cluster, or WRITE on some topic (KIP-679).
            if not auth.authorize(context, AclOperation.IDEMPOTENT_WRITE, ResourceType.CLUSTER) \
                    and not auth.authorize_by_resource_type(context, AclOperation.WRITE, ResourceType.TOPIC):
                return _error(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
            producer_id = await self.producer_id_manager.generate_producer_id()
            return InitProducerIdResponse(error_code=ErrorCode.NONE, producer_id=producer_id, producer_epoch=0)
        if not auth.authorize(context, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id):
            return _error(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        result = await self.transaction_coordinator.init_producer_id(
            transactional_id, request.transaction_timeout_ms, request.producer_id, request.producer_epoch)
        if result.error != ErrorCode.NONE:
            return _error(error_for_version(ApiKey.INIT_PRODUCER_ID, context.api_version, result.error))
        return InitProducerIdResponse(error_code=ErrorCode.NONE, producer_id=result.producer_id,
                                      producer_epoch=result.producer_epoch)
