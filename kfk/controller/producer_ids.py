"""Producer ids: blocks reserved through the controller, handed out one by one on each broker.

Every idempotent or transactional producer needs a producer id unique in the cluster. Kafka makes them cheap by
reserving them in blocks of 1000 through the metadata log: the controller writes a ProducerIdsRecord whose
next_producer_id is the end of the block it grants (ProducerIdControlManager), so a block is never granted twice,
even across controller failovers and restarts; each broker then hands out the ids of its block locally
(ProducerIdManager) and asks for a new block when it runs out. Ids of a block a broker did not use before a restart
are simply skipped.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Awaitable, Callable

from kfk.controller.cluster_control import check_broker_epoch
from kfk.controller.result import ControllerResult
from kfk.errors import UnknownServerError
from kfk.metadata.image import MetadataImage
from kfk.protocol.metadata_records import schema_class

ProducerIdsRecord = schema_class("ProducerIdsRecord")

PRODUCER_ID_BLOCK_SIZE = 1000
_INT64_MAX = 2**63 - 1


@dataclass(frozen=True)
class ProducerIdsBlock:
    assigned_broker_id: int
    first_producer_id: int
    size: int

    @property
    def last_producer_id(self) -> int:
        return self.first_producer_id + self.size - 1


def generate_next_producer_ids(image: MetadataImage, broker_id: int,
                               broker_epoch: int) -> ControllerResult[ProducerIdsBlock]:
    """Grant the next block to a registered broker of the current epoch (STALE_BROKER_EPOCH otherwise)."""
    check_broker_epoch(image, broker_id, broker_epoch)
    first = image.next_producer_id
    if first > _INT64_MAX - PRODUCER_ID_BLOCK_SIZE:
        raise UnknownServerError("Exhausted all producerIds as the next block's end producerId has exceeded the "
                                 "int64 type limit")
    record = ProducerIdsRecord(broker_id=broker_id, broker_epoch=broker_epoch,
                               next_producer_id=first + PRODUCER_ID_BLOCK_SIZE)
    return ControllerResult(ProducerIdsBlock(broker_id, first, PRODUCER_ID_BLOCK_SIZE), [record])


class ProducerIdManager:
    """A broker's dispenser of producer ids (Kafka's RPCProducerIdManager): ids of the current block in order, a
    new block from `allocate_block` when it is used up. (The transaction coordinator will share it.)"""

    def __init__(self, allocate_block: Callable[[], Awaitable[ProducerIdsBlock]]) -> None:
        self._allocate_block = allocate_block
        self._block: ProducerIdsBlock | None = None
        self._next_producer_id = 0
        self._lock = asyncio.Lock()

    async def generate_producer_id(self) -> int:
        async with self._lock:
            if self._block is None or self._next_producer_id > self._block.last_producer_id:
                self._block = await self._allocate_block()
                self._next_producer_id = self._block.first_producer_id
            producer_id = self._next_producer_id
            self._next_producer_id += 1
            return producer_id
