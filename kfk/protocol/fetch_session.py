"""The fetcher's side of an incremental fetch session (KIP-227), sans I/O: which partitions the next Fetch request
must name, and what a response does to the session.

The first request is full (epoch 0: every partition). When the broker answers with a session id, later requests
carry that id and the next epoch, and name only the partitions that are new or whose fetch state changed (fetch
offset, leader epoch, last fetched epoch, log start offset, max bytes); partitions no longer wanted go in the
forgotten list. A session error (FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH,
FETCH_SESSION_TOPIC_ID_ERROR) or a failed request makes the next request full again, naming the old id with epoch 0,
which tells the broker to drop it. Epochs wrap from INT32_MAX to 1.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from kfk.common.constants import INT32_MAX
from kfk.errors import ErrorCode
from kfk.protocol.messages.fetch import FetchRequest, FetchResponse

__all__ = ["FINAL_EPOCH", "INITIAL_EPOCH", "next_epoch", "FetchSessionBuilder", "SessionFetch"]

#: Epoch -1 ends a session (or fetches without one); 0 asks for a new one; anything else is incremental.
FINAL_EPOCH = -1
INITIAL_EPOCH = 0

_SESSION_ERRORS = (ErrorCode.FETCH_SESSION_ID_NOT_FOUND, ErrorCode.INVALID_FETCH_SESSION_EPOCH,
                   ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR)

PartitionKey = tuple[str, int]


def next_epoch(epoch: int) -> int:
    """The epoch after ``epoch``: 1, 2, ... INT32_MAX, then 1 again (0 and -1 have their own meanings)."""
    return 1 if epoch >= INT32_MAX else epoch + 1


def _fetch_state(partition: FetchRequest.FetchPartition) -> tuple[int, int, int, int, int]:
    return (partition.fetch_offset, partition.current_leader_epoch, partition.last_fetched_epoch,
            partition.log_start_offset, partition.partition_max_bytes)


@dataclass(frozen=True)
class SessionFetch:
    """What the next Fetch request carries for the session."""

    session_id: int
    session_epoch: int
    topics: list[FetchRequest.FetchTopic]
    forgotten_topics_data: list[FetchRequest.ForgottenTopic]


class FetchSessionBuilder:
    """One fetcher's session with one broker. Partitions are keyed by topic name; with ``topic_ids`` (Fetch v13+)
    the request names topics by id instead. A session is opened with one of the two and kept with it: a change
    (the broker upgraded, a topic id learned) starts a new session."""

    def __init__(self) -> None:
        self.session_id = 0
        self.epoch = INITIAL_EPOCH
        self._sent: dict[PartitionKey, tuple[int, int, int, int, int]] = {}
        self._uses_topic_ids = False
        self._topic_ids: dict[str, uuid.UUID] = {}  # of the topics the session holds (forgetting names the id)

    def build(self, wanted: dict[PartitionKey, FetchRequest.FetchPartition],
              topic_ids: Mapping[str, uuid.UUID] | None = None) -> SessionFetch:
        """The request for ``wanted`` (every partition to fetch now, with its fetch state)."""
        if (topic_ids is not None) != self._uses_topic_ids or (topic_ids is not None and any(
                topic_ids[topic] != known for topic, known in self._topic_ids.items() if topic in topic_ids)):
            self.reset()  # names <-> ids, or a topic recreated under a new id: a new session
            self._uses_topic_ids = topic_ids is not None
        if self.epoch == INITIAL_EPOCH:
            to_send = dict(wanted)
            forgotten: list[PartitionKey] = []
        else:
            to_send = {key: partition for key, partition in wanted.items()
                       if self._sent.get(key) != _fetch_state(partition)}
            forgotten = [key for key in self._sent if key not in wanted]
        self._sent = {key: _fetch_state(partition) for key, partition in wanted.items()}
        forgotten_ids = self._topic_ids
        if topic_ids is not None:
            self._topic_ids = {topic: topic_ids[topic] for topic, _ in wanted}
        topics: dict[str, list[FetchRequest.FetchPartition]] = {}
        for (topic, _), partition in to_send.items():
            topics.setdefault(topic, []).append(partition)
        forgotten_by_topic: dict[str, list[int]] = {}
        for topic, index in forgotten:
            forgotten_by_topic.setdefault(topic, []).append(index)
        if topic_ids is None:
            return SessionFetch(
                self.session_id, self.epoch,
                [FetchRequest.FetchTopic(topic=topic, partitions=partitions) for topic, partitions in topics.items()],
                [FetchRequest.ForgottenTopic(topic=topic, partitions=indexes)
                 for topic, indexes in forgotten_by_topic.items()])
        return SessionFetch(
            self.session_id, self.epoch,
            [FetchRequest.FetchTopic(topic_id=topic_ids[topic], partitions=partitions)
             for topic, partitions in topics.items()],
            [FetchRequest.ForgottenTopic(topic_id=forgotten_ids[topic], partitions=indexes)
             for topic, indexes in forgotten_by_topic.items()])

    def handle_response(self, response: FetchResponse) -> bool:
        """Move the session on after ``response``; False for a session error (the next request is full)."""
        if response.error_code in _SESSION_ERRORS:
            self.reset()
            return False
        if self.epoch == INITIAL_EPOCH:
            self.session_id = response.session_id  # 0: the broker keeps no session; the next request is full too
            if response.session_id != 0:
                self.epoch = 1
        else:
            self.epoch = next_epoch(self.epoch)
        return True

    def reset(self) -> None:
        """After an error or a lost request: the next request is full (and drops the old session on the broker)."""
        self.epoch = INITIAL_EPOCH
        self._sent = {}
        self._topic_ids = {}
