"""AlterPartition at the controller (KRaft leaders' ISR changes) and AllocateProducerIds, over a real embedded
backend."""

from __future__ import annotations

from kfk.errors import ErrorCode
from kfk.protocol.messages.allocate_producer_ids import AllocateProducerIdsRequest
from kfk.protocol.messages.alter_partition import AlterPartitionRequest
from tests.controller.conftest import heartbeat, topic


def alter(harness, broker_id: int, isr: list[int], leader_epoch: int | None = None,
          partition_epoch: int | None = None, name: str = "t"):
    registration = harness.image.topic(name).partitions[0]
    Topic, Partition = AlterPartitionRequest.TopicData, AlterPartitionRequest.PartitionData
    BrokerState = AlterPartitionRequest.BrokerState
    request = AlterPartitionRequest(broker_id=broker_id, broker_epoch=harness.broker_epochs[broker_id], topics=[Topic(
        topic_id=harness.image.topic(name).topic_id, partitions=[Partition(
            partition_index=0,
            leader_epoch=registration.leader_epoch if leader_epoch is None else leader_epoch,
            partition_epoch=registration.partition_epoch if partition_epoch is None else partition_epoch,
            new_isr_with_epochs=[BrokerState(broker_id=replica, broker_epoch=-1) for replica in isr])])])
    response = harness.run(harness.controller.handle_alter_partition(request))
    assert response.error_code == ErrorCode.NONE
    return response.topics[0].partitions[0]


def test_the_leader_shrinks_and_expands_its_isr(kraft) -> None:
    kraft.create(topic("t", partitions=-1, replication_factor=-1, assignments={0: [2, 3, 4]}))
    before = kraft.image.topic("t").partitions[0]
    shrunk = alter(kraft, 2, [2, 3])
    assert (shrunk.error_code, shrunk.isr, shrunk.leader_id) == (ErrorCode.NONE, [2, 3], 2)
    after = kraft.image.topic("t").partitions[0]
    assert after.isr == (2, 3) and after.partition_epoch == shrunk.partition_epoch == before.partition_epoch + 1
    assert after.leader_epoch == before.leader_epoch  # an ISR change alone keeps the leader epoch
    expanded = alter(kraft, 2, [2, 3, 4])
    assert expanded.isr == [2, 3, 4] and kraft.image.topic("t").partitions[0].isr == (2, 3, 4)


def test_stale_or_invalid_changes_are_refused(kraft) -> None:
    kraft.create(topic("t", partitions=-1, replication_factor=-1, assignments={0: [2, 3, 4]}))
    registration = kraft.image.topic("t").partitions[0]
    assert alter(kraft, 3, [3, 2]).error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert alter(kraft, 2, [2], leader_epoch=registration.leader_epoch - 1).error_code == \
        ErrorCode.FENCED_LEADER_EPOCH
    assert alter(kraft, 2, [2], partition_epoch=registration.partition_epoch - 1).error_code == \
        ErrorCode.INVALID_UPDATE_VERSION
    assert alter(kraft, 2, [3, 4]).error_code == ErrorCode.INVALID_REQUEST  # without the leader
    alter(kraft, 2, [2, 3])
    heartbeat(kraft, 4, want_fence=True)
    assert alter(kraft, 2, [2, 3, 4]).error_code == ErrorCode.INELIGIBLE_REPLICA  # a fenced broker cannot rejoin
    assert kraft.image.topic("t").partitions[0].isr == (2, 3)


def test_producer_id_blocks_are_handed_out_once(kraft) -> None:
    blocks = [kraft.run(kraft.controller.handle_allocate_producer_ids(AllocateProducerIdsRequest(
        broker_id=broker_id, broker_epoch=kraft.broker_epochs[broker_id]))) for broker_id in (2, 3, 2)]
    assert all(block.error_code == ErrorCode.NONE for block in blocks)
    starts = [block.producer_id_start for block in blocks]
    assert len(set(starts)) == 3 and all(block.producer_id_len > 0 for block in blocks)
    stale = kraft.run(kraft.controller.handle_allocate_producer_ids(AllocateProducerIdsRequest(
        broker_id=2, broker_epoch=kraft.broker_epochs[2] - 1)))
    assert stale.error_code == ErrorCode.STALE_BROKER_EPOCH
