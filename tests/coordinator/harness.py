"""A GroupCoordinator driven by a manual clock, with a dict of lists standing in for __consumer_offsets."""

from __future__ import annotations

from kfk.coordinator.group.config import GroupCoordinatorConfig
from kfk.coordinator.group.group_coordinator import (
    GroupCoordinator,
    OffsetCommitPartition,
)
from kfk.errors import ErrorCode
from kfk.protocol.messages.consumer_protocol_subscription import (
    ConsumerProtocolSubscription,
)
from kfk.protocol.messages.heartbeat import HeartbeatRequest
from kfk.protocol.messages.join_group import JoinGroupRequest
from kfk.protocol.messages.leave_group import LeaveGroupRequest
from kfk.protocol.messages.sync_group import SyncGroupRequest

DEFAULTS = dict(offsets_topic_num_partitions=4, initial_rebalance_delay_ms=0, min_session_timeout_ms=100,
                max_session_timeout_ms=60_000)


def subscription(*topics: str) -> bytes:
    return b"\x00\x01" + ConsumerProtocolSubscription(topics=list(topics)).encode(1)


class Answers(list):
    """Collects the answers given to one request."""

    def __call__(self, response) -> None:
        self.append(response)

    @property
    def only(self):
        assert len(self) == 1, self
        return self[0]


class Harness:
    def __init__(self, *, auto_commit: bool = True, load: bool = True, **config) -> None:
        self.config = GroupCoordinatorConfig(**{**DEFAULTS, **config})
        self.coordinator = GroupCoordinator(self.config)
        self.now_ms = 1_000_000
        self.log: dict[int, list[tuple[bytes, bytes | None]]] = {
            p: [] for p in range(self.config.offsets_topic_num_partitions)}
        self.auto_commit = auto_commit
        self.held = []
        if load:
            for partition in self.log:
                self.coordinator.begin_loading(partition)
                self.coordinator.complete_loading(partition, self.now_ms)

    def flush(self, error: ErrorCode = ErrorCode.NONE) -> None:
        """Append every pending write and complete it (committed) or fail it with `error`."""
        writes = self.held + self.coordinator.take_writes()
        self.held = []
        while writes:
            for write in writes:
                if error == ErrorCode.NONE:
                    self.log[write.partition].extend(write.records)
                self.coordinator.complete_write(write, error, self.now_ms)
            writes = self.coordinator.take_writes()

    def after(self) -> None:
        """What the broker's loop does after each request: run what is due now, then the writes."""
        self.coordinator.poll(self.now_ms)
        if self.auto_commit:
            self.flush()
        else:
            self.held += self.coordinator.take_writes()

    def advance(self, ms: int) -> None:
        """Move the clock, firing every deadline on the way in order."""
        target = self.now_ms + ms
        while True:
            deadline = self.coordinator.next_deadline_ms()
            if deadline is None or deadline > target:
                break
            self.now_ms = max(self.now_ms, deadline)
            self.coordinator.poll(self.now_ms)
            self.after()
        self.now_ms = target
        self.coordinator.poll(self.now_ms)
        self.after()

    def join(self, group_id: str, member_id: str = "", *, version: int = 5, session_timeout_ms: int = 10_000,
             rebalance_timeout_ms: int = 30_000, protocols=(("range", subscription("t")),),
             group_instance_id: str | None = None, protocol_type: str = "consumer",
             client_id: str = "client") -> Answers:
        answers = Answers()
        request = JoinGroupRequest(
            group_id=group_id, session_timeout_ms=session_timeout_ms, rebalance_timeout_ms=rebalance_timeout_ms,
            member_id=member_id, group_instance_id=group_instance_id, protocol_type=protocol_type,
            protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name=name, metadata=metadata)
                       for name, metadata in protocols])
        self.coordinator.join_group(request, version, client_id, "/127.0.0.1", self.now_ms, answers)
        self.after()
        return answers

    def join_dynamic(self, group_id: str, **kwargs) -> Answers:
        """The two-step join of JoinGroup v4+: MEMBER_ID_REQUIRED, then join with the id."""
        first = self.join(group_id, **kwargs).only
        assert first.error_code == ErrorCode.MEMBER_ID_REQUIRED
        return self.join(group_id, first.member_id, **kwargs)

    def sync(self, group_id: str, member_id: str, generation_id: int, assignments: dict[str, bytes] | None = None,
             group_instance_id: str | None = None, protocol_type=None, protocol_name=None) -> Answers:
        answers = Answers()
        request = SyncGroupRequest(
            group_id=group_id, generation_id=generation_id, member_id=member_id,
            group_instance_id=group_instance_id, protocol_type=protocol_type, protocol_name=protocol_name,
            assignments=[SyncGroupRequest.SyncGroupRequestAssignment(member_id=m, assignment=a)
                         for m, a in (assignments or {}).items()])
        self.coordinator.sync_group(request, self.now_ms, answers)
        self.after()
        return answers

    def heartbeat(self, group_id: str, member_id: str, generation_id: int,
                  group_instance_id: str | None = None) -> ErrorCode:
        error = self.coordinator.heartbeat(HeartbeatRequest(group_id=group_id, generation_id=generation_id,
                                                            member_id=member_id,
                                                            group_instance_id=group_instance_id), self.now_ms)
        self.after()
        return error

    def leave(self, group_id: str, *member_ids: str, group_instance_id: str | None = None):
        members = [LeaveGroupRequest.MemberIdentity(member_id=m, group_instance_id=group_instance_id)
                   for m in member_ids]
        result = self.coordinator.leave_group(group_id, members, self.now_ms)
        self.after()
        return result

    def commit(self, group_id: str, offsets: dict[tuple[str, int], int], *, member_id: str = "",
               generation_id: int = -1, metadata: str = "", retention_time_ms: int = -1, version: int = 8,
               group_instance_id: str | None = None) -> Answers:
        answers = Answers()
        partitions = [OffsetCommitPartition(topic, partition, offset, committed_metadata=metadata)
                      for (topic, partition), offset in offsets.items()]
        self.coordinator.commit_offsets(group_id, member_id, group_instance_id, generation_id, retention_time_ms,
                                        partitions, version, self.now_ms, answers)
        self.after()
        return answers

    def fetch(self, group_id: str, topics=None):
        return self.coordinator.fetch_offsets(group_id, topics)

    def committed(self, group_id: str, topic: str, partition: int) -> int | None:
        error, topics = self.fetch(group_id, [(topic, [partition])])
        assert error == ErrorCode.NONE
        offset = topics[0][1][0][1]
        return None if offset is None else offset.committed_offset
