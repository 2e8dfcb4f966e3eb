"""Producer-id blocks from /latest_producer_id_block (Kafka's ZkProducerIdManager): every broker claims its blocks
itself with a conditional write, so a block is never handed out twice. Blocking (kazoo)."""

from __future__ import annotations

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from kfk.backends.zookeeper import znodes
from kfk.controller.producer_ids import PRODUCER_ID_BLOCK_SIZE, ProducerIdsBlock


def claim_producer_id_block(client: KazooClient, broker_id: int) -> ProducerIdsBlock:
    path = znodes.PRODUCER_ID_BLOCK_PATH
    while True:
        try:
            data, stat = client.get(path)
        except NoNodeError:
            block = ProducerIdsBlock(broker_id, 0, PRODUCER_ID_BLOCK_SIZE)
            try:
                client.create(path, znodes.encode_producer_id_block(broker_id, 0, block.last_producer_id))
                return block
            except NodeExistsError:
                continue
        block = ProducerIdsBlock(broker_id, znodes.decode_producer_id_block_end(data) + 1, PRODUCER_ID_BLOCK_SIZE)
        try:
            client.set(path, znodes.encode_producer_id_block(broker_id, block.first_producer_id,
                                                             block.last_producer_id), version=stat.version)
            return block
        except BadVersionError:
            continue
