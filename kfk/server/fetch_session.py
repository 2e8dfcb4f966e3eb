"""Incremental fetch sessions (KIP-227): the broker remembers which partitions a fetcher wants, so that a consumer
or follower of 1,000 partitions names only those whose position changed, and hears back only about partitions with
something new.

A session is created by a full fetch with session epoch 0 (INITIAL) when the cache has room; the response carries
its id. Each following fetch names the session and its next epoch (1, 2, ... wrapping to 1 after INT32_MAX), adds or
updates partitions (``topics``) and drops others (``forgotten_topics_data``); the broker reads every partition of the
session and answers only those with records, an error, or a changed high watermark, last stable offset or log start
offset (a partition new to the session always has one: its cached high watermark starts unknown). Epoch -1 (FINAL)
is a sessionless full fetch and closes the named session. A wrong epoch is INVALID_FETCH_SESSION_EPOCH, an unknown
id FETCH_SESSION_ID_NOT_FOUND, and mixing topic names (before Fetch v13) with topic ids (v13+) in one session
FETCH_SESSION_TOPIC_ID_ERROR.

The cache holds at most ``max.incremental.fetch.session.cache.slots`` sessions (Kafka's default 1000). When full, a
new session takes the slot of the least recently used session idle for longer than the eviction interval (Kafka's
fixed 120 s); failing that, of the least recently used session with fewer partitions than the new one, where a
follower's session (privileged) may also displace any consumer's. Otherwise the fetch is answered without a session
(session id 0), which every client accepts. Partitions that returned records move to the end of the session's order,
so that a response size limit does not starve the partitions listed last.

This module is pure state: time comes from a Clock, and the fetch handler does all reading (through the read
requests each cached partition keeps, rebuilt only when the fetcher changes its state).
"""

from __future__ import annotations

import uuid
from collections import OrderedDict
from dataclasses import dataclass, field
from random import Random

from kfk.common.clock import Clock
from kfk.common.constants import INT32_MAX
from kfk.common.structs import TopicPartition
from kfk.errors import ErrorCode
from kfk.replication.fetch_params import FetchPartitionRequest

__all__ = ["EVICTION_MS", "CachedPartition", "FetchSession", "FetchSessionCache", "PartitionKey"]

#: How long a session must be idle before a new one may take its slot (Kafka's MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS).
EVICTION_MS = 120_000

#: A partition of a session: (topic id, partition) for sessions created by Fetch v13+, else (topic name, partition).
PartitionKey = tuple[uuid.UUID | str, int]


@dataclass(slots=True)
class CachedPartition:
    """What the session remembers of one partition: the fetcher's request, and what the last response told it."""

    topic: str
    topic_id: uuid.UUID
    partition: int
    fetch_offset: int
    partition_max_bytes: int
    current_leader_epoch: int = -1
    last_fetched_epoch: int = -1
    log_start_offset: int = -1  # a follower's own log start offset, as it sent it
    # Last values sent back; -1 until the first response, so a new partition is always answered once.
    sent_high_watermark: int = -1
    sent_last_stable_offset: int = -1
    sent_log_start_offset: int = -1
    # The replica manager's read request, built once per change of the fetcher's state (most fetches change none).
    _read_request: FetchPartitionRequest | None = None

    def update_request(self, fetch_offset: int, partition_max_bytes: int, current_leader_epoch: int,
                       last_fetched_epoch: int, log_start_offset: int) -> None:
        self.fetch_offset = fetch_offset
        self.partition_max_bytes = partition_max_bytes
        self.current_leader_epoch = current_leader_epoch
        self.last_fetched_epoch = last_fetched_epoch
        self.log_start_offset = log_start_offset
        self._read_request = None

    def resolve_topic(self, name: str) -> None:
        """The topic's name for a session keyed by topic id (known only from the broker's metadata)."""
        if name != self.topic:
            self.topic = name
            self._read_request = None

    def read_request(self) -> FetchPartitionRequest:
        if self._read_request is None:
            self._read_request = FetchPartitionRequest(
                TopicPartition(self.topic, self.partition), fetch_offset=self.fetch_offset,
                partition_max_bytes=self.partition_max_bytes, current_leader_epoch=self.current_leader_epoch,
                last_fetched_epoch=self.last_fetched_epoch, log_start_offset=self.log_start_offset)
        return self._read_request

    def unchanged(self, high_watermark: int, last_stable_offset: int, log_start_offset: int) -> bool:
        """Whether these offsets are what the fetcher was last told."""
        return (high_watermark == self.sent_high_watermark and last_stable_offset == self.sent_last_stable_offset
                and log_start_offset == self.sent_log_start_offset)

    def must_respond(self, error: ErrorCode, record_bytes: int, high_watermark: int, last_stable_offset: int,
                     log_start_offset: int) -> bool:
        """Whether an incremental response includes this partition; remembers what it sends."""
        changed = (error != ErrorCode.NONE or record_bytes > 0
                   or not self.unchanged(high_watermark, last_stable_offset, log_start_offset))
        if error == ErrorCode.NONE:
            self.sent_high_watermark = high_watermark
            self.sent_last_stable_offset = last_stable_offset
            self.sent_log_start_offset = log_start_offset
        return changed


@dataclass(slots=True)
class FetchSession:
    session_id: int
    privileged: bool  # a follower's session
    uses_topic_ids: bool
    created_ms: int
    last_used_ms: int
    epoch: int = 1  # the epoch the next incremental fetch must carry
    partitions: OrderedDict[PartitionKey, CachedPartition] = field(default_factory=OrderedDict)

    def move_to_end(self, key: PartitionKey) -> None:
        self.partitions.move_to_end(key)


class FetchSessionCache:
    """The broker's sessions, bounded by ``max_entries`` slots (0 disables sessions)."""

    def __init__(self, max_entries: int, clock: Clock, eviction_ms: int = EVICTION_MS,
                 rng: Random | None = None) -> None:
        self.max_entries = max_entries
        self.eviction_ms = eviction_ms
        self._clock = clock
        self._rng = rng or Random()
        self._sessions: OrderedDict[int, FetchSession] = OrderedDict()  # least recently used first
        self.evictions = 0

    def __len__(self) -> int:
        return len(self._sessions)

    @property
    def total_partitions(self) -> int:
        return sum(len(session.partitions) for session in self._sessions.values())

    def get(self, session_id: int) -> FetchSession | None:
        return self._sessions.get(session_id)

    def touch(self, session: FetchSession) -> None:
        session.last_used_ms = self._clock()
        self._sessions.move_to_end(session.session_id)

    def remove(self, session_id: int) -> FetchSession | None:
        return self._sessions.pop(session_id, None)

    def create(self, privileged: bool, uses_topic_ids: bool,
               partitions: OrderedDict[PartitionKey, CachedPartition]) -> FetchSession | None:
        """A new session over ``partitions``, or None when no slot can be had (the fetch goes sessionless)."""
        if self.max_entries <= 0 or not partitions:
            return None
        now = self._clock()
        if len(self._sessions) >= self.max_entries and not self._evict_for(privileged, len(partitions), now):
            return None
        session_id = self._new_id()
        session = FetchSession(session_id, privileged, uses_topic_ids, now, now, partitions=partitions)
        self._sessions[session_id] = session
        return session

    def _evict_for(self, privileged: bool, size: int, now: int) -> bool:
        victim = next((session for session in self._sessions.values()
                       if now - session.last_used_ms > self.eviction_ms), None)
        if victim is None:
            victim = next((session for session in self._sessions.values()
                           if (privileged and not session.privileged)
                           or (privileged == session.privileged and len(session.partitions) < size)), None)
        if victim is None:
            return False
        del self._sessions[victim.session_id]
        self.evictions += 1
        return True

    def _new_id(self) -> int:
        while True:
            session_id = self._rng.randint(1, INT32_MAX)
            if session_id not in self._sessions:
                return session_id
