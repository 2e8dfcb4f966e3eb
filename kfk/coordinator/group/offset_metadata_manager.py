"""OffsetMetadataManager: committed offsets per group, topic and partition (Kafka's OffsetMetadataManager).

The offsets held here are the committed ones: an OffsetCommit writes its records and the offsets become visible (to
OffsetFetch, to expiry) only when the records are committed to __consumer_offsets, replayed exactly as a load
replays them. So a fetch never returns an offset that a failed write or a broker crash could take back.

Commit validation (classic groups): a commit with generation -1 and no member id comes from an admin client or a
consumer that assigns partitions itself, and is accepted while the group is Empty (a group that does not exist is
created as a "simple" group without protocol type); any other commit must come from a current member of the current
generation; a commit while the group is CompletingRebalance gets REBALANCE_IN_PROGRESS.

Expiry (offsets.retention.minutes): every offsets.retention.check.interval.ms, offsets of topics the group does not
subscribe to expire retention after the group became Empty (or, for a simple group and for Stable consumer groups,
retention after the commit); a commit that carried its own retention expires at its expire timestamp. A group whose
offsets are all gone and which is Empty is deleted.

Transactional offsets (TxnOffsetCommit) stay pending until their transaction ends (transactional_offsets.py). When a
COMMIT marker makes them committed, an offset of the same partition whose record came later in the log is kept
(Kafka keeps the record with the higher offset, so compaction cannot change the outcome): every committed offset
carries its record's place in the log order, a counter of the offset records applied, which for one partition follows
the log (writes complete in log order, a load replays in log order). Offsets with a pending transactional offset do
not expire, and neither does a group with pending transactional offsets.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from kfk.coordinator.append_errors import append_error_to_response_error
from kfk.coordinator.group.classic_group import (
    UNKNOWN_MEMBER_ID,
    ClassicGroup,
    ClassicGroupState,
)
from kfk.coordinator.group.config import GroupCoordinatorConfig
from kfk.coordinator.group.record_serde import (
    NO_EXPIRE_TIMESTAMP,
    CommittedOffset,
    OffsetCommitRecord,
    offset_commit_key,
    offset_commit_value,
)
from kfk.coordinator.group.transactional_offsets import (
    PendingOffset,
    PendingTransactionalOffsets,
    TopicPartitionKey,
)
from kfk.errors import (
    CoordinatorNotAvailableError,
    ErrorCode,
    GroupIdNotFoundError,
    IllegalGenerationError,
    RebalanceInProgressError,
    UnknownMemberIdError,
)
from kfk.records import NO_PRODUCER_ID

if TYPE_CHECKING:
    from kfk.coordinator.group.consumer_group import ConsumerGroup
    from kfk.coordinator.group.consumer_group_manager import PartitionValidator
    from kfk.coordinator.group.consumer_group_manager import ConsumerGroupManager
    from kfk.coordinator.group.group_metadata_manager import GroupMetadataManager

log = logging.getLogger("kfk.coordinator.group")

#: OffsetFetch's answer for one partition: (partition, committed offset or None, error code).
FetchedOffset = tuple[int, CommittedOffset | None, ErrorCode]

#: OffsetCommit v2-v4 retention_time_ms meaning "the broker's offsets.retention.minutes".
DEFAULT_RETENTION_TIME = -1
#: OffsetCommit v1 commit_timestamp meaning "now".
DEFAULT_TIMESTAMP = -1
#: OffsetFetch's committed offset when there is none.
INVALID_OFFSET = -1

_S = ClassicGroupState


def commit_error_to_response_error(error: ErrorCode) -> ErrorCode:
    """What a failed write of offsets becomes in the OffsetCommit answer (as Kafka maps it): the group-metadata
    mapping, except that a write too large is the commit's fault (INVALID_COMMIT_OFFSET_SIZE)."""
    if error in (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE, ErrorCode.INVALID_FETCH_SIZE):
        return ErrorCode.INVALID_COMMIT_OFFSET_SIZE
    return append_error_to_response_error(error)


def validate_offset_commit(group: ClassicGroup, member_id: str, group_instance_id: str | None,
                           generation_id: int, is_transactional: bool = False) -> None:
    """Kafka's ClassicGroup.validateOffsetCommit; raises the KafkaError to answer. A transactional commit without
    member and generation (TxnOffsetCommit v0-v2 never carry them) is accepted whatever the group's members, and no
    transactional commit is refused because the group is completing a rebalance."""
    if group.is_in_state(_S.DEAD):
        raise CoordinatorNotAvailableError(f"Group {group.group_id} is dead")
    if generation_id < 0 and group.is_in_state(_S.EMPTY):
        return  # an admin client or a consumer without group management
    if generation_id >= 0 or member_id != UNKNOWN_MEMBER_ID or group_instance_id is not None:
        group.validate_member(member_id, group_instance_id)
        if generation_id != group.generation_id:
            raise IllegalGenerationError(
                f"Generation {generation_id} is not the current generation {group.generation_id} of "
                f"{group.group_id}")
    elif not is_transactional and not group.is_in_state(_S.EMPTY):
        # No member id and no generation (v0): only an empty group takes such commits.
        raise UnknownMemberIdError(f"Group {group.group_id} is not empty")
    if not is_transactional and group.is_in_state(_S.COMPLETING_REBALANCE):
        raise RebalanceInProgressError(f"Group {group.group_id} is completing a rebalance")


class OffsetMetadataManager:
    def __init__(self, config: GroupCoordinatorConfig, groups: GroupMetadataManager,
                 consumer_groups: ConsumerGroupManager) -> None:
        self.config = config
        self.groups = groups
        #: The consumer protocol's groups: their commits are validated by member epoch, and an offset of theirs
        #: creates no classic group.
        self.consumer_groups = consumer_groups
        self.offsets: dict[str, dict[str, dict[int, CommittedOffset]]] = {}
        #: group id -> (topic, partition) -> the log order of the committed offset's record.
        self._record_orders: dict[str, dict[tuple[str, int], int]] = {}
        self._last_record_order = 0
        self.pending = PendingTransactionalOffsets()

    def has_offsets(self, group_id: str) -> bool:
        """Whether the group holds committed or pending transactional offsets (then it is kept)."""
        return bool(self.offsets.get(group_id)) or self.pending.has_group(group_id)

    def has_offset(self, group_id: str, topic: str, partition: int) -> bool:
        """A committed or a pending transactional offset of the partition (what OffsetDelete deletes)."""
        return self.offset(group_id, topic, partition) is not None \
            or self.pending.has_partition(group_id, topic, partition)

    def group_ids(self) -> set[str]:
        """Every group holding committed or pending offsets."""
        return set(self.offsets) | set(self.pending.group_ids())

    def _next_record_order(self) -> int:
        self._last_record_order += 1
        return self._last_record_order

    def offset(self, group_id: str, topic: str, partition: int) -> CommittedOffset | None:
        return self.offsets.get(group_id, {}).get(topic, {}).get(partition)

    # -- commit ------------------------------------------------------------------------------------------------------

    def validate_commit(self, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int,
                        api_version: int, now_ms: int
                        ) -> tuple[ClassicGroup | ConsumerGroup, PartitionValidator | None]:
        """The group to commit to (created as a simple group for a generation -1 commit) and, for a commit at an
        older member epoch, the check of each partition; raises the error to answer for every partition. A consumer
        protocol group checks the member epoch (v9's generation_id_or_member_epoch)."""
        consumer_group = self.consumer_groups.group(group_id)
        if consumer_group is not None:
            return consumer_group, self.consumer_groups.validate_offset_commit(consumer_group, member_id,
                                                                               generation_id, api_version)
        group = self.groups.group(group_id)
        if group is None:
            if generation_id < 0:
                return self.groups.get_or_create_group(group_id, now_ms), None
            if api_version >= 9:
                raise GroupIdNotFoundError(f"Group {group_id} does not exist")
            raise IllegalGenerationError(f"Group {group_id} does not exist")
        validate_offset_commit(group, member_id, group_instance_id, generation_id)
        return group, None

    def validate_transactional_commit(self, group_id: str, member_id: str, group_instance_id: str | None,
                                      generation_id: int, now_ms: int) -> ClassicGroup | ConsumerGroup:
        """As `validate_commit` for a TxnOffsetCommit: a group that does not exist is ILLEGAL_GENERATION (any
        version) unless the generation is -1 (v0-v2 always send -1). For a consumer protocol group the generation
        is the member epoch, checked when given (ILLEGAL_GENERATION, as Kafka's transactional commit)."""
        consumer_group = self.consumer_groups.group(group_id)
        if consumer_group is not None:
            if generation_id >= 0 or member_id != UNKNOWN_MEMBER_ID:
                member = consumer_group.member(member_id)
                if member is None:
                    raise UnknownMemberIdError(f"Member {member_id} is not a member of group {group_id}.")
                if generation_id != member.member_epoch:
                    raise IllegalGenerationError(f"The received member epoch {generation_id} does not match the "
                                                 f"expected member epoch {member.member_epoch}.")
            return consumer_group
        group = self.groups.group(group_id)
        if group is None:
            if generation_id < 0:
                return self.groups.get_or_create_group(group_id, now_ms)
            raise IllegalGenerationError(f"Group {group_id} does not exist")
        validate_offset_commit(group, member_id, group_instance_id, generation_id, is_transactional=True)
        return group

    def begin_transactional_commit(self, group_id: str, producer_id: int,
                                   offsets: list[tuple[str, int, CommittedOffset]]) -> list[PendingOffset]:
        """The accepted offsets of a TxnOffsetCommit are pending from now on (their records not yet written)."""
        entries = []
        for topic, partition, offset in offsets:
            entry = PendingOffset(offset)
            self.pending.put(group_id, producer_id, topic, partition, entry)
            entries.append(entry)
        return entries

    def complete_transactional_commit(self, group_id: str, producer_id: int,
                                      offsets: list[tuple[str, int, CommittedOffset]],
                                      entries: list[PendingOffset], written: bool) -> None:
        """The records of `begin_transactional_commit` are committed to the log (`written`: the entries take their
        place in the log order) or failed (the entries go, unless a later commit of the producer replaced them)."""
        for (topic, partition, _), entry in zip(offsets, entries):
            if written:
                entry.record_order = self._next_record_order()
            else:
                self.pending.discard(group_id, producer_id, topic, partition, entry)

    def complete_transaction(self, group_id: str, producer_id: int, is_commit: bool) -> None:
        """The producer's COMMIT/ABORT marker is in the group's partition: its pending offsets become committed
        (unless a later record of the partition was committed) or are dropped."""
        for (topic, partition), entry in self.pending.take(group_id, producer_id).items():
            if not is_commit:
                continue
            if entry.record_order is None:
                # Its record was still being written when the transaction ended: it cannot belong to it.
                log.warning("Transaction of producer %d ended while its offset for %s-%d of group %s was being "
                            "written; dropping that offset", producer_id, topic, partition, group_id)
                continue
            committed_order = self._record_orders.get(group_id, {}).get((topic, partition))
            if committed_order is None or committed_order < entry.record_order:
                self._put(group_id, topic, partition, entry.offset, entry.record_order)

    def offset_commit_records(self, group_id: str, offsets: list[tuple[str, int, CommittedOffset]]
                              ) -> list[tuple[bytes, bytes | None]]:
        return [(offset_commit_key(group_id, topic, partition), offset_commit_value(offset))
                for topic, partition, offset in offsets]

    @staticmethod
    def expire_timestamp_ms(retention_time_ms: int, now_ms: int) -> int:
        return NO_EXPIRE_TIMESTAMP if retention_time_ms == DEFAULT_RETENTION_TIME else now_ms + retention_time_ms

    # -- fetch -------------------------------------------------------------------------------------------------------

    def fetch_offsets(self, group_id: str, topics: list[tuple[str, list[int]]] | None, require_stable: bool
                      ) -> list[tuple[str, list[FetchedOffset]]]:
        """Per topic, per partition: the committed offset or None, and the partition's error: with
        `require_stable`, UNSTABLE_OFFSET_COMMIT (and no offset) while a transactional offset is pending.
        `topics` None: every committed offset."""
        group = self.groups.group(group_id)
        live = (group is not None and not group.is_in_state(_S.DEAD)) \
            or self.consumer_groups.group(group_id) is not None
        group_offsets = self.offsets.get(group_id, {}) if live else {}
        unstable = self.pending.partitions_of(group_id) if live and require_stable else set()

        def fetched(topic: str, partition: int) -> FetchedOffset:
            if (topic, partition) in unstable:
                return partition, None, ErrorCode.UNSTABLE_OFFSET_COMMIT
            return partition, group_offsets.get(topic, {}).get(partition), ErrorCode.NONE

        if topics is None:
            return [(topic, [fetched(topic, partition) for partition in sorted(partitions)])
                    for topic, partitions in group_offsets.items()]
        return [(topic, [fetched(topic, partition) for partition in partitions]) for topic, partitions in topics]

    # -- replay ------------------------------------------------------------------------------------------------------

    def replay(self, record: OffsetCommitRecord, now_ms: int, producer_id: int = NO_PRODUCER_ID) -> None:
        """A committed offset record; `producer_id` that of its transactional batch (the offset is then pending
        until the producer's marker)."""
        group_id, topic, partition = record.group_id, record.topic, record.partition
        record_order = self._next_record_order()
        if record.value is not None:
            # A commit without group membership creates the "simple" group it belongs to.
            if self.consumer_groups.group(group_id) is None:
                self.groups.get_or_create_group(group_id, now_ms)
            if producer_id == NO_PRODUCER_ID:
                self._put(group_id, topic, partition, record.value, record_order)
            else:
                self.pending.put(group_id, producer_id, topic, partition, PendingOffset(record.value, record_order))
            return
        self.pending.remove_partition(group_id, topic, partition)
        self._record_orders.get(group_id, {}).pop((topic, partition), None)
        topics = self.offsets.get(group_id)
        if topics is None:
            return
        partitions = topics.get(topic)
        if partitions is None:
            return
        partitions.pop(partition, None)
        if not partitions:
            del topics[topic]
        if not topics:
            del self.offsets[group_id]
            self._record_orders.pop(group_id, None)

    def _put(self, group_id: str, topic: str, partition: int, offset: CommittedOffset, record_order: int) -> None:
        self.offsets.setdefault(group_id, {}).setdefault(topic, {})[partition] = offset
        self._record_orders.setdefault(group_id, {})[(topic, partition)] = record_order

    def partitions_with_offsets(self, group_id: str) -> set[TopicPartitionKey]:
        """The partitions the group has a committed or a pending transactional offset of: what a deletion of the
        group, or of those partitions' topics, writes tombstones for (Kafka drops pending ones too)."""
        keys = {(topic, partition) for topic, partitions in self.offsets.get(group_id, {}).items()
                for partition in partitions}
        return keys | self.pending.partitions_of(group_id)

    def delete_all_offsets_records(self, group_id: str) -> list[tuple[bytes, bytes | None]]:
        """Tombstones for every committed and pending transactional offset of the group (DeleteGroups)."""
        return [(offset_commit_key(group_id, topic, partition), None)
                for topic, partition in sorted(self.partitions_with_offsets(group_id))]

    def remove_group(self, group_id: str) -> None:
        self.offsets.pop(group_id, None)
        self._record_orders.pop(group_id, None)
        self.pending.remove_group(group_id)

    # -- expiry ------------------------------------------------------------------------------------------------------

    def expired_offsets(self, group: ClassicGroup | ConsumerGroup, now_ms: int) -> tuple[list[tuple[str, int]], bool]:
        """(the offsets of the group that expired at `now_ms`, whether that is all of them)."""
        group_id = group.group_id
        has_pending = self.pending.has_group(group_id)
        topics = self.offsets.get(group_id)
        if not topics:
            return [], not has_pending
        base_timestamp = _expiration_base(group)
        if base_timestamp is None:
            return [], False
        retention_ms = self.config.offsets_retention_ms
        expired: list[tuple[str, int]] = []
        all_expired = True
        for topic, partitions in topics.items():
            if group.is_subscribed_to_topic(topic):
                all_expired = False
                continue
            for partition, offset in partitions.items():
                if offset.expire_timestamp_ms != NO_EXPIRE_TIMESTAMP:
                    is_expired = now_ms >= offset.expire_timestamp_ms
                else:
                    is_expired = now_ms - base_timestamp(offset) >= retention_ms
                if is_expired and not self.pending.has_partition(group_id, topic, partition):
                    expired.append((topic, partition))
                else:
                    all_expired = False
        return expired, all_expired and not has_pending


def _expiration_base(group: ClassicGroup | ConsumerGroup) -> Callable[[CommittedOffset], int] | None:
    """From when an offset's retention counts (Kafka's ClassicGroup.offsetExpirationCondition; a consumer protocol
    group counts from the commit), None: no offset of the group expires now."""
    if not isinstance(group, ClassicGroup):
        return lambda offset: offset.commit_timestamp_ms
    if group.protocol_type is not None:
        if group.is_in_state(_S.EMPTY):
            state_timestamp = group.current_state_timestamp_ms
            if state_timestamp is not None:
                return lambda offset: state_timestamp
            return lambda offset: offset.commit_timestamp_ms
        if group.uses_consumer_protocol() and group.subscribed_topics is not None and group.is_in_state(_S.STABLE):
            return lambda offset: offset.commit_timestamp_ms
        return None
    return lambda offset: offset.commit_timestamp_ms
