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
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from kfk.coordinator.append_errors import append_error_to_response_error
from kfk.coordinator.group.classic_group import UNKNOWN_MEMBER_ID, ClassicGroup, ClassicGroupState
from kfk.coordinator.group.config import GroupCoordinatorConfig
from kfk.coordinator.group.record_serde import (
    NO_EXPIRE_TIMESTAMP,
    OffsetAndMetadata,
    OffsetCommitRecord,
    offset_commit_key,
    offset_commit_value,
)
from kfk.errors import (
    CoordinatorNotAvailableError,
    ErrorCode,
    GroupIdNotFoundError,
    IllegalGenerationError,
    RebalanceInProgressError,
    UnknownMemberIdError,
)

if TYPE_CHECKING:
    from kfk.coordinator.group.group_metadata_manager import GroupMetadataManager

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
                           generation_id: int) -> None:
    """Kafka's ClassicGroup.validateOffsetCommit; raises the KafkaError to answer."""
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
    elif not group.is_in_state(_S.EMPTY):
        # No member id and no generation (v0): only an empty group takes such commits.
        raise UnknownMemberIdError(f"Group {group.group_id} is not empty")
    if group.is_in_state(_S.COMPLETING_REBALANCE):
        raise RebalanceInProgressError(f"Group {group.group_id} is completing a rebalance")


class OffsetMetadataManager:
    def __init__(self, config: GroupCoordinatorConfig, groups: GroupMetadataManager) -> None:
        self.config = config
        self.groups = groups
        self.offsets: dict[str, dict[str, dict[int, OffsetAndMetadata]]] = {}

    def has_offsets(self, group_id: str) -> bool:
        return bool(self.offsets.get(group_id))

    def offset(self, group_id: str, topic: str, partition: int) -> OffsetAndMetadata | None:
        return self.offsets.get(group_id, {}).get(topic, {}).get(partition)

    # -- commit ------------------------------------------------------------------------------------------------------

    def validate_commit(self, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int,
                        api_version: int, now_ms: int) -> ClassicGroup:
        """The group to commit to (created as a simple group for a generation -1 commit); raises the error to
        answer for every partition."""
        group = self.groups.group(group_id)
        if group is None:
            if generation_id < 0:
                return self.groups.get_or_create_group(group_id, now_ms)
            if api_version >= 9:
                raise GroupIdNotFoundError(f"Group {group_id} does not exist")
            raise IllegalGenerationError(f"Group {group_id} does not exist")
        validate_offset_commit(group, member_id, group_instance_id, generation_id)
        return group

    def offset_commit_records(self, group_id: str, offsets: list[tuple[str, int, OffsetAndMetadata]]
                              ) -> list[tuple[bytes, bytes | None]]:
        return [(offset_commit_key(group_id, topic, partition), offset_commit_value(offset))
                for topic, partition, offset in offsets]

    @staticmethod
    def expire_timestamp_ms(retention_time_ms: int, now_ms: int) -> int:
        return NO_EXPIRE_TIMESTAMP if retention_time_ms == DEFAULT_RETENTION_TIME else now_ms + retention_time_ms

    # -- fetch -------------------------------------------------------------------------------------------------------

    def fetch_offsets(self, group_id: str, topics: list[tuple[str, list[int]]] | None
                      ) -> list[tuple[str, list[tuple[int, OffsetAndMetadata | None]]]]:
        """Per topic, per partition: the committed offset or None. `topics` None: every committed offset."""
        group = self.groups.group(group_id)
        group_offsets = self.offsets.get(group_id, {}) if group is not None and not group.is_in_state(_S.DEAD) \
            else {}
        if topics is None:
            return [(topic, sorted(partitions.items())) for topic, partitions in group_offsets.items()]
        return [(topic, [(partition, group_offsets.get(topic, {}).get(partition)) for partition in partitions])
                for topic, partitions in topics]

    # -- replay ------------------------------------------------------------------------------------------------------

    def replay(self, record: OffsetCommitRecord, now_ms: int) -> None:
        group_id, topic, partition = record.group_id, record.topic, record.partition
        if record.value is not None:
            # A commit without group membership creates the "simple" group it belongs to.
            self.groups.get_or_create_group(group_id, now_ms)
            self.offsets.setdefault(group_id, {}).setdefault(topic, {})[partition] = record.value
            return
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

    def delete_all_offsets_records(self, group_id: str) -> list[tuple[bytes, bytes | None]]:
        return [(offset_commit_key(group_id, topic, partition), None)
                for topic, partitions in self.offsets.get(group_id, {}).items() for partition in partitions]

    def remove_group(self, group_id: str) -> None:
        self.offsets.pop(group_id, None)

    # -- expiry ------------------------------------------------------------------------------------------------------

    def expired_offsets(self, group: ClassicGroup, now_ms: int) -> tuple[list[tuple[str, int]], bool]:
        """(the offsets of the group that expired at `now_ms`, whether that is all of them)."""
        topics = self.offsets.get(group.group_id)
        if not topics:
            return [], True
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
                if is_expired:
                    expired.append((topic, partition))
                else:
                    all_expired = False
        return expired, all_expired


def _expiration_base(group: ClassicGroup) -> Callable[[OffsetAndMetadata], int] | None:
    """From when an offset's retention counts (Kafka's ClassicGroup.offsetExpirationCondition), None: no offset of
    the group expires now."""
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
