"""The Raft RPCs for the one partition, `__cluster_metadata-0`, built from and read into plain values.

Every KRaft message wraps its fields in topics and partitions (the protocol was written for many Raft logs); here
there is one log, so the builders take the partition's fields and the readers return the one partition entry (None
when a message does not name exactly `__cluster_metadata-0`, which the caller answers as an invalid request).
Fetch names the topic by id from v13 on (CLUSTER_METADATA_TOPIC_ID, AAAAAAAAAAAAAAAAAAAAAQ).
"""

from __future__ import annotations

import uuid
from typing import Any

from kfk.backends.embedded.raft.config import VoterEndpoint
from kfk.backends.embedded.raft.voter_set import Voter
from kfk.common.internal_topics import CLUSTER_METADATA_TOPIC_ID, CLUSTER_METADATA_TOPIC_NAME
from kfk.errors import ErrorCode
from kfk.protocol.messages.add_raft_voter import AddRaftVoterRequest, AddRaftVoterResponse
from kfk.protocol.messages.begin_quorum_epoch import BeginQuorumEpochRequest, BeginQuorumEpochResponse
from kfk.protocol.messages.end_quorum_epoch import EndQuorumEpochRequest, EndQuorumEpochResponse
from kfk.protocol.messages.fetch import FetchRequest, FetchResponse
from kfk.protocol.messages.fetch_snapshot import FetchSnapshotRequest, FetchSnapshotResponse
from kfk.protocol.messages.remove_raft_voter import RemoveRaftVoterRequest, RemoveRaftVoterResponse
from kfk.protocol.messages.update_raft_voter import UpdateRaftVoterRequest, UpdateRaftVoterResponse
from kfk.protocol.messages.vote import VoteRequest, VoteResponse

METADATA_PARTITION = 0
#: The most a follower asks for in one fetch (Kafka's KafkaRaftClient fetches up to 8 MiB).
FETCH_MAX_BYTES = 8 * 1024 * 1024


def names_metadata_topic(topic_name: str | None, topic_id: uuid.UUID | None = None) -> bool:
    return topic_name == CLUSTER_METADATA_TOPIC_NAME or topic_id == CLUSTER_METADATA_TOPIC_ID


def _only_partition(topics: list, name_of, partitions_of, index_of) -> Any | None:
    if len(topics) != 1 or not name_of(topics[0]):
        return None
    partitions = partitions_of(topics[0])
    if len(partitions) != 1 or index_of(partitions[0]) != METADATA_PARTITION:
        return None
    return partitions[0]


# -- Vote --------------------------------------------------------------------------------------------------------------

def vote_request(cluster_id: str, candidate_id: int, candidate_epoch: int, voter_id: int, last_offset_epoch: int,
                 last_offset: int, pre_vote: bool) -> VoteRequest:
    return VoteRequest(cluster_id=cluster_id, voter_id=voter_id, topics=[VoteRequest.TopicData(
        topic_name=CLUSTER_METADATA_TOPIC_NAME, partitions=[VoteRequest.PartitionData(
            partition_index=METADATA_PARTITION, replica_epoch=candidate_epoch, replica_id=candidate_id,
            last_offset_epoch=last_offset_epoch, last_offset=last_offset, pre_vote=pre_vote)])])


def vote_partition(request: VoteRequest) -> VoteRequest.PartitionData | None:
    return _only_partition(request.topics, lambda t: names_metadata_topic(t.topic_name), lambda t: t.partitions,
                           lambda p: p.partition_index)


def vote_response(error_code: int, leader_id: int, leader_epoch: int, granted: bool) -> VoteResponse:
    return VoteResponse(error_code=ErrorCode.NONE, topics=[VoteResponse.TopicData(
        topic_name=CLUSTER_METADATA_TOPIC_NAME, partitions=[VoteResponse.PartitionData(
            partition_index=METADATA_PARTITION, error_code=error_code, leader_id=leader_id,
            leader_epoch=leader_epoch, vote_granted=granted)])])


def vote_response_partition(response: VoteResponse) -> VoteResponse.PartitionData | None:
    return _only_partition(response.topics, lambda t: names_metadata_topic(t.topic_name), lambda t: t.partitions,
                           lambda p: p.partition_index)


# -- BeginQuorumEpoch / EndQuorumEpoch ---------------------------------------------------------------------------------

def begin_quorum_epoch_request(cluster_id: str, leader_id: int, leader_epoch: int,
                               voter_id: int) -> BeginQuorumEpochRequest:
    return BeginQuorumEpochRequest(cluster_id=cluster_id, voter_id=voter_id, topics=[
        BeginQuorumEpochRequest.TopicData(topic_name=CLUSTER_METADATA_TOPIC_NAME, partitions=[
            BeginQuorumEpochRequest.PartitionData(partition_index=METADATA_PARTITION, leader_id=leader_id,
                                                  leader_epoch=leader_epoch)])])


def begin_quorum_epoch_partition(message: BeginQuorumEpochRequest | BeginQuorumEpochResponse) -> Any | None:
    return _only_partition(message.topics, lambda t: names_metadata_topic(t.topic_name), lambda t: t.partitions,
                           lambda p: p.partition_index)


def begin_quorum_epoch_response(error_code: int, leader_id: int, leader_epoch: int) -> BeginQuorumEpochResponse:
    return BeginQuorumEpochResponse(error_code=ErrorCode.NONE, topics=[BeginQuorumEpochResponse.TopicData(
        topic_name=CLUSTER_METADATA_TOPIC_NAME, partitions=[BeginQuorumEpochResponse.PartitionData(
            partition_index=METADATA_PARTITION, error_code=error_code, leader_id=leader_id,
            leader_epoch=leader_epoch)])])


def end_quorum_epoch_request(cluster_id: str, leader_id: int, leader_epoch: int,
                             preferred_successors: list[int]) -> EndQuorumEpochRequest:
    return EndQuorumEpochRequest(cluster_id=cluster_id, topics=[EndQuorumEpochRequest.TopicData(
        topic_name=CLUSTER_METADATA_TOPIC_NAME, partitions=[EndQuorumEpochRequest.PartitionData(
            partition_index=METADATA_PARTITION, leader_id=leader_id, leader_epoch=leader_epoch,
            preferred_successors=list(preferred_successors),
            preferred_candidates=[EndQuorumEpochRequest.ReplicaInfo(candidate_id=voter)
                                  for voter in preferred_successors])])])


def end_quorum_epoch_partition(message: EndQuorumEpochRequest | EndQuorumEpochResponse) -> Any | None:
    return _only_partition(message.topics, lambda t: names_metadata_topic(t.topic_name), lambda t: t.partitions,
                           lambda p: p.partition_index)


def preferred_successors(partition: EndQuorumEpochRequest.PartitionData) -> list[int]:
    """The voters a resigning leader asks to run, most caught up first: v1 names them in preferred_candidates
    (with directory ids), v0 in preferred_successors."""
    if partition.preferred_candidates:
        return [candidate.candidate_id for candidate in partition.preferred_candidates]
    return list(partition.preferred_successors)


def end_quorum_epoch_response(error_code: int, leader_id: int, leader_epoch: int) -> EndQuorumEpochResponse:
    return EndQuorumEpochResponse(error_code=ErrorCode.NONE, topics=[EndQuorumEpochResponse.TopicData(
        topic_name=CLUSTER_METADATA_TOPIC_NAME, partitions=[EndQuorumEpochResponse.PartitionData(
            partition_index=METADATA_PARTITION, error_code=error_code, leader_id=leader_id,
            leader_epoch=leader_epoch)])])


# -- Fetch -------------------------------------------------------------------------------------------------------------

def fetch_request(cluster_id: str, replica_id: int, leader_epoch: int, fetch_offset: int, last_fetched_epoch: int,
                  max_wait_ms: int) -> FetchRequest:
    """A follower's or observer's fetch (v17 fields: replica_state instead of replica_id, the topic by id)."""
    return FetchRequest(
        cluster_id=cluster_id, replica_state=FetchRequest.ReplicaState(replica_id=replica_id, replica_epoch=-1),
        max_wait_ms=max_wait_ms, min_bytes=0, max_bytes=FETCH_MAX_BYTES,
        topics=[FetchRequest.FetchTopic(
            topic=CLUSTER_METADATA_TOPIC_NAME, topic_id=CLUSTER_METADATA_TOPIC_ID, partitions=[
                FetchRequest.FetchPartition(partition=METADATA_PARTITION, current_leader_epoch=leader_epoch,
                                            fetch_offset=fetch_offset, last_fetched_epoch=last_fetched_epoch,
                                            log_start_offset=0, partition_max_bytes=FETCH_MAX_BYTES)])])


def fetch_partition(request: FetchRequest) -> FetchRequest.FetchPartition | None:
    return _only_partition(request.topics, lambda t: names_metadata_topic(t.topic, t.topic_id),
                           lambda t: t.partitions, lambda p: p.partition)


def fetch_replica_id(request: FetchRequest) -> int:
    """The fetching replica: v15+ name it in replica_state, older versions in replica_id."""
    return request.replica_state.replica_id if request.replica_state.replica_id >= 0 else request.replica_id


def fetch_response(error_code: int, leader_id: int, leader_epoch: int, high_watermark: int = -1,
                   records: Any = None, diverging: tuple[int, int] | None = None,
                   snapshot_id: tuple[int, int] | None = None, log_start_offset: int = 0,
                   leader_endpoint: VoterEndpoint | None = None) -> FetchResponse:
    """`diverging` and `snapshot_id` are (end offset, epoch): where the fetcher's log parted from the leader's, or
    the snapshot it must fetch first because the leader's log no longer reaches back to its fetch offset.
    `leader_endpoint`: where the leader named is reached (v16+ NodeEndpoints), so that an observer that found the
    quorum through a bootstrap server can go to it."""
    partition = FetchResponse.PartitionData(
        partition_index=METADATA_PARTITION, error_code=error_code, high_watermark=high_watermark,
        log_start_offset=log_start_offset, records=records,
        current_leader=FetchResponse.LeaderIdAndEpoch(leader_id=leader_id, leader_epoch=leader_epoch))
    if diverging is not None:
        partition.diverging_epoch = FetchResponse.EpochEndOffset(epoch=diverging[1], end_offset=diverging[0])
    if snapshot_id is not None:
        partition.snapshot_id = FetchResponse.SnapshotId(end_offset=snapshot_id[0], epoch=snapshot_id[1])
    response = FetchResponse(error_code=ErrorCode.NONE, responses=[FetchResponse.FetchableTopicResponse(
        topic=CLUSTER_METADATA_TOPIC_NAME, topic_id=CLUSTER_METADATA_TOPIC_ID, partitions=[partition])])
    if leader_endpoint is not None:
        response.node_endpoints = [FetchResponse.NodeEndpoint(node_id=leader_endpoint.node_id,
                                                              host=leader_endpoint.host, port=leader_endpoint.port)]
    return response


def fetch_leader_endpoint(response: FetchResponse, leader_id: int) -> VoterEndpoint | None:
    return next((VoterEndpoint(node.node_id, node.host, node.port) for node in response.node_endpoints
                 if node.node_id == leader_id >= 0), None)


def fetch_response_partition(response: FetchResponse) -> FetchResponse.PartitionData | None:
    return _only_partition(response.responses, lambda t: names_metadata_topic(t.topic, t.topic_id),
                           lambda t: t.partitions, lambda p: p.partition_index)


def response_snapshot_id(partition: FetchResponse.PartitionData) -> tuple[int, int] | None:
    """The (end offset, epoch) of the snapshot a fetch response sends the fetcher to, None when it names none."""
    snapshot_id = partition.snapshot_id
    if snapshot_id.end_offset < 0 and snapshot_id.epoch < 0:
        return None
    return snapshot_id.end_offset, snapshot_id.epoch


# -- FetchSnapshot (KIP-630) -------------------------------------------------------------------------------------------

def fetch_snapshot_request(cluster_id: str, replica_id: int, leader_epoch: int, snapshot_id: tuple[int, int],
                           position: int, max_bytes: int) -> FetchSnapshotRequest:
    return FetchSnapshotRequest(cluster_id=cluster_id, replica_id=replica_id, max_bytes=max_bytes, topics=[
        FetchSnapshotRequest.TopicSnapshot(name=CLUSTER_METADATA_TOPIC_NAME, partitions=[
            FetchSnapshotRequest.PartitionSnapshot(
                partition=METADATA_PARTITION, current_leader_epoch=leader_epoch, position=position,
                snapshot_id=FetchSnapshotRequest.SnapshotId(end_offset=snapshot_id[0], epoch=snapshot_id[1]))])])


def fetch_snapshot_partition(message: FetchSnapshotRequest | FetchSnapshotResponse) -> Any | None:
    return _only_partition(message.topics, lambda t: names_metadata_topic(t.name), lambda t: t.partitions,
                           lambda p: getattr(p, "partition", getattr(p, "index", None)))


def fetch_snapshot_response(error_code: int, leader_id: int, leader_epoch: int,
                            snapshot_id: tuple[int, int] = (-1, -1), size: int = -1, position: int = -1,
                            chunk: Any = None) -> FetchSnapshotResponse:
    return FetchSnapshotResponse(error_code=ErrorCode.NONE, topics=[FetchSnapshotResponse.TopicSnapshot(
        name=CLUSTER_METADATA_TOPIC_NAME, partitions=[FetchSnapshotResponse.PartitionSnapshot(
            index=METADATA_PARTITION, error_code=error_code, size=size, position=position,
            unaligned_records=chunk if chunk is not None else b"",
            snapshot_id=FetchSnapshotResponse.SnapshotId(end_offset=snapshot_id[0], epoch=snapshot_id[1]),
            current_leader=FetchSnapshotResponse.LeaderIdAndEpoch(leader_id=leader_id,
                                                                  leader_epoch=leader_epoch))])])


def leader_hint(partition: Any) -> tuple[int, int]:
    """(leader id, leader epoch) from a response partition of any of the RPCs (Fetch nests them)."""
    current = getattr(partition, "current_leader", None)
    if current is not None:
        return current.leader_id, current.leader_epoch
    return partition.leader_id, partition.leader_epoch




def is_replica_metadata_fetch(request: FetchRequest) -> bool:
    """A fetch of `__cluster_metadata` by a replica (a follower or observer of the quorum), which Raft answers; a
    consumer's fetch (replica id -1) is an ordinary fetch, answered as one of an unknown topic."""
    return fetch_replica_id(request) >= 0 and any(
        names_metadata_topic(topic.topic, topic.topic_id) for topic in request.topics)


# -- AddRaftVoter / RemoveRaftVoter / UpdateRaftVoter (KIP-853) --------------------------------------------------------

def listeners_of(request: AddRaftVoterRequest | UpdateRaftVoterRequest) -> tuple[tuple[str, str, int], ...]:
    return tuple((listener.name, listener.host, listener.port) for listener in request.listeners)


def update_raft_voter_request(cluster_id: str, leader_epoch: int, voter: Voter) -> UpdateRaftVoterRequest:
    low, high = voter.kraft_version_range
    return UpdateRaftVoterRequest(
        cluster_id=cluster_id, current_leader_epoch=leader_epoch, voter_id=voter.node_id,
        voter_directory_id=voter.directory_id,
        listeners=[UpdateRaftVoterRequest.Listener(name=name, host=host, port=port)
                   for name, host, port in voter.listeners],
        k_raft_version_feature=UpdateRaftVoterRequest.KRaftVersionFeature(min_supported_version=low,
                                                                          max_supported_version=high))


def voter_change_response(request_type: type, error_code: int, message: str | None, leader_id: int,
                          leader_epoch: int, leader_endpoint: VoterEndpoint | None = None) -> Any:
    """The answer to an AddRaftVoter, RemoveRaftVoter or UpdateRaftVoter request (UpdateRaftVoter also names the
    current leader)."""
    if request_type is AddRaftVoterRequest:
        return AddRaftVoterResponse(error_code=error_code, error_message=message)
    if request_type is RemoveRaftVoterRequest:
        return RemoveRaftVoterResponse(error_code=error_code, error_message=message)
    response = UpdateRaftVoterResponse(error_code=error_code, current_leader=UpdateRaftVoterResponse.CurrentLeader(
        leader_id=leader_id, leader_epoch=leader_epoch))
    if leader_endpoint is not None:
        response.current_leader.host, response.current_leader.port = leader_endpoint.host, leader_endpoint.port
    return response
