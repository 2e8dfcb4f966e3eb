"""DescribeQuorum (key 55), v0-v2 (KIP-595, KIP-836, KIP-853): the state of the metadata quorum.

The request names one partition (INVALID_REQUEST otherwise); any but __cluster_metadata partition 0 is answered
UNKNOWN_TOPIC_OR_PARTITION in its partition entry, as Kafka does (there is one Raft log);
a node that does not lead the quorum answers NOT_LEADER_OR_FOLLOWER for it. The leader tells its epoch, the high
watermark and each voter's log end offset; v1 adds each replica's last fetch and last caught-up times; v2 adds
error messages, replica directory ids (a static voter has none: the zero uuid) and the voters' endpoints (`nodes`):
their controller listeners as the voter set has them (`controller.quorum.voters`, or a dynamic quorum's
VotersRecord). The single-node default has no controller listener: its voter's endpoints are the listeners it
registered as a broker.
The quorum is the embedded backend's; in ZooKeeper mode there is none, and the request is INVALID_REQUEST.
"""

from __future__ import annotations

from kfk.backends.embedded.backend import EmbeddedMetadataBackend, QuorumDescription, ReplicaState
from kfk.common.internal_topics import CLUSTER_METADATA_TOPIC_NAME
from kfk.errors import ERROR_INFO, ErrorCode
from kfk.metadata.cache import MetadataCache
from kfk.protocol.messages import ApiKey
from kfk.protocol.messages.describe_quorum import DescribeQuorumRequest, DescribeQuorumResponse
from kfk.security.acl import AclOperation, ResourceType
from kfk.server.authorization import ALLOW_ALL, RequestAuthorizer
from kfk.server.dispatch import Dispatcher, RequestContext

#: The one partition of the metadata log.
METADATA_PARTITION = 0


class DescribeQuorumHandler:
    """DESCRIBE on the cluster, else CLUSTER_AUTHORIZATION_FAILED."""

    def __init__(self, quorum: EmbeddedMetadataBackend | None, metadata_cache: MetadataCache,
                 auth: RequestAuthorizer = ALLOW_ALL) -> None:
        self.quorum = quorum
        self.auth = auth
        self.metadata_cache = metadata_cache

    def register(self, dispatcher: Dispatcher) -> None:
        dispatcher.register(ApiKey.DESCRIBE_QUORUM, self.describe_quorum)

    async def describe_quorum(self, context: RequestContext,
                              request: DescribeQuorumRequest) -> DescribeQuorumResponse:
        if not self.auth.authorize(context, AclOperation.DESCRIBE, ResourceType.CLUSTER):
            return DescribeQuorumResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                          error_message=ERROR_INFO[ErrorCode.CLUSTER_AUTHORIZATION_FAILED].message)
        if self.quorum is None:
            return DescribeQuorumResponse(error_code=ErrorCode.INVALID_REQUEST,
                                          error_message="ZooKeeper mode has no metadata quorum")
        if len(request.topics) != 1 or len(request.topics[0].partitions) != 1:
            return DescribeQuorumResponse(error_code=ErrorCode.INVALID_REQUEST,
                                          error_message="The request names one partition, "
                                                        f"{CLUSTER_METADATA_TOPIC_NAME}-{METADATA_PARTITION}")
        if not _names_the_metadata_partition(request):
            (wanted,) = request.topics
            return DescribeQuorumResponse(error_code=ErrorCode.NONE, topics=[DescribeQuorumResponse.TopicData(
                topic_name=wanted.topic_name, partitions=[DescribeQuorumResponse.PartitionData(
                    partition_index=wanted.partitions[0].partition_index,
                    error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    error_message=ERROR_INFO[ErrorCode.UNKNOWN_TOPIC_OR_PARTITION].message)])])
        description = self.quorum.describe_quorum()
        if description is None:
            partition = DescribeQuorumResponse.PartitionData(partition_index=METADATA_PARTITION,
                                                             error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER)
        else:
            partition = DescribeQuorumResponse.PartitionData(
                partition_index=METADATA_PARTITION, error_code=ErrorCode.NONE,
                leader_id=description.leader_id, leader_epoch=description.leader_epoch,
                high_watermark=description.high_watermark,
                current_voters=[_replica(voter) for voter in description.voters],
                observers=[_replica(observer) for observer in description.observers])
        response = DescribeQuorumResponse(error_code=ErrorCode.NONE, topics=[DescribeQuorumResponse.TopicData(
            topic_name=CLUSTER_METADATA_TOPIC_NAME, partitions=[partition])])
        if context.api_version >= 2 and description is not None:
            response.nodes = self._nodes(description)
        return response

    def _nodes(self, description: QuorumDescription) -> list[DescribeQuorumResponse.Node]:
        image = self.metadata_cache.image
        nodes = []
        for voter in description.voters:
            listeners = description.voter_listeners.get(voter.replica_id)
            if not listeners:
                registration = image.brokers.get(voter.replica_id)
                listeners = tuple((endpoint.listener_name, endpoint.host, endpoint.port)
                                  for endpoint in (registration.endpoints if registration is not None else ()))
            nodes.append(DescribeQuorumResponse.Node(node_id=voter.replica_id, listeners=[
                DescribeQuorumResponse.Listener(name=name, host=host, port=port) for name, host, port in listeners]))
        return nodes


def _names_the_metadata_partition(request: DescribeQuorumRequest) -> bool:
    return (len(request.topics) == 1 and request.topics[0].topic_name == CLUSTER_METADATA_TOPIC_NAME
            and [p.partition_index for p in request.topics[0].partitions] == [METADATA_PARTITION])


def _replica(state: ReplicaState) -> DescribeQuorumResponse.ReplicaState:
    return DescribeQuorumResponse.ReplicaState(replica_id=state.replica_id, replica_directory_id=state.directory_id,
                                               log_end_offset=state.log_end_offset,
                                               last_fetch_timestamp=state.last_fetch_timestamp,
                                               last_caught_up_timestamp=state.last_caught_up_timestamp)
