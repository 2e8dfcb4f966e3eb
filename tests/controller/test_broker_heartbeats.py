"""KRaft broker liveness: BrokerRegistration and BrokerHeartbeat against a QuorumController over a real embedded
backend (a manual clock drives the sessions), and the BrokerHeartbeatManager's transitions on their own."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from kfk.controller.broker_heartbeat_manager import (
    BrokerControlState,
    BrokerHeartbeatManager,
)
from kfk.errors import ErrorCode
from kfk.protocol.messages.broker_heartbeat import BrokerHeartbeatRequest
from tests.controller.conftest import heartbeat, registration, topic

SESSION_TIMEOUT_MS = 9000
FENCED, UNFENCED = BrokerControlState.FENCED, BrokerControlState.UNFENCED
CONTROLLED_SHUTDOWN, SHUTDOWN_NOW = BrokerControlState.CONTROLLED_SHUTDOWN, BrokerControlState.SHUTDOWN_NOW


def test_a_broker_is_unfenced_only_once_it_has_applied_its_own_registration(make_cluster) -> None:
    harness = make_cluster(brokers=0, broker_heartbeats=True)
    response = harness.run(harness.controller.handle_broker_registration(registration(2)))
    epoch = harness.broker_epochs[2] = response.broker_epoch
    assert harness.image.brokers[2].fenced
    behind = heartbeat(harness, 2, offset=epoch - 1)
    assert (behind.is_caught_up, behind.is_fenced) == (False, True)
    assert harness.image.brokers[2].fenced
    caught_up = heartbeat(harness, 2, offset=epoch)
    assert (caught_up.is_caught_up, caught_up.is_fenced, caught_up.should_shut_down) == (True, False, False)
    assert not harness.image.brokers[2].fenced


def test_registration_errors(make_cluster) -> None:
    harness = make_cluster(brokers=0, broker_heartbeats=True)
    wrong_cluster = harness.run(harness.controller.handle_broker_registration(registration(2, cluster_id="other")))
    assert wrong_cluster.error_code == ErrorCode.INCONSISTENT_CLUSTER_ID
    incarnation = uuid.uuid4()
    first = harness.run(harness.controller.handle_broker_registration(registration(2, incarnation)))
    harness.broker_epochs[2] = first.broker_epoch
    heartbeat(harness, 2)
    # Another process with the same node.id while the first still heartbeats: refused.
    duplicate = harness.run(harness.controller.handle_broker_registration(registration(2)))
    assert duplicate.error_code == ErrorCode.DUPLICATE_BROKER_REGISTRATION
    # The same incarnation registering again (its response was lost, or it adds its log dirs after an upgrade)
    # amends its registration: the broker epoch remains, as Kafka's ClusterControlManager says.
    again = harness.run(harness.controller.handle_broker_registration(registration(2, incarnation)))
    assert again.error_code == ErrorCode.NONE and again.broker_epoch == first.broker_epoch
    stale = harness.run(harness.controller.handle_broker_heartbeat(BrokerHeartbeatRequest(
        broker_id=2, broker_epoch=first.broker_epoch - 1, current_metadata_offset=harness.image.offset)))
    assert stale.error_code == ErrorCode.STALE_BROKER_EPOCH
    unknown = harness.run(harness.controller.handle_broker_heartbeat(BrokerHeartbeatRequest(
        broker_id=9, broker_epoch=1, current_metadata_offset=0)))
    assert unknown.error_code == ErrorCode.BROKER_ID_NOT_REGISTERED
    # Once the session of the first incarnation is over, another may take the id.
    harness.clock.advance(SESSION_TIMEOUT_MS)
    assert harness.run(harness.controller.handle_broker_registration(registration(2))).error_code == ErrorCode.NONE


def test_a_broker_whose_heartbeats_stop_is_fenced_and_its_partitions_fail_over(kraft) -> None:
    kraft.create(topic("t", partitions=-1, replication_factor=-1, assignments={0: [3, 2, 4]}))
    assert kraft.image.topic("t").partitions[0].leader == 3
    kraft.clock.advance(SESSION_TIMEOUT_MS - 1)
    heartbeat(kraft, 2)
    heartbeat(kraft, 4)
    kraft.run(asyncio.sleep(0.3))  # the fencer's check: every session is still valid
    assert not kraft.image.brokers[3].fenced
    kraft.clock.advance(1)
    kraft.run(asyncio.sleep(0.3))
    assert kraft.image.brokers[3].fenced
    assert not kraft.image.brokers[2].fenced and not kraft.image.brokers[4].fenced
    partition = kraft.image.topic("t").partitions[0]
    assert partition.leader == 2 and partition.isr == (2, 4)
    # It comes back (same incarnation, same epoch): unfenced by its next heartbeat, back in the ISR when it catches
    # up (the leader's AlterPartition), leadership back with a preferred election.
    response = heartbeat(kraft, 3)
    assert response.is_fenced is False and not kraft.image.brokers[3].fenced


def test_a_new_active_controller_gives_every_broker_a_full_session(kraft) -> None:
    kraft.clock.advance(SESSION_TIMEOUT_MS * 2)  # no controller ran meanwhile
    kraft.reopen()
    kraft.run(asyncio.sleep(0.3))
    assert not any(kraft.image.brokers[broker_id].fenced for broker_id in (2, 3, 4))


def test_controlled_shutdown_through_heartbeats(kraft) -> None:
    kraft.create(topic("t", partitions=-1, replication_factor=-1, assignments={0: [2, 3], 1: [4, 2]}))
    offset_before = kraft.image.offset
    response = heartbeat(kraft, 2, offset=offset_before, want_shut_down=True)
    partitions = kraft.image.topic("t").partitions
    assert partitions[0].leader == 3 and partitions[0].isr == (3,) and partitions[1].isr == (4,)
    # Leaderships moved off; the broker has not yet applied the records that moved them: not yet.
    assert (response.is_fenced, response.should_shut_down) == (False, False)
    response = heartbeat(kraft, 2, want_shut_down=True)
    assert (response.is_fenced, response.should_shut_down) == (True, True)
    assert kraft.image.brokers[2].fenced


def test_want_fence_fences_at_once(kraft) -> None:
    response = heartbeat(kraft, 4, want_fence=True)
    assert response.is_fenced and kraft.image.brokers[4].fenced


def test_unregister_broker_removes_it(kraft) -> None:
    kraft.create(topic("t", partitions=-1, replication_factor=-1, assignments={0: [4, 2]}))
    kraft.run(kraft.controller.unregister_broker(4))
    assert 4 not in kraft.image.brokers
    partition = kraft.image.topic("t").partitions[0]
    assert partition.leader == 2 and partition.isr == (2,)


@pytest.mark.parametrize("current, flags, caught_up, leads, expected", [
    (FENCED, {}, False, False, FENCED),
    (FENCED, {}, True, False, UNFENCED),
    (FENCED, {"want_fence": True}, True, False, FENCED),
    (FENCED, {"want_shut_down": True}, False, False, SHUTDOWN_NOW),
    (UNFENCED, {}, True, True, UNFENCED),
    (UNFENCED, {"want_fence": True}, True, False, FENCED),
    (UNFENCED, {"want_fence": True, "want_shut_down": True}, True, False, SHUTDOWN_NOW),
    (UNFENCED, {"want_shut_down": True}, True, True, CONTROLLED_SHUTDOWN),
    (CONTROLLED_SHUTDOWN, {"want_shut_down": True}, True, True, CONTROLLED_SHUTDOWN),
    (SHUTDOWN_NOW, {}, True, False, SHUTDOWN_NOW),
])
def test_next_state(current, flags, caught_up, leads, expected) -> None:
    manager = BrokerHeartbeatManager(SESSION_TIMEOUT_MS)
    manager.register(1, 0)
    state = manager.next_state(1, current, registration_offset=10, metadata_offset=10 if caught_up else 9,
                               want_fence=flags.get("want_fence", False),
                               want_shut_down=flags.get("want_shut_down", False), has_leaderships=leads,
                               committed_offset=10)
    assert state is expected


def test_controlled_shutdown_waits_for_the_broker_to_apply_the_metadata_that_moved_its_leaderships() -> None:
    manager = BrokerHeartbeatManager(SESSION_TIMEOUT_MS)
    manager.register(1, 0)
    assert manager.next_state(1, CONTROLLED_SHUTDOWN, 5, 20, False, True, False, committed_offset=30) \
        is CONTROLLED_SHUTDOWN
    assert manager.next_state(1, CONTROLLED_SHUTDOWN, 5, 29, False, True, False, committed_offset=40) \
        is CONTROLLED_SHUTDOWN  # the target stays the offset at which it first led nothing
    assert manager.next_state(1, CONTROLLED_SHUTDOWN, 5, 30, False, True, False, committed_offset=40) \
        is SHUTDOWN_NOW


def test_sessions_expire_after_the_timeout() -> None:
    manager = BrokerHeartbeatManager(SESSION_TIMEOUT_MS)
    manager.reset([1, 2], now_ms=1000)
    manager.touch(2, 5000, metadata_offset=3)
    assert manager.stale_brokers({1, 2, 3}, 1000 + SESSION_TIMEOUT_MS - 1) == [3]  # 3: never heard of
    assert manager.stale_brokers({1, 2}, 1000 + SESSION_TIMEOUT_MS) == [1]
    assert manager.next_check_ms({1, 2}, 2000) == 1000 + SESSION_TIMEOUT_MS
    assert manager.stale_brokers({1, 2}, 5000 + SESSION_TIMEOUT_MS) == [1, 2]


def test_the_controllers_own_broker_may_register_again_at_once(make_cluster) -> None:
    """A combined node restarting: its broker's earlier incarnation was this very node, so its new registration is
    not made to wait for the old session to end (a single node restarts at once)."""
    harness = make_cluster(brokers=0, broker_heartbeats=True)
    first = harness.run(harness.controller.handle_broker_registration(registration(1)))
    harness.broker_epochs[1] = first.broker_epoch
    assert heartbeat(harness, 1).is_fenced is False
    harness.reopen()  # the restart: the new active controller gives every registered broker a full session
    again = harness.run(harness.controller.handle_broker_registration(registration(1)))
    assert again.error_code == ErrorCode.NONE and again.broker_epoch > first.broker_epoch
    # Another node's broker restarting within its session waits for it to end (Kafka's rule).
    other = harness.run(harness.controller.handle_broker_registration(registration(2)))
    harness.broker_epochs[2] = other.broker_epoch
    heartbeat(harness, 2)
    assert harness.run(harness.controller.handle_broker_registration(registration(2))).error_code == \
        ErrorCode.DUPLICATE_BROKER_REGISTRATION


def test_only_a_batch_that_may_unsettle_a_partition_makes_the_controller_rescan_them(kraft) -> None:
    """New partitions on live brokers need no leadership change: the controller does not rescan every partition
    after each batch of them (what kept a controller creating 10,000 partitions from answering heartbeats), but a
    broker change, or a partition whose leader is not live, still brings every partition in line."""
    reconciles: list[int] = []
    partition_changes = kraft.controller._partition_changes

    def counted(image):
        reconciles.append(image.offset)
        return partition_changes(image)

    kraft.controller._partition_changes = counted
    created = kraft.create(topic("settled", partitions=6, replication_factor=3))
    assert created["settled"].error_code == ErrorCode.NONE
    kraft.run(asyncio.sleep(0.05))
    assert reconciles == []
    kraft.run(kraft.controller._fence(3, kraft.broker_epochs[3]))
    kraft.run(asyncio.sleep(0.05))
    assert reconciles and all(3 not in partition.isr for partition in kraft.image.topic("settled").partitions.values())
