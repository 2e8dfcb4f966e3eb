"""GroupCoordinator: the group coordinator's whole state machine, over every __consumer_offsets partition this broker
leads (Kafka's GroupCoordinatorService + GroupCoordinatorShard, without the I/O).

Time in, deadlines out (DESIGN.md decision 9): every call takes `now_ms`; timeouts live in one CoordinatorTimer that
the owner drives with `poll(now_ms)` at `next_deadline_ms()`. Durable changes go out as CoordinatorWrites (records for
one __consumer_offsets partition and a continuation); the owner appends them with acks=-1 and calls
`complete_write(write, error, now_ms)` once they are committed (or failed), in the order they were taken. Answers go
out through the `respond` callables passed in, some of them only after a write completes or a timer fires. A test
drives all of it with a manual clock and a list standing in for the log; kfk.coordinator.group.service drives it
with asyncio and the broker's replica manager.

Ownership: a partition is loading (COORDINATOR_LOAD_IN_PROGRESS) from `begin_loading` until `complete_loading`, in
between the owner `replay`s its records; requests for a group of a partition this broker does not lead get
NOT_COORDINATOR.

Transactional offset commits (TxnOffsetCommit) are written as a transactional batch of the producer (the write
carries its producer id and epoch) and stay pending until `complete_transaction` is called for the producer's
COMMIT or ABORT marker in that partition; a load replays records of transactional batches with their producer id
and the markers through the same `complete_transaction`, so a loaded partition shows committed transactions' offsets,
not aborted ones, and keeps open ones pending.

Groups of both protocols share the partitions, the offsets and the timer: classic groups in GroupMetadataManager,
the consumer protocol's (KIP-848) in ConsumerGroupManager. A group id belongs to one of them at a time: a
group of one protocol migrates to the other online (group.consumer.migration.policy, kfk.coordinator.group.
group_migration): the first ConsumerGroupHeartbeat to a classic group with members converts it to a consumer group
(GROUP_ID_NOT_FOUND when the policy or Kafka's rules refuse), whose classic members' JoinGroup, SyncGroup, Heartbeat
and LeaveGroup the ConsumerGroupManager serves from then on; the departure of the last consumer-protocol member
converts it back. An empty group of either kind gives way to the other, its offsets kept.

Kafka's request-level checks live here too: an empty group id is INVALID_GROUP_ID for the membership APIs (offset
commits, fetches, DescribeGroups and DeleteGroups accept it, as Kafka does for old clients), a session timeout
outside group.min/max.session.timeout.ms is INVALID_SESSION_TIMEOUT.
"""

from __future__ import annotations

import dataclasses
import enum
import logging
from collections.abc import Callable

from kfk.coordinator.append_errors import append_error_to_response_error
from kfk.coordinator.group.classic_group import (
    ClassicGroup,
    ClassicGroupState,
    Responder,
)
from kfk.coordinator.group.config import GroupCoordinatorConfig
from kfk.coordinator.group.consumer_group import (
    CONSUMER_GROUP_TYPE,
    CONSUMER_PROTOCOL_TYPE,
    ConsumerGroup,
    ConsumerGroupState,
)
from kfk.coordinator.group.consumer_group_manager import ConsumerGroupManager, PartitionValidator
from kfk.coordinator.group.consumer_group_records import ConsumerGroupRecord, RecordType
from kfk.coordinator.group.group_metadata_manager import GroupMetadataManager
from kfk.coordinator.group.group_migration import (
    can_downgrade,
    can_upgrade,
    classic_group_of,
    members_of_classic_group,
)
from kfk.coordinator.group.offset_metadata_manager import (
    FetchedOffset,
    OffsetMetadataManager,
    commit_error_to_response_error,
)
from kfk.coordinator.group.record_serde import (
    NO_EXPIRE_TIMESTAMP,
    CommittedOffset,
    GroupMetadataRecord,
    OffsetCommitRecord,
    deserialize_record,
    group_metadata_key,
    offset_commit_key,
)
from kfk.coordinator.group.transactional_offsets import TopicPartitionKey
from kfk.coordinator.partitioning import partition_for
from kfk.coordinator.timer import CoordinatorTimer
from kfk.coordinator.writes import CoordinatorWrite, Record, WriteCallback
from kfk.errors import ErrorCode, KafkaError
from kfk.metadata.image import MetadataImage
from kfk.protocol.messages.consumer_group_describe import ConsumerGroupDescribeResponse
from kfk.protocol.messages.consumer_group_heartbeat import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)
from kfk.protocol.messages.describe_groups import DescribeGroupsResponse
from kfk.protocol.messages.heartbeat import HeartbeatRequest
from kfk.protocol.messages.join_group import JoinGroupRequest, JoinGroupResponse
from kfk.protocol.messages.leave_group import LeaveGroupRequest
from kfk.protocol.messages.list_groups import ListGroupsResponse
from kfk.protocol.messages.sync_group import SyncGroupRequest, SyncGroupResponse
from kfk.records import NO_PRODUCER_EPOCH, NO_PRODUCER_ID

log = logging.getLogger("kfk.coordinator.group")

#: ListGroups' group_type of a classic group.
CLASSIC_GROUP_TYPE = "classic"

_S = ClassicGroupState
_EXPIRE_OFFSETS_KEY = ("expire-offsets",)


class PartitionState(enum.Enum):
    LOADING = "loading"
    ACTIVE = "active"


@dataclasses.dataclass(frozen=True, slots=True)
class OffsetCommitPartition:
    topic: str
    partition: int
    committed_offset: int
    committed_leader_epoch: int = -1
    committed_metadata: str | None = ""
    commit_timestamp_ms: int = -1


class GroupCoordinator:
    def __init__(self, config: GroupCoordinatorConfig) -> None:
        self.config = config
        self.timer = CoordinatorTimer()
        self.partitions: dict[int, PartitionState] = {}
        self._writes: list[CoordinatorWrite] = []
        #: The metadata image the consumer protocol assigns from (the service keeps it current).
        self.image = MetadataImage()
        self.offsets: OffsetMetadataManager
        self.groups = GroupMetadataManager(config, self.timer, self._write_for_group,
                                           lambda group_id: self.offsets.has_offsets(group_id))
        self.consumer_groups = ConsumerGroupManager(config, self.timer, self._write_for_group, lambda: self.image,
                                                    self._classic_group_has_members, self._downgrade)
        self.offsets = OffsetMetadataManager(config, self.groups, self.consumer_groups)

    def _classic_group_has_members(self, group_id: str) -> bool:
        """Whether a classic group with members holds the id (an empty one gives way to a consumer group: it is
        deleted, its offsets kept, as Kafka does)."""
        group = self.groups.group(group_id)
        return group is not None and not group.is_in_state(_S.DEAD) and not group.is_empty

    # -- ownership ---------------------------------------------------------------------------------------------------

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.config.offsets_topic_num_partitions)

    def coordinator_error(self, group_id: str) -> ErrorCode:
        state = self.partitions.get(self.partition_for(group_id))
        if state is PartitionState.ACTIVE:
            return ErrorCode.NONE
        if state is PartitionState.LOADING:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        return ErrorCode.NOT_COORDINATOR

    def begin_loading(self, partition: int) -> None:
        self.partitions[partition] = PartitionState.LOADING

    def replay(self, partition: int, key: bytes | memoryview | None, value: bytes | memoryview | None,
               now_ms: int, producer_id: int = NO_PRODUCER_ID) -> None:
        """One record of the partition's log, in log order (a corrupt or foreign record is logged and skipped);
        `producer_id` that of the transactional batch holding it. Markers go to `complete_transaction`."""
        try:
            record = deserialize_record(key, value)
        except KafkaError as error:
            log.warning("Skipping a record of %s-%d: %s", "__consumer_offsets", partition, error)
            return
        self.replay_record(record, now_ms, producer_id)

    def replay_record(self, record: OffsetCommitRecord | GroupMetadataRecord | ConsumerGroupRecord | None,
                      now_ms: int, producer_id: int = NO_PRODUCER_ID) -> None:
        if isinstance(record, ConsumerGroupRecord):
            if record.value is not None:
                # An empty classic group (offsets only) became this consumer group.
                self.groups.groups.pop(record.group_id, None)
            self.consumer_groups.replay(record)
        elif isinstance(record, OffsetCommitRecord):
            self.offsets.replay(record, now_ms, producer_id)
        elif isinstance(record, GroupMetadataRecord):
            # A tombstone deletes the group, not its offsets (their own tombstones do, as in Kafka): the group's
            # conversion to a consumer group deletes its classic record and keeps its offsets.
            self.groups.replay_group_metadata(record.group_id, record.value, now_ms)

    def complete_loading(self, partition: int, now_ms: int) -> None:
        if self.partitions.get(partition) is not PartitionState.LOADING:
            return
        self.partitions[partition] = PartitionState.ACTIVE
        for group in self._groups_of(partition):
            self.groups.on_loaded(group, now_ms)
        for consumer_group in self._consumer_groups_of(partition):
            self.consumer_groups.on_loaded(consumer_group, now_ms)
        if not self.timer.is_scheduled(_EXPIRE_OFFSETS_KEY):
            self.timer.schedule(_EXPIRE_OFFSETS_KEY, now_ms + self.config.offsets_retention_check_interval_ms,
                                self._expire_offsets)

    def unload(self, partition: int) -> None:
        """This broker no longer leads the partition: forget its groups and offsets."""
        if self.partitions.pop(partition, None) is None:
            return
        for group in self._groups_of(partition):
            self.groups.unload(group)
            self.offsets.remove_group(group.group_id)
        for consumer_group in self._consumer_groups_of(partition):
            self.consumer_groups.unload(consumer_group.group_id)
            self.offsets.remove_group(consumer_group.group_id)
        for group_id in [group_id for group_id in self.offsets.group_ids()
                         if self.partition_for(group_id) == partition]:
            self.offsets.remove_group(group_id)

    def _groups_of(self, partition: int) -> list[ClassicGroup]:
        return [group for group_id, group in self.groups.groups.items() if self.partition_for(group_id) == partition]

    def _consumer_groups_of(self, partition: int) -> list[ConsumerGroup]:
        return [group for group_id, group in self.consumer_groups.groups.items()
                if self.partition_for(group_id) == partition]

    def _any_group(self, group_id: str) -> ClassicGroup | ConsumerGroup | None:
        """The group of either protocol holding the id."""
        return self.consumer_groups.group(group_id) or self.groups.group(group_id)

    # -- writes and time ---------------------------------------------------------------------------------------------

    def _write_for_group(self, group_id: str, records: list[Record], on_complete: WriteCallback | None,
                         producer_id: int = NO_PRODUCER_ID, producer_epoch: int = NO_PRODUCER_EPOCH) -> None:
        self._writes.append(CoordinatorWrite(self.partition_for(group_id), records, on_complete, producer_id,
                                             producer_epoch))

    def take_writes(self) -> list[CoordinatorWrite]:
        writes, self._writes = self._writes, []
        return writes

    def complete_write(self, write: CoordinatorWrite, error: ErrorCode, now_ms: int) -> None:
        if error == ErrorCode.NONE and self.partitions.get(write.partition) is not PartitionState.ACTIVE:
            error = ErrorCode.NOT_LEADER_OR_FOLLOWER  # unloaded meanwhile: its state is gone, the writer must retry
        if error != ErrorCode.NONE:
            log.warning("Write of %d records to __consumer_offsets-%d failed: %s", len(write.records),
                        write.partition, error.name)
        if write.on_complete is not None:
            write.on_complete(error, now_ms)

    def poll(self, now_ms: int) -> int | None:
        """Run the timeouts due at `now_ms`; returns the next deadline (None: nothing scheduled)."""
        self.timer.poll(now_ms)
        return self.timer.next_deadline_ms()

    def next_deadline_ms(self) -> int | None:
        return self.timer.next_deadline_ms()

    # -- membership --------------------------------------------------------------------------------------------------

    def join_group(self, request: JoinGroupRequest, api_version: int, client_id: str, client_host: str,
                   now_ms: int, respond: Responder) -> None:
        error = ErrorCode.NONE
        if not request.group_id:
            error = ErrorCode.INVALID_GROUP_ID
        elif not self.config.min_session_timeout_ms <= request.session_timeout_ms <= \
                self.config.max_session_timeout_ms:
            error = ErrorCode.INVALID_SESSION_TIMEOUT
        else:
            error = self.coordinator_error(request.group_id)
        if error != ErrorCode.NONE:
            respond(JoinGroupResponse(error_code=error, member_id=request.member_id))
            return
        consumer_group = self.consumer_groups.group(request.group_id)
        if consumer_group is not None:
            if not consumer_group.is_empty:
                # A classic member joins a consumer group (a mixed group during a migration).
                self.consumer_groups.classic_join(request, api_version, client_id, client_host, now_ms, respond)
                return
            # An empty consumer group gives way to the classic group (its offsets stay), as in Kafka.
            records = self.consumer_groups.deletion_records(consumer_group)
            self.consumer_groups.apply(records)
            self._write_for_group(request.group_id, records, None)
        self.groups.join_group(request, api_version, client_id, client_host, now_ms, respond)

    def sync_group(self, request: SyncGroupRequest, now_ms: int, respond: Responder) -> None:
        error = ErrorCode.INVALID_GROUP_ID if not request.group_id else self.coordinator_error(request.group_id)
        if error != ErrorCode.NONE:
            respond(SyncGroupResponse(error_code=error))
            return
        if self._is_consumer_group(request.group_id):
            self.consumer_groups.classic_sync(request, now_ms, respond)
            return
        self.groups.sync_group(request, now_ms, respond)

    def heartbeat(self, request: HeartbeatRequest, now_ms: int) -> ErrorCode:
        if not request.group_id:
            return ErrorCode.INVALID_GROUP_ID
        error = self.coordinator_error(request.group_id)
        if error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            return ErrorCode.NONE  # Kafka answers a heartbeat blindly while the group loads
        if error != ErrorCode.NONE:
            return error
        if self._is_consumer_group(request.group_id):
            return self.consumer_groups.classic_heartbeat(request, now_ms)
        return self.groups.heartbeat(request, now_ms)

    def leave_group(self, group_id: str, members: list[LeaveGroupRequest.MemberIdentity],
                    now_ms: int) -> tuple[ErrorCode, list]:
        error = ErrorCode.INVALID_GROUP_ID if not group_id else self.coordinator_error(group_id)
        if error != ErrorCode.NONE:
            return error, []
        if self._is_consumer_group(group_id):
            return self.consumer_groups.classic_leave(group_id, members, now_ms)
        return self.groups.leave_group(group_id, members, now_ms)

    def consumer_group_heartbeat(self, request: ConsumerGroupHeartbeatRequest, api_version: int, client_id: str,
                                 client_host: str, now_ms: int,
                                 respond: Callable[[ConsumerGroupHeartbeatResponse], None]) -> None:
        error = ErrorCode.NONE if not request.group_id else self.coordinator_error(request.group_id)
        if error != ErrorCode.NONE:
            respond(ConsumerGroupHeartbeatResponse(error_code=error))
            return
        classic = self.groups.group(request.group_id)
        if request.member_epoch == 0 and self._classic_group_has_members(request.group_id) and classic is not None \
                and can_upgrade(classic, self.config):
            self._upgrade(classic, now_ms)
        self.consumer_groups.heartbeat(request, api_version, client_id, client_host, now_ms, respond)

    # -- online migration --------------------------------------------------------------------------------------------

    def _is_consumer_group(self, group_id: str) -> bool:
        """Whether the group id is a consumer group's with members, whose classic members the ConsumerGroupManager
        serves."""
        group = self.consumer_groups.group(group_id)
        return group is not None and not group.is_empty and self.groups.group(group_id) is None

    def _upgrade(self, classic: ClassicGroup, now_ms: int) -> None:
        """Convert the classic group to a consumer group (its record deleted, the consumer group's written and
        applied): whoever waits for a JoinGroup or SyncGroup answer is told to rejoin."""
        group_id = classic.group_id
        try:
            members = members_of_classic_group(classic, self.image)
        except KafkaError as error:
            log.warning("Cannot upgrade the classic group %s to consumer group: %s", group_id, error)
            return  # the heartbeat is refused (GROUP_ID_NOT_FOUND) as with any classic group
        log.info("Upgrading classic group %s (generation %d, %d members) to a consumer group", group_id,
                 classic.generation_id, len(classic.members))
        self.groups.unload(classic, ErrorCode.REBALANCE_IN_PROGRESS)
        records = [(group_metadata_key(group_id), None)]
        records += self.consumer_groups.adopt_members(group_id, members, classic.generation_id, now_ms)
        self._write_for_group(group_id, records, None)

    def _downgrade(self, group: ConsumerGroup, leaving_member_id: str, now_ms: int) -> list[Record] | None:
        """When the leaving member is the consumer group's last of the consumer protocol: the group converted to a
        classic group that rebalances (the records that do it, applied), else None."""
        if not can_downgrade(group, leaving_member_id, self.config):
            return None
        group_id = group.group_id
        log.info("Downgrading consumer group %s (epoch %d) to a classic group: member %s left", group_id,
                 group.group_epoch, leaving_member_id)
        classic, assignments = classic_group_of(group, leaving_member_id, self.image, now_ms)
        records = self.consumer_groups.deletion_records(group)
        self.consumer_groups.unload(group_id)
        records.append(GroupMetadataManager.group_metadata_record(classic, assignments))
        self.groups.groups[group_id] = classic
        self.groups.on_loaded(classic, now_ms)
        self.groups.prepare_rebalance(classic, now_ms)
        return records

    def consumer_group_describe(self, group_id: str) -> ConsumerGroupDescribeResponse.DescribedGroup:
        error = self.coordinator_error(group_id)
        if error != ErrorCode.NONE:
            return ConsumerGroupDescribeResponse.DescribedGroup(error_code=error, group_id=group_id)
        if self.consumer_groups.group(group_id) is None and self._classic_group_has_members(group_id):
            return ConsumerGroupDescribeResponse.DescribedGroup(
                error_code=ErrorCode.GROUP_ID_NOT_FOUND, error_message=f"Group {group_id} is not a consumer group.",
                group_id=group_id)
        return self.consumer_groups.describe(group_id, self.image)

    # -- offsets -----------------------------------------------------------------------------------------------------

    def commit_offsets(self, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int,
                       retention_time_ms: int, partitions: list[OffsetCommitPartition], api_version: int,
                       now_ms: int, respond: Callable[[dict[tuple[str, int], ErrorCode]], None]) -> None:
        """Answers one error code per (topic, partition), after the commit is durable."""
        keys = [(p.topic, p.partition) for p in partitions]
        error = self.coordinator_error(group_id)
        if error == ErrorCode.NONE:
            try:
                group, validate_partition = self.offsets.validate_commit(group_id, member_id, group_instance_id,
                                                                         generation_id, api_version, now_ms)
            except KafkaError as exception:
                error = exception.error_code
        if error != ErrorCode.NONE:
            respond(dict.fromkeys(keys, error))
            return
        if isinstance(group, ClassicGroup) and group.is_in_state(_S.STABLE, _S.PREPARING_REBALANCE):
            # A commit from a member counts as a heartbeat in these states.
            self.groups.reschedule_heartbeat(group, member_id, now_ms)
        expire_timestamp_ms = self.offsets.expire_timestamp_ms(retention_time_ms, now_ms)
        results, accepted = self._accept_offsets(partitions, expire_timestamp_ms, now_ms, validate_partition)
        if not accepted:
            respond(results)
            return

        def on_written(error: ErrorCode, at_ms: int) -> None:
            if error == ErrorCode.NONE:
                for topic, partition, offset in accepted:
                    self.offsets.replay(OffsetCommitRecord(group_id, topic, partition, offset), at_ms)
            else:
                mapped = commit_error_to_response_error(error)
                for topic, partition, _ in accepted:
                    results[(topic, partition)] = mapped
            respond(results)

        self._write_for_group(group_id, self.offsets.offset_commit_records(group_id, accepted), on_written)

    def _accept_offsets(self, partitions: list[OffsetCommitPartition], expire_timestamp_ms: int, now_ms: int,
                        validate_partition: PartitionValidator | None = None
                        ) -> tuple[dict[TopicPartitionKey, ErrorCode], list[tuple[str, int, CommittedOffset]]]:
        """(an error per partition: the validator's (a commit at an older member epoch), OFFSET_METADATA_TOO_LARGE
        or, for now, NONE; the offsets to write)."""
        results: dict[TopicPartitionKey, ErrorCode] = {}
        accepted: list[tuple[str, int, CommittedOffset]] = []
        for p in partitions:
            if validate_partition is not None:
                try:
                    validate_partition(p.topic, p.partition)
                except KafkaError as error:
                    results[(p.topic, p.partition)] = error.error_code
                    continue
            metadata = p.committed_metadata if p.committed_metadata is not None else ""
            if len(metadata) > self.config.offset_metadata_max_bytes:
                results[(p.topic, p.partition)] = ErrorCode.OFFSET_METADATA_TOO_LARGE
                continue
            results[(p.topic, p.partition)] = ErrorCode.NONE
            commit_timestamp_ms = now_ms if p.commit_timestamp_ms == -1 else p.commit_timestamp_ms
            accepted.append((p.topic, p.partition, CommittedOffset(
                p.committed_offset, p.committed_leader_epoch, metadata, commit_timestamp_ms, expire_timestamp_ms)))
        return results, accepted

    def commit_transactional_offsets(self, group_id: str, producer_id: int, producer_epoch: int, member_id: str,
                                     group_instance_id: str | None, generation_id: int,
                                     partitions: list[OffsetCommitPartition], now_ms: int,
                                     respond: Callable[[dict[TopicPartitionKey, ErrorCode]], None]) -> None:
        """TxnOffsetCommit (v0-v4; before v3 the member fields are absent and generation is -1): one error code per
        (topic, partition), after the transactional records are durable. The offsets are then pending in the
        producer's transaction; unlike OffsetCommit this is no heartbeat and carries no retention."""
        keys = [(p.topic, p.partition) for p in partitions]
        error = ErrorCode.INVALID_GROUP_ID if not group_id else self.coordinator_error(group_id)
        if error == ErrorCode.NONE:
            try:
                self.offsets.validate_transactional_commit(group_id, member_id, group_instance_id, generation_id,
                                                           now_ms)
            except KafkaError as exception:
                error = exception.error_code
        if error != ErrorCode.NONE:
            respond(dict.fromkeys(keys, error))
            return
        results, accepted = self._accept_offsets(partitions, NO_EXPIRE_TIMESTAMP, now_ms)
        if not accepted:
            respond(results)
            return
        entries = self.offsets.begin_transactional_commit(group_id, producer_id, accepted)

        def on_written(error: ErrorCode, at_ms: int) -> None:
            self.offsets.complete_transactional_commit(group_id, producer_id, accepted, entries,
                                                       written=error == ErrorCode.NONE)
            if error != ErrorCode.NONE:
                mapped = commit_error_to_response_error(error)
                for topic, partition, _ in accepted:
                    results[(topic, partition)] = mapped
            respond(results)

        self._write_for_group(group_id, self.offsets.offset_commit_records(group_id, accepted), on_written,
                              producer_id, producer_epoch)

    def complete_transaction(self, partition: int, producer_id: int, is_commit: bool) -> None:
        """The producer's COMMIT (`is_commit`) or ABORT marker is in __consumer_offsets-`partition` (appended, or
        replayed by a load): its pending offsets of the groups of that partition become committed or are dropped
        (Kafka's onTransactionCompleted). A partition this broker does not own is ignored."""
        if partition not in self.partitions:
            return
        for group_id in self.offsets.pending.groups_of_producer(producer_id):
            if self.partition_for(group_id) == partition:
                self.offsets.complete_transaction(group_id, producer_id, is_commit)

    def fetch_offsets(self, group_id: str, topics: list[tuple[str, list[int]]] | None, require_stable: bool = False,
                      member_id: str | None = None, member_epoch: int = -1
                      ) -> tuple[ErrorCode, list[tuple[str, list[FetchedOffset]]]]:
        """(group-level error, per topic: (partition, committed offset or None, error)); `topics` None = all.
        `require_stable` (OffsetFetch v7+): UNSTABLE_OFFSET_COMMIT for partitions with pending transactional
        offsets. A consumer protocol group's member fetches at its member epoch (OffsetFetch v9+:
        STALE_MEMBER_EPOCH, UNKNOWN_MEMBER_ID)."""
        error = self.coordinator_error(group_id)
        if error != ErrorCode.NONE:
            return error, []
        consumer_group = self.consumer_groups.group(group_id)
        if consumer_group is not None:
            try:
                self.consumer_groups.validate_offset_fetch(consumer_group, member_id, member_epoch)
            except KafkaError as exception:
                return exception.error_code, []
        return ErrorCode.NONE, self.offsets.fetch_offsets(group_id, topics, require_stable)

    def delete_offsets(self, group_id: str, topics: list[tuple[str, list[int]]], now_ms: int,
                       respond: Callable[[ErrorCode, list[tuple[str, list[tuple[int, ErrorCode]]]]], None]) -> None:
        """OffsetDelete: (group-level error, per-partition errors), after the tombstones are durable."""
        error = ErrorCode.INVALID_GROUP_ID if not group_id else self.coordinator_error(group_id)
        group = self._any_group(group_id) if error == ErrorCode.NONE else None
        if error == ErrorCode.NONE:
            if group is None or (isinstance(group, ClassicGroup) and group.is_in_state(_S.DEAD)):
                error = ErrorCode.GROUP_ID_NOT_FOUND
            elif isinstance(group, ClassicGroup) and not group.is_in_state(_S.EMPTY) \
                    and not group.uses_consumer_protocol():
                error = ErrorCode.NON_EMPTY_GROUP
        if error != ErrorCode.NONE:
            respond(error, [])
            return
        assert group is not None
        results: list[tuple[str, list[tuple[int, ErrorCode]]]] = []
        records: list[Record] = []
        for topic, partitions in topics:
            topic_results = []
            for partition in partitions:
                if group.is_subscribed_to_topic(topic):
                    topic_results.append((partition, ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC))
                    continue
                if self.offsets.has_offset(group_id, topic, partition):
                    records.append((offset_commit_key(group_id, topic, partition), None))
                topic_results.append((partition, ErrorCode.NONE))
            results.append((topic, topic_results))
        if not records:
            respond(ErrorCode.NONE, results)
            return

        def on_written(error: ErrorCode, at_ms: int) -> None:
            if error != ErrorCode.NONE:
                respond(append_error_to_response_error(error), [])
                return
            self._replay_tombstones(records, at_ms)
            respond(ErrorCode.NONE, results)

        self._write_for_group(group_id, records, on_written)

    def _replay_tombstones(self, records: list[Record], now_ms: int) -> None:
        for key, value in records:
            record = deserialize_record(key, value)
            if isinstance(record, OffsetCommitRecord):
                self.offsets.replay(record, now_ms)
            elif isinstance(record, ConsumerGroupRecord):
                self.consumer_groups.replay(record)
                if record.record_type is RecordType.GROUP_METADATA:
                    self.offsets.remove_group(record.group_id)
            elif isinstance(record, GroupMetadataRecord):
                group = self.groups.group(record.group_id)
                # A group created again after the delete was requested is a new group: keep it.
                if group is not None and (group.is_in_state(_S.DEAD) or group.is_empty):
                    self.groups.groups.pop(record.group_id, None)
                    self.offsets.remove_group(record.group_id)

    # -- metadata ----------------------------------------------------------------------------------------------------

    def on_partitions_deleted(self, topic_partitions: set[TopicPartitionKey]) -> None:
        """The topics of `topic_partitions` were deleted: every group of an active partition loses its committed and
        pending transactional offsets of them, through tombstones in __consumer_offsets (Kafka's
        onPartitionsDeleted), so that neither a topic created again under the same name nor a reload of the group
        finds the old offsets. A partition still loading keeps them, as in Kafka (whose write to a loading
        coordinator fails)."""
        records_by_partition: dict[int, list[Record]] = {}
        for group_id in sorted(self.offsets.group_ids()):
            partition = self.partition_for(group_id)
            keys = self.offsets.partitions_with_offsets(group_id) & topic_partitions
            if keys and self.partitions.get(partition) is PartitionState.ACTIVE:
                records_by_partition.setdefault(partition, []).extend(
                    (offset_commit_key(group_id, topic, index), None) for topic, index in sorted(keys))
        for partition, records in sorted(records_by_partition.items()):
            log.info("Deleting %d offsets of deleted topics' partitions in __consumer_offsets-%d", len(records),
                     partition)

            def on_written(error: ErrorCode, at_ms: int, records: list[Record] = records) -> None:
                if error == ErrorCode.NONE:
                    self._replay_tombstones(records, at_ms)

            self._writes.append(CoordinatorWrite(partition, records, on_written))

    # -- admin -------------------------------------------------------------------------------------------------------

    def delete_groups(self, group_ids: list[str], now_ms: int,
                      respond: Callable[[dict[str, ErrorCode]], None]) -> None:
        """DeleteGroups: one error per group id, after each deletion is durable."""
        results: dict[str, ErrorCode] = {}
        pending = {"writes": 0}

        def finish() -> None:
            if pending["writes"] == 0:
                respond(results)

        for group_id in group_ids:
            if group_id in results:
                continue
            error = self.coordinator_error(group_id)
            consumer_group = self.consumer_groups.group(group_id) if error == ErrorCode.NONE else None
            if consumer_group is not None:
                results[group_id] = ErrorCode.NONE if consumer_group.is_empty else ErrorCode.NON_EMPTY_GROUP
                if consumer_group.is_empty:
                    self._delete_consumer_group(consumer_group, results, pending, finish)
                continue
            group = self.groups.group(group_id)
            if error == ErrorCode.NONE:
                if group is None or group.is_in_state(_S.DEAD):
                    error = ErrorCode.GROUP_ID_NOT_FOUND
                elif not group.is_in_state(_S.EMPTY):
                    error = ErrorCode.NON_EMPTY_GROUP
            results[group_id] = error
            if error != ErrorCode.NONE:
                continue
            assert group is not None
            records = self.offsets.delete_all_offsets_records(group_id) + [(group_metadata_key(group_id), None)]
            group.transition_to(_S.DEAD, now_ms)
            pending["writes"] += 1

            def on_written(error: ErrorCode, at_ms: int, group_id: str = group_id,
                           records: list[Record] = records, group: ClassicGroup = group) -> None:
                if error == ErrorCode.NONE:
                    self._replay_tombstones(records, at_ms)
                else:
                    results[group_id] = append_error_to_response_error(error)
                    if group.is_in_state(_S.DEAD) and self.groups.group(group_id) is group:
                        group.state = _S.EMPTY  # not deleted after all
                pending["writes"] -= 1
                finish()

            self._write_for_group(group_id, records, on_written)
        finish()

    def _delete_consumer_group(self, group: ConsumerGroup, results: dict[str, ErrorCode], pending: dict[str, int],
                               finish: Callable[[], None]) -> None:
        """An empty consumer group's records and offsets, deleted by tombstones (applied once durable)."""
        group_id = group.group_id
        records = self.offsets.delete_all_offsets_records(group_id) + self.consumer_groups.deletion_records(group)
        pending["writes"] += 1

        def on_written(error: ErrorCode, at_ms: int) -> None:
            if error == ErrorCode.NONE:
                self._replay_tombstones(records, at_ms)
            else:
                results[group_id] = append_error_to_response_error(error)
            pending["writes"] -= 1
            finish()

        self._write_for_group(group_id, records, on_written)

    def list_groups(self, states_filter: list[str], types_filter: list[str]
                    ) -> tuple[ErrorCode, list[ListGroupsResponse.ListedGroup]]:
        error = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS \
            if PartitionState.LOADING in self.partitions.values() else ErrorCode.NONE
        states = {state.lower() for state in states_filter}
        types = {group_type.lower() for group_type in types_filter}
        listed = []
        for group_id, group in self.groups.groups.items():
            if self.partitions.get(self.partition_for(group_id)) is not PartitionState.ACTIVE:
                continue
            if group.is_in_state(_S.DEAD):
                continue
            if states and group.state.value.lower() not in states:
                continue
            if types and CLASSIC_GROUP_TYPE not in types:
                continue
            listed.append(ListGroupsResponse.ListedGroup(group_id=group_id, protocol_type=group.protocol_type or "",
                                                          group_state=group.state.value,
                                                          group_type=CLASSIC_GROUP_TYPE))
        for group_id, consumer_group in self.consumer_groups.groups.items():
            if self.partitions.get(self.partition_for(group_id)) is not PartitionState.ACTIVE:
                continue
            state = consumer_group.state.value
            if (states and state.lower() not in states) or (types and CONSUMER_GROUP_TYPE not in types):
                continue
            listed.append(ListGroupsResponse.ListedGroup(group_id=group_id, protocol_type=CONSUMER_PROTOCOL_TYPE,
                                                          group_state=state, group_type=CONSUMER_GROUP_TYPE))
        return error, listed

    def describe_group(self, group_id: str) -> DescribeGroupsResponse.DescribedGroup:
        error = self.coordinator_error(group_id)
        if error != ErrorCode.NONE:
            return DescribeGroupsResponse.DescribedGroup(error_code=error, group_id=group_id)
        if self.consumer_groups.group(group_id) is not None:
            # Kafka's DescribeGroups describes classic groups only (v6 says so; older versions get a Dead group).
            return DescribeGroupsResponse.DescribedGroup(
                error_code=ErrorCode.GROUP_ID_NOT_FOUND, error_message=f"Group {group_id} is not a classic group.",
                group_id=group_id, group_state=ConsumerGroupState.DEAD.value)
        group = self.groups.group(group_id)
        if group is None:
            return DescribeGroupsResponse.DescribedGroup(error_code=ErrorCode.NONE, group_id=group_id,
                                                         group_state=_S.DEAD.value, protocol_type="",
                                                         protocol_data="")
        stable = group.is_in_state(_S.STABLE) and group.protocol_name is not None
        members = [
            DescribeGroupsResponse.DescribedGroupMember(
                member_id=member.member_id,
                group_instance_id=member.group_instance_id,
                client_id=member.client_id,
                client_host=member.client_host,
                member_metadata=member.metadata(group.protocol_name) if stable else b"",
                member_assignment=member.assignment if stable else b"",
            )
            for member in group.members.values()
        ]
        return DescribeGroupsResponse.DescribedGroup(
            error_code=ErrorCode.NONE,
            group_id=group_id,
            group_state=group.state.value,
            protocol_type=group.protocol_type or "",
            protocol_data=group.protocol_name or "" if stable else "",
            members=members,
        )

    # -- expiry ------------------------------------------------------------------------------------------------------

    def _expire_offsets(self, now_ms: int) -> None:
        """Every offsets.retention.check.interval.ms: tombstones for expired offsets, and for groups left with
        nothing."""
        self.timer.schedule(_EXPIRE_OFFSETS_KEY, now_ms + self.config.offsets_retention_check_interval_ms,
                            self._expire_offsets)
        group_ids = self.offsets.group_ids() | set(self.groups.groups) | set(self.consumer_groups.groups)
        for group_id in sorted(group_ids):
            if self.coordinator_error(group_id) != ErrorCode.NONE:
                continue
            group = self._any_group(group_id)
            if group is None:
                continue
            expired, all_expired = self.offsets.expired_offsets(group, now_ms)
            records: list[Record] = [(offset_commit_key(group_id, topic, partition), None)
                                     for topic, partition in expired]
            if isinstance(group, ConsumerGroup):
                if all_expired and group.is_empty:
                    records += self.consumer_groups.deletion_records(group)
            elif all_expired and group.is_in_state(_S.EMPTY) and group.is_empty:
                records.append((group_metadata_key(group_id), None))
            if not records:
                continue
            log.info("Expiring %d offsets of group %s", len(expired), group_id)

            def on_written(error: ErrorCode, at_ms: int, records: list[Record] = records) -> None:
                if error == ErrorCode.NONE:
                    self._replay_tombstones(records, at_ms)

            self._write_for_group(group_id, records, on_written)
