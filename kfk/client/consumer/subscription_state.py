"""SubscriptionState: what the consumer reads and where it is in each partition (Java's SubscriptionState).

Either the user assigns partitions (assign()) or subscribes to topics or a pattern (subscribe()) and the group hands
partitions out; the two cannot mix. Per assigned partition it keeps the position (the offset of the next record to
return, with the leader epoch of the record before it), whether it is paused, a pending offset reset, and what the
last fetch said about the log (high watermark, last stable offset, log start offset) for lag.

The caller's thread changes it (poll, seek, assign, pause) and the network thread reads it to build fetches, so
every access holds one lock; the methods are short and never call out while holding it.
"""

from __future__ import annotations

import enum
import re
import threading
from collections.abc import Iterable
from dataclasses import dataclass

from kfk.common.constants import UNKNOWN_LEADER_EPOCH
from kfk.common.structs import OffsetAndMetadata, TopicPartition

__all__ = ["SubscriptionState", "OffsetResetStrategy", "SubscriptionType", "TopicPartitionState"]


class OffsetResetStrategy(enum.Enum):
    EARLIEST = "earliest"
    LATEST = "latest"
    NONE = "none"


class SubscriptionType(enum.Enum):
    NONE = 0
    AUTO_TOPICS = 1
    AUTO_PATTERN = 2
    USER_ASSIGNED = 3


@dataclass
class TopicPartitionState:
    position: int | None = None
    position_leader_epoch: int = UNKNOWN_LEADER_EPOCH
    paused: bool = False
    reset_strategy: OffsetResetStrategy | None = None
    high_watermark: int | None = None
    last_stable_offset: int | None = None
    log_start_offset: int | None = None


class SubscriptionState:
    def __init__(self, default_reset_strategy: OffsetResetStrategy) -> None:
        self.default_reset_strategy = default_reset_strategy
        self.subscription_type = SubscriptionType.NONE
        self.subscription: set[str] = set()
        self.pattern: re.Pattern | None = None
        self._assignment: dict[TopicPartition, TopicPartitionState] = {}
        self._lock = threading.RLock()

    # --- subscribing -------------------------------------------------------------------------------------------------

    def _set_type(self, kind: SubscriptionType) -> None:
        if self.subscription_type not in (SubscriptionType.NONE, kind):
            raise ValueError("subscribe() and assign() cannot be mixed: call unsubscribe() first")
        self.subscription_type = kind

    def subscribe(self, topics: Iterable[str]) -> bool:
        """Subscribe to topics; True if the subscription changed (a rejoin is needed)."""
        with self._lock:
            self._set_type(SubscriptionType.AUTO_TOPICS)
            topics = set(topics)
            changed = topics != self.subscription
            self.subscription = topics
            return changed

    def subscribe_pattern(self, pattern: re.Pattern) -> None:
        with self._lock:
            self._set_type(SubscriptionType.AUTO_PATTERN)
            self.pattern = pattern

    def match_pattern(self, topics: Iterable[str]) -> bool:
        """Set the subscription to the topics matching the pattern; True if it changed."""
        with self._lock:
            assert self.pattern is not None
            matched = {topic for topic in topics if self.pattern.fullmatch(topic)}
            changed = matched != self.subscription
            self.subscription = matched
            return changed

    @property
    def has_auto_assigned_partitions(self) -> bool:
        return self.subscription_type in (SubscriptionType.AUTO_TOPICS, SubscriptionType.AUTO_PATTERN)

    def assign_from_user(self, partitions: Iterable[TopicPartition]) -> None:
        with self._lock:
            self._set_type(SubscriptionType.USER_ASSIGNED)
            self._set_assignment(partitions)
            self.subscription = {tp.topic for tp in self._assignment}

    def assign_from_subscribed(self, partitions: Iterable[TopicPartition]) -> None:
        """The group's assignment (positions of partitions already owned are kept)."""
        with self._lock:
            self._set_assignment(partitions)

    def _set_assignment(self, partitions: Iterable[TopicPartition]) -> None:
        partitions = list(dict.fromkeys(partitions))
        self._assignment = {tp: self._assignment.get(tp) or TopicPartitionState() for tp in partitions}

    def unsubscribe(self) -> None:
        with self._lock:
            self.subscription = set()
            self.pattern = None
            self._assignment = {}
            self.subscription_type = SubscriptionType.NONE

    # --- reading -----------------------------------------------------------------------------------------------------

    def assigned_partitions(self) -> list[TopicPartition]:
        with self._lock:
            return list(self._assignment)

    def is_assigned(self, tp: TopicPartition) -> bool:
        return tp in self._assignment

    def state(self, tp: TopicPartition) -> TopicPartitionState | None:
        return self._assignment.get(tp)

    def fetchable_partitions(self) -> list[tuple[TopicPartition, int, int]]:
        """(partition, position, position leader epoch) for assigned, unpaused partitions with a position."""
        with self._lock:
            return [(tp, state.position, state.position_leader_epoch) for tp, state in self._assignment.items()
                    if state.position is not None and not state.paused and state.reset_strategy is None]

    def missing_positions(self) -> list[TopicPartition]:
        """Partitions that need a committed offset or a reset before they can be fetched."""
        with self._lock:
            return [tp for tp, state in self._assignment.items()
                    if state.position is None and state.reset_strategy is None]

    def awaiting_reset(self) -> dict[TopicPartition, OffsetResetStrategy]:
        with self._lock:
            return {tp: state.reset_strategy for tp, state in self._assignment.items()
                    if state.reset_strategy is not None}

    def all_consumed(self) -> dict[TopicPartition, OffsetAndMetadata]:
        """Positions to commit: every assigned partition that has one."""
        with self._lock:
            return {tp: OffsetAndMetadata(state.position, "", state.position_leader_epoch)
                    for tp, state in self._assignment.items() if state.position is not None}

    def position(self, tp: TopicPartition) -> int | None:
        state = self._assignment.get(tp)
        return None if state is None else state.position

    def paused_partitions(self) -> set[TopicPartition]:
        with self._lock:
            return {tp for tp, state in self._assignment.items() if state.paused}

    # --- changing ----------------------------------------------------------------------------------------------------

    def _require(self, tp: TopicPartition) -> TopicPartitionState:
        state = self._assignment.get(tp)
        if state is None:
            raise ValueError(f"{tp} is not assigned to this consumer")
        return state

    def seek(self, tp: TopicPartition, offset: int, leader_epoch: int = UNKNOWN_LEADER_EPOCH) -> None:
        with self._lock:
            state = self._require(tp)
            state.position = offset
            state.position_leader_epoch = leader_epoch
            state.reset_strategy = None

    def advance(self, tp: TopicPartition, position: int, leader_epoch: int, expected: int) -> bool:
        """Move the position forward after returning records, if nobody seeked meanwhile."""
        with self._lock:
            state = self._assignment.get(tp)
            if state is None or state.position != expected:
                return False
            state.position = position
            state.position_leader_epoch = leader_epoch
            return True

    def request_offset_reset(self, tp: TopicPartition, strategy: OffsetResetStrategy | None = None) -> None:
        with self._lock:
            state = self._require(tp)
            state.reset_strategy = strategy or self.default_reset_strategy
            state.position = None

    def maybe_seek_unvalidated(self, tp: TopicPartition, offset: int, leader_epoch: int,
                               strategy: OffsetResetStrategy) -> None:
        """Finish a reset, unless the user seeked or the partition went away meanwhile."""
        with self._lock:
            state = self._assignment.get(tp)
            if state is None or state.reset_strategy != strategy:
                return
            state.position = offset
            state.position_leader_epoch = leader_epoch
            state.reset_strategy = None

    def update_log_offsets(self, tp: TopicPartition, high_watermark: int, last_stable_offset: int,
                           log_start_offset: int) -> None:
        state = self._assignment.get(tp)
        if state is not None:
            state.high_watermark = high_watermark
            state.last_stable_offset = last_stable_offset if last_stable_offset >= 0 else None
            state.log_start_offset = log_start_offset if log_start_offset >= 0 else None

    def pause(self, partitions: Iterable[TopicPartition]) -> None:
        with self._lock:
            for tp in partitions:
                self._require(tp).paused = True

    def resume(self, partitions: Iterable[TopicPartition]) -> None:
        with self._lock:
            for tp in partitions:
                self._require(tp).paused = False
