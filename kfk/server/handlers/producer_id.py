"""InitProducerId (key 22), v0-v5, for idempotent producers (no transactional id).

An idempotent producer gets a fresh producer id from this broker's block (kfk/controller/producer_ids.py) at
producer epoch 0; the producer id and epoch a v3+ client may send are ignored for it, as Kafka's
TransactionCoordinator ignores them, but sending only one of the two is INVALID_REQUEST (KafkaApis). Versions:
v1 only changes throttling, v2 is flexible, v3 adds producer_id/producer_epoch (KIP-360), v4 adds
PRODUCER_FENCED, v5 TRANSACTION_ABORTABLE; none of it changes the idempotent case.

A transactional id needs the transaction coordinator, which kfk does not have yet. Kafka answers what its
TransactionCoordinator answers here: INVALID_REQUEST for an empty id, INVALID_TRANSACTION_TIMEOUT for a timeout
outside (0, transaction.max.timeout.ms], and otherwise NOT_COORDINATOR, which is what
TransactionStateManager.getAndMaybeAddTransactionState returns when this broker does not hold the transactional
id's __transaction_state partition (clients then look the coordinator up again with FindCoordinator).
"""

from __future__ import annotations

from kfk.controller.producer_ids import ProducerIdManager
from kfk.errors import ErrorCode
from kfk.protocol.messages import ApiKey
from kfk.protocol.messages.init_producer_id import InitProducerIdRequest, InitProducerIdResponse
from kfk.records import NO_PRODUCER_EPOCH, NO_PRODUCER_ID
from kfk.server.dispatch import Dispatcher, RequestContext


def _error(code: ErrorCode) -> InitProducerIdResponse:
    return InitProducerIdResponse(error_code=code, producer_id=NO_PRODUCER_ID, producer_epoch=NO_PRODUCER_EPOCH)


class ProducerIdHandler:
    def __init__(self, producer_id_manager: ProducerIdManager, transaction_max_timeout_ms: int) -> None:
        self.producer_id_manager = producer_id_manager
        self.transaction_max_timeout_ms = transaction_max_timeout_ms

    def register(self, dispatcher: Dispatcher) -> None:
        dispatcher.register(ApiKey.INIT_PRODUCER_ID, self.init_producer_id)

    async def init_producer_id(self, context: RequestContext,
                               request: InitProducerIdRequest) -> InitProducerIdResponse:
        if (request.producer_id == NO_PRODUCER_ID) != (request.producer_epoch == NO_PRODUCER_EPOCH):
            return _error(ErrorCode.INVALID_REQUEST)
        transactional_id = request.transactional_id
        if transactional_id is None:
            producer_id = await self.producer_id_manager.generate_producer_id()
            return InitProducerIdResponse(error_code=ErrorCode.NONE, producer_id=producer_id, producer_epoch=0)
        if not transactional_id:
            return _error(ErrorCode.INVALID_REQUEST)
        if not 0 < request.transaction_timeout_ms <= self.transaction_max_timeout_ms:
            return _error(ErrorCode.INVALID_TRANSACTION_TIMEOUT)
        return _error(ErrorCode.NOT_COORDINATOR)
