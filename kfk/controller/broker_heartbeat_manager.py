"""Broker liveness in KRaft mode (Kafka's BrokerHeartbeatManager): pure logic, time in, decisions out.

A KRaft broker has no session to lose (ZooKeeper's ephemeral znodes): it proves it is alive by sending
BrokerHeartbeat to the active controller every broker.heartbeat.interval.ms. The active controller keeps, per
registered broker, the time of its last heartbeat and the metadata offset it reported, and decides:
- when a fenced broker may be unfenced: once it has caught up, i.e. it has applied the metadata log at least up to
  its own RegisterBrokerRecord (so it knows every partition it is a replica of before it is told to serve them);
- which unfenced brokers are stale: no heartbeat for broker.session.timeout.ms. The controller fences them, which
  takes them out of the ISRs and moves their leaderships (partition_change.handle_broker_changes);
- where a broker's controlled shutdown stands (it asks with want_shut_down): it stays in CONTROLLED_SHUTDOWN while it
  leads partitions, and is told should_shut_down once it leads none and has applied the metadata that says so.

Only the active controller's manager means anything: a controller that becomes active starts every registered
broker's session afresh (`reset`), as it cannot know when they last reached its predecessor.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class BrokerControlState(enum.Enum):
    """Kafka's BrokerControlState: where a broker stands, as the heartbeat answers it."""

    FENCED = "fenced"
    UNFENCED = "unfenced"
    CONTROLLED_SHUTDOWN = "controlled_shutdown"
    SHUTDOWN_NOW = "shutdown_now"

    @property
    def fenced(self) -> bool:
        return self in (BrokerControlState.FENCED, BrokerControlState.SHUTDOWN_NOW)

    @property
    def should_shut_down(self) -> bool:
        return self is BrokerControlState.SHUTDOWN_NOW


@dataclass(slots=True)
class BrokerHeartbeatState:
    """What the active controller knows of one broker's heartbeats."""

    broker_id: int
    last_contact_ms: int
    metadata_offset: int = -1
    #: The metadata offset the broker must have applied before it may shut down (set when it stops leading).
    controlled_shutdown_offset: int | None = None


class BrokerHeartbeatManager:
    def __init__(self, session_timeout_ms: int) -> None:
        self.session_timeout_ms = session_timeout_ms
        self._brokers: dict[int, BrokerHeartbeatState] = {}

    def reset(self, broker_ids: list[int], now_ms: int) -> None:
        """A new active controller: every registered broker gets a full session from now."""
        self._brokers = {broker_id: BrokerHeartbeatState(broker_id, now_ms) for broker_id in broker_ids}

    def register(self, broker_id: int, now_ms: int) -> None:
        """A (re-)registration is a contact, and ends any controlled shutdown of the earlier incarnation."""
        self._brokers[broker_id] = BrokerHeartbeatState(broker_id, now_ms)

    def remove(self, broker_id: int) -> None:
        self._brokers.pop(broker_id, None)

    def touch(self, broker_id: int, now_ms: int, metadata_offset: int) -> None:
        state = self._brokers.get(broker_id)
        if state is None:
            state = self._brokers[broker_id] = BrokerHeartbeatState(broker_id, now_ms)
        state.last_contact_ms = now_ms
        state.metadata_offset = metadata_offset

    def has_valid_session(self, broker_id: int, now_ms: int) -> bool:
        state = self._brokers.get(broker_id)
        return state is not None and now_ms - state.last_contact_ms < self.session_timeout_ms

    def stale_brokers(self, unfenced: set[int], now_ms: int) -> list[int]:
        """The unfenced brokers whose session expired (no heartbeat for session_timeout_ms): to be fenced. A broker
        the manager never heard of has no session either."""
        return sorted(broker_id for broker_id in unfenced if not self.has_valid_session(broker_id, now_ms))

    def next_check_ms(self, unfenced: set[int], now_ms: int) -> int:
        """When the next session of an unfenced broker can expire (now + the timeout when none is tracked)."""
        deadlines = [self._brokers[broker_id].last_contact_ms + self.session_timeout_ms
                     for broker_id in unfenced if broker_id in self._brokers]
        return min(deadlines, default=now_ms + self.session_timeout_ms)

    def next_state(self, broker_id: int, current: BrokerControlState, registration_offset: int,
                   metadata_offset: int, want_fence: bool, want_shut_down: bool, has_leaderships: bool,
                   committed_offset: int) -> BrokerControlState:
        """The state a heartbeat moves the broker to (Kafka's calculateNextBrokerState). `registration_offset`: the
        offset of the broker's RegisterBrokerRecord; `metadata_offset`: what the broker has applied;
        `committed_offset`: the controller's last committed offset."""
        caught_up = metadata_offset >= registration_offset
        if current is BrokerControlState.SHUTDOWN_NOW:
            return current
        if want_fence:
            return BrokerControlState.SHUTDOWN_NOW if want_shut_down else BrokerControlState.FENCED
        if current is BrokerControlState.FENCED:
            if want_shut_down:
                return BrokerControlState.SHUTDOWN_NOW
            return BrokerControlState.UNFENCED if caught_up else BrokerControlState.FENCED
        if current is BrokerControlState.UNFENCED and not want_shut_down:
            return BrokerControlState.UNFENCED
        # Controlled shutdown: leaderships move away first; then the broker must have seen the metadata that moved
        # them, so that it stops serving only once its successors serve.
        state = self._brokers.get(broker_id)
        if has_leaderships:
            if state is not None:
                state.controlled_shutdown_offset = None
            return BrokerControlState.CONTROLLED_SHUTDOWN
        if state is None:
            return BrokerControlState.SHUTDOWN_NOW
        if state.controlled_shutdown_offset is None:
            state.controlled_shutdown_offset = committed_offset
        if metadata_offset >= state.controlled_shutdown_offset:
            return BrokerControlState.SHUTDOWN_NOW
        return BrokerControlState.CONTROLLED_SHUTDOWN
