"""Offset requests shared by the Consumer and the Admin client.

- ``list_offsets``: ListOffsets to each partition's leader (Java's OffsetFetcher): the log start offset (EARLIEST),
  the end offset (LATEST: the high watermark, or the last stable offset under read_committed), or the first offset
  whose timestamp is >= a target (offsets_for_times). Partitions whose leader moved or is unknown are retried after a
  metadata refresh until the deadline.
- ``find_coordinator``: which broker coordinates a group, or a transactional id (FindCoordinator key_type 0 or 1;
  v4+ batches keys, older versions take one).
- ``fetch_committed`` / ``commit_offsets``: a group's committed offsets at its coordinator (OffsetFetch /
  OffsetCommit). OffsetFetch v8+ nests the request in a list of groups; older versions name one group at the top.
All coroutines run on the client's event loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Mapping

from kfk.client.network_client import NetworkClient, monotonic_ms
from kfk.client.response_errors import response_error
from kfk.client.structs import OffsetAndTimestamp
from kfk.common.constants import NO_NODE, UNKNOWN_LEADER_EPOCH
from kfk.common.structs import OffsetAndMetadata, TopicPartition
from kfk.errors import (
    ErrorCode,
    KafkaError,
    KafkaTimeoutError,
    NetworkError,
)
from kfk.protocol.messages import ApiKey
from kfk.protocol.messages.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse
from kfk.protocol.messages.list_offsets import ListOffsetsRequest, ListOffsetsResponse
from kfk.protocol.messages.offset_commit import OffsetCommitRequest, OffsetCommitResponse
from kfk.protocol.messages.offset_fetch import OffsetFetchRequest, OffsetFetchResponse

__all__ = [
    "READ_UNCOMMITTED",
    "READ_COMMITTED",
    "COORDINATOR_TYPE_GROUP",
    "COORDINATOR_TYPE_TRANSACTION",
    "list_offsets",
    "find_coordinator",
    "find_coordinators",
    "fetch_committed",
    "commit_offsets",
    "OFFSET_COMMIT_HIGHEST_VERSION",
    "OFFSET_FETCH_HIGHEST_VERSION",
]

READ_UNCOMMITTED = 0
READ_COMMITTED = 1
COORDINATOR_TYPE_GROUP = 0
COORDINATOR_TYPE_TRANSACTION = 1
_COORDINATOR_KEY_NAMES = {COORDINATOR_TYPE_GROUP: "group", COORDINATOR_TYPE_TRANSACTION: "transactional id"}
CONSUMER_REPLICA_ID = -1

# OffsetCommit v9 and OffsetFetch v9 exist for KIP-848 groups (member epochs); classic groups use the versions below.
OFFSET_COMMIT_HIGHEST_VERSION = 8
OFFSET_FETCH_HIGHEST_VERSION = 8
#: The OffsetFetch version whose group carries the member id and epoch (a member of a consumer protocol group).
OFFSET_FETCH_MEMBER_EPOCH_VERSION = 9

# Per-partition ListOffsets errors that a metadata refresh and a retry can fix.
_RETRIABLE_PARTITION_ERRORS = frozenset({
    ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.LEADER_NOT_AVAILABLE,
    ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.UNKNOWN_LEADER_EPOCH, ErrorCode.OFFSET_NOT_AVAILABLE,
    ErrorCode.REPLICA_NOT_AVAILABLE, ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.REQUEST_TIMED_OUT,
})


async def list_offsets(network: NetworkClient, timestamps: Mapping[TopicPartition, int], *,
                       isolation_level: int = READ_UNCOMMITTED, timeout_ms: float
                       ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
    """The offset for each partition's target timestamp (or EARLIEST/LATEST/MAX sentinel). None means no record
    has a timestamp that late. Raises KafkaTimeoutError if some partitions cannot be answered in time, and the
    partition's error for non-retriable failures (an unknown topic after refreshing, say)."""
    deadline = monotonic_ms() + timeout_ms
    remaining = dict(timestamps)
    results: dict[TopicPartition, OffsetAndTimestamp | None] = {}
    attempts = 0
    last_error: KafkaError | None = None
    network.add_topics({tp.topic for tp in remaining})
    while remaining:
        cluster = network.cluster
        if any(cluster.leader_for(tp) == NO_NODE for tp in remaining):
            cluster = await network.refresh_metadata(timeout_ms=max(deadline - monotonic_ms(), 1))
        by_leader: dict[int, dict[TopicPartition, int]] = {}
        for tp, timestamp in remaining.items():
            leader = cluster.leader_for(tp)
            if leader == NO_NODE:
                topic = cluster.topic(tp.topic)
                if topic is not None and topic.error_code not in (ErrorCode.NONE, ErrorCode.LEADER_NOT_AVAILABLE,
                                                                  ErrorCode.UNKNOWN_TOPIC_OR_PARTITION):
                    raise response_error(topic.error_code, f"topic {tp.topic!r}")
                last_error = response_error(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"no leader known for {tp}")
                continue
            by_leader.setdefault(leader, {})[tp] = timestamp
        outcomes = await asyncio.gather(
            *(_list_offsets_from(network, leader, partitions, isolation_level, cluster)
              for leader, partitions in by_leader.items()), return_exceptions=True)
        for outcome in outcomes:
            if isinstance(outcome, BaseException):
                if isinstance(outcome, (NetworkError, KafkaTimeoutError)) or (
                        isinstance(outcome, KafkaError) and outcome.retriable):
                    last_error = outcome
                    continue
                raise outcome
            done, failed = outcome
            results.update(done)
            for tp in done:
                remaining.pop(tp, None)
            for tp, error in failed.items():
                if error.error_code not in _RETRIABLE_PARTITION_ERRORS:
                    raise error
                last_error = error
        if not remaining:
            break
        attempts += 1
        network.request_metadata_update()
        wait = network.retry_backoff.backoff_ms(attempts)
        if monotonic_ms() + wait >= deadline:
            names = ", ".join(str(tp) for tp in sorted(remaining))
            raise KafkaTimeoutError(f"no offsets for {names} within {timeout_ms:.0f} ms"
                                    + (f": {last_error}" if last_error else ""))
        await asyncio.sleep(wait / 1000)
        await network.refresh_metadata(timeout_ms=max(deadline - monotonic_ms(), 1))
    return results


async def _list_offsets_from(network: NetworkClient, leader: int, partitions: Mapping[TopicPartition, int],
                             isolation_level: int, cluster) -> tuple[dict, dict]:
    topics: dict[str, list[ListOffsetsRequest.ListOffsetsPartition]] = {}
    for tp, timestamp in partitions.items():
        metadata = cluster.partition(tp)
        topics.setdefault(tp.topic, []).append(ListOffsetsRequest.ListOffsetsPartition(
            partition_index=tp.partition, timestamp=timestamp,
            current_leader_epoch=metadata.leader_epoch if metadata is not None else UNKNOWN_LEADER_EPOCH))
    version = await network.api_version(leader, ApiKey.LIST_OFFSETS)
    if version < 1:
        raise KafkaError("the broker only supports ListOffsets v0, which kfk does not use")
    request = ListOffsetsRequest(
        replica_id=CONSUMER_REPLICA_ID, isolation_level=isolation_level if version >= 2 else 0,
        topics=[ListOffsetsRequest.ListOffsetsTopic(name=name, partitions=parts) for name, parts in topics.items()],
        timeout_ms=network.config.request_timeout_ms if version >= 10 else 0)
    response = await network.send(leader, request, version=version)
    assert isinstance(response, ListOffsetsResponse)
    done: dict[TopicPartition, OffsetAndTimestamp | None] = {}
    failed: dict[TopicPartition, KafkaError] = {}
    for topic in response.topics:
        for partition in topic.partitions:
            tp = TopicPartition(topic.name, partition.partition_index)
            if tp not in partitions:
                continue
            if partition.error_code != ErrorCode.NONE:
                failed[tp] = response_error(partition.error_code, f"ListOffsets for {tp}")
            elif partition.offset < 0:
                done[tp] = None
            else:
                done[tp] = OffsetAndTimestamp(partition.offset, partition.timestamp, partition.leader_epoch)
    return done, failed


async def find_coordinator(network: NetworkClient, key: str, *, timeout_ms: float,
                           key_type: int = COORDINATOR_TYPE_GROUP) -> int:
    """The id of a dedicated connection to the coordinator of ``key`` (a group id, or a transactional id with
    COORDINATOR_TYPE_TRANSACTION; see NetworkClient.coordinator_connection_id), retrying COORDINATOR_NOT_AVAILABLE
    (the offsets or transaction state topic may still be being created) until the deadline."""
    found = (await find_coordinators(network, [key], timeout_ms=timeout_ms, key_type=key_type))[key]
    if isinstance(found, KafkaError):
        raise found
    return found


async def find_coordinators(network: NetworkClient, keys: Collection[str], *, timeout_ms: float,
                            key_type: int = COORDINATOR_TYPE_GROUP) -> dict[str, int | KafkaError]:
    """find_coordinator for many keys at once: one FindCoordinator naming them all (v4+, else one per key). Per key
    the coordinator connection id, or the non-retriable error it got; retriable errors are retried until the
    deadline, then raise KafkaTimeoutError."""
    deadline = monotonic_ms() + timeout_ms
    found: dict[str, int | KafkaError] = {}
    pending = list(dict.fromkeys(keys))
    attempts = 0
    while True:
        node = network.least_loaded_node()
        last_error: KafkaError | None = None
        try:
            version = await network.api_version(node, ApiKey.FIND_COORDINATOR)
            answers = []
            if version >= 4:
                response = await network.send(node, FindCoordinatorRequest(key_type=key_type,
                                                                           coordinator_keys=pending),
                                              version=version)
                assert isinstance(response, FindCoordinatorResponse)
                answers = [(entry.key, entry.error_code, entry.error_message, entry.node_id, entry.host, entry.port)
                           for entry in response.coordinators]
            else:
                for key in pending:
                    response = await network.send(node, FindCoordinatorRequest(key=key, key_type=key_type),
                                                  version=version)
                    assert isinstance(response, FindCoordinatorResponse)
                    answers.append((key, response.error_code, response.error_message, response.node_id,
                                    response.host, response.port))
            for key, error_code, message, node_id, host, port in answers:
                if key not in pending:
                    continue
                what = f"{_COORDINATOR_KEY_NAMES[key_type]} {key!r}"
                if error_code != ErrorCode.NONE:
                    error = response_error(error_code, f"FindCoordinator for {what}", message)
                    if error.retriable:
                        last_error = error
                    else:
                        found[key] = error
                    continue
                if node_id not in network.cluster.brokers:
                    await network.refresh_metadata(timeout_ms=max(deadline - monotonic_ms(), 1))
                if node_id not in network.cluster.brokers:
                    last_error = NetworkError(f"coordinator {node_id} at {host}:{port} is not in the cluster "
                                              "metadata")
                    continue
                found[key] = network.coordinator_connection_id(node_id)
            pending = [key for key in pending if key not in found]
            if not pending:
                return found
            if last_error is None:
                last_error = KafkaError(f"FindCoordinator answered no coordinator for {pending[0]!r}")
        except KafkaError as error:
            if not error.retriable:
                raise
            last_error = error
        attempts += 1
        wait = network.retry_backoff.backoff_ms(attempts)
        if monotonic_ms() + wait >= deadline:
            what = f"{_COORDINATOR_KEY_NAMES[key_type]} {pending[0]!r}"
            raise KafkaTimeoutError(f"no coordinator for {what} within {timeout_ms:.0f} ms: {last_error}") from None
        await asyncio.sleep(wait / 1000)


async def fetch_committed(network: NetworkClient, coordinator: int, group_id: str,
                          partitions: Collection[TopicPartition] | None, *, require_stable: bool = True,
                          member: tuple[str, int] | None = None) -> dict[TopicPartition, OffsetAndMetadata | None]:
    """The group's committed offsets for ``partitions`` (None: every partition it has offsets for).
    A partition with no committed offset maps to None. ``member`` (member id, member epoch): a member of a consumer
    protocol group fetching as itself (OffsetFetch v9+, as the Java consumer: the coordinator checks the epoch,
    STALE_MEMBER_EPOCH when it moved on); None fetches as a tool does."""
    version = await network.api_version(coordinator, ApiKey.OFFSET_FETCH, OFFSET_FETCH_MEMBER_EPOCH_VERSION
                                        if member is not None else OFFSET_FETCH_HIGHEST_VERSION)
    if partitions is None:
        topic_list = None
    else:
        by_topic: dict[str, list[int]] = {}
        for tp in partitions:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        topic_list = [(name, sorted(indexes)) for name, indexes in sorted(by_topic.items())]
    if version >= 8:
        topics = None if topic_list is None else [
            OffsetFetchRequest.OffsetFetchRequestTopics(name=name, partition_indexes=indexes)
            for name, indexes in topic_list]
        group_request = OffsetFetchRequest.OffsetFetchRequestGroup(group_id=group_id, topics=topics)
        if member is not None and version >= OFFSET_FETCH_MEMBER_EPOCH_VERSION:
            group_request.member_id, group_request.member_epoch = member
        request = OffsetFetchRequest(groups=[group_request], require_stable=require_stable)
    else:
        if topic_list is None and version < 2:
            raise KafkaError("fetching all of a group's offsets needs OffsetFetch v2 or later")
        topics = None if topic_list is None else [
            OffsetFetchRequest.OffsetFetchRequestTopic(name=name, partition_indexes=indexes)
            for name, indexes in topic_list]
        request = OffsetFetchRequest(group_id=group_id, topics=topics,
                                     require_stable=require_stable if version >= 7 else False)
    response = await network.send(coordinator, request, version=version)
    assert isinstance(response, OffsetFetchResponse)
    if version >= 8:
        group = response.groups[0] if response.groups else None
        if group is None:
            raise KafkaError(f"OffsetFetch answered nothing for group {group_id!r}")
        if group.error_code != ErrorCode.NONE:
            raise response_error(group.error_code, f"OffsetFetch for group {group_id!r}")
        response_topics = group.topics
    else:
        if version >= 2 and response.error_code != ErrorCode.NONE:
            raise response_error(response.error_code, f"OffsetFetch for group {group_id!r}")
        response_topics = response.topics
    committed: dict[TopicPartition, OffsetAndMetadata | None] = {}
    for topic in response_topics:
        for partition in topic.partitions:
            tp = TopicPartition(topic.name, partition.partition_index)
            if partition.error_code != ErrorCode.NONE:
                raise response_error(partition.error_code, f"OffsetFetch for {tp} of group {group_id!r}")
            if partition.committed_offset < 0:
                committed[tp] = None
            else:
                committed[tp] = OffsetAndMetadata(partition.committed_offset, partition.metadata or "",
                                                  partition.committed_leader_epoch)
    if partitions is not None:
        for tp in partitions:
            committed.setdefault(tp, None)
    return committed


async def commit_offsets(network: NetworkClient, coordinator: int, group_id: str,
                         offsets: Mapping[TopicPartition, OffsetAndMetadata], *, generation_id: int = -1,
                         member_id: str = "", group_instance_id: str | None = None,
                         highest_version: int = OFFSET_COMMIT_HIGHEST_VERSION
                         ) -> dict[TopicPartition, KafkaError | None]:
    """Commit ``offsets``; per partition None on success or the error. Generation -1 and an empty member id commit
    as a tool does (the group must then have no active members), as kafka-consumer-groups --reset-offsets does.
    A member of a consumer-protocol group commits with its member epoch as ``generation_id`` and
    ``highest_version`` 9 (the coordinator refuses older versions from such members)."""
    version = await network.api_version(coordinator, ApiKey.OFFSET_COMMIT, highest_version)
    by_topic: dict[str, list[OffsetCommitRequest.OffsetCommitRequestPartition]] = {}
    for tp, offset in offsets.items():
        by_topic.setdefault(tp.topic, []).append(OffsetCommitRequest.OffsetCommitRequestPartition(
            partition_index=tp.partition, committed_offset=offset.offset,
            committed_leader_epoch=offset.leader_epoch if version >= 6 else -1,
            committed_metadata=offset.metadata))
    request = OffsetCommitRequest(
        group_id=group_id, generation_id_or_member_epoch=generation_id, member_id=member_id,
        group_instance_id=group_instance_id if version >= 7 else None,
        topics=[OffsetCommitRequest.OffsetCommitRequestTopic(name=name, partitions=parts)
                for name, parts in by_topic.items()])
    response = await network.send(coordinator, request, version=version)
    assert isinstance(response, OffsetCommitResponse)
    results: dict[TopicPartition, KafkaError | None] = {}
    for topic in response.topics:
        for partition in topic.partitions:
            tp = TopicPartition(topic.name, partition.partition_index)
            results[tp] = (None if partition.error_code == ErrorCode.NONE
                           else response_error(partition.error_code, f"OffsetCommit for {tp} of group {group_id!r}"))
    return results
