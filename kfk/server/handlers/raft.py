"""The Raft RPCs between the replicas of the metadata quorum: Vote (key 52, v0-v2), BeginQuorumEpoch (53, v0-v1),
EndQuorumEpoch (54, v0-v1), FetchSnapshot (59, v0-v1), UpdateRaftVoter (82, v0), and Fetch (1) of
`__cluster_metadata` by a replica, all on the controller listener only (as Kafka serves them); and KIP-853's
AddRaftVoter (80, v0-v1) and RemoveRaftVoter (81, v0), which a KRaft broker's listeners serve too (forwarded to the
active controller in an Envelope, kfk/server/forwarding.py). Each is registered where the listener's table serves
it.

AddRaftVoter and RemoveRaftVoter are answered by the quorum's leader once the new voter set commits (or at once with
the reason it refuses: kfk/backends/embedded/raft/voter_changes.py); AddRaftVoter v1 with ack_when_committed=false
(KIP-1186) is answered once the new voter set is appended, and the next change still waits for its commit. As Kafka's controller, they need ALTER on the
cluster (CLUSTER_AUTHORIZATION_FAILED otherwise), checked for their client: a broker forwards them in an Envelope
naming it.

All are answered by the embedded backend's Raft state machine (kfk/backends/embedded/raft/). Vote v1 and
BeginQuorumEpoch/EndQuorumEpoch v1 add KIP-853's directory ids and endpoints, which a static quorum leaves at their
defaults; Vote v2 adds pre_vote (KIP-996). FetchSnapshot (KIP-630) sends a chunk of the leader's snapshot to a
replica whose fetch offset is below the leader's log start (v1 adds the fetcher's directory id, unused with static
voters). In ZooKeeper mode there is no quorum and every one of these is answered INVALID_REQUEST.
"""

from __future__ import annotations

from kfk.backends.embedded.backend import EmbeddedMetadataBackend
from kfk.errors import ERROR_INFO, ErrorCode, NotControllerError
from kfk.protocol.message import Message
from kfk.protocol.messages import ApiKey, response_class
from kfk.protocol.messages.fetch import FetchRequest, FetchResponse
from kfk.protocol.messages.fetch_snapshot import FetchSnapshotRequest, FetchSnapshotResponse
from kfk.security.acl import AclOperation, ResourceType
from kfk.server.authorization import ALLOW_ALL, RequestAuthorizer
from kfk.server.dispatch import Dispatcher, RequestContext

RAFT_APIS = (ApiKey.VOTE, ApiKey.BEGIN_QUORUM_EPOCH, ApiKey.END_QUORUM_EPOCH, ApiKey.UPDATE_RAFT_VOTER,
             ApiKey.ADD_RAFT_VOTER, ApiKey.REMOVE_RAFT_VOTER)
#: The voter changes a client (an operator's tool) asks for: ALTER on the cluster.
VOTER_CHANGE_APIS = (ApiKey.ADD_RAFT_VOTER, ApiKey.REMOVE_RAFT_VOTER)


class RaftHandler:
    def __init__(self, quorum: EmbeddedMetadataBackend | None, auth: RequestAuthorizer = ALLOW_ALL) -> None:
        self.quorum = quorum
        self.auth = auth

    def register(self, dispatcher: Dispatcher) -> None:
        for api_key in RAFT_APIS:
            if api_key in dispatcher.served_versions:
                dispatcher.register(api_key, self.handle)
        if ApiKey.FETCH_SNAPSHOT in dispatcher.served_versions:
            dispatcher.register(ApiKey.FETCH_SNAPSHOT, self.fetch_snapshot)

    async def handle(self, context: RequestContext, request: Message) -> Message:
        api_key = ApiKey(context.header.request_api_key)
        if api_key in VOTER_CHANGE_APIS and not self.auth.authorize(context, AclOperation.ALTER, ResourceType.CLUSTER):
            error = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
            return response_class(api_key)(error_code=error, error_message=ERROR_INFO[error].message)
        return await self._answer(request, api_key)

    async def fetch(self, request: FetchRequest) -> FetchResponse:
        """A replica's fetch of the metadata log (FetchHandler routes it here)."""
        return await self._answer(request, ApiKey.FETCH)

    async def _answer(self, request: Message, api_key: ApiKey) -> Message:
        if self.quorum is None:
            return response_class(api_key)(error_code=ErrorCode.INVALID_REQUEST)
        try:
            return await self.quorum.handle_raft_request(request)
        except NotControllerError:  # the quorum is not running (yet, or any more) on this node
            return response_class(api_key)(error_code=ErrorCode.BROKER_NOT_AVAILABLE)

    async def fetch_snapshot(self, context: RequestContext, request: FetchSnapshotRequest) -> FetchSnapshotResponse:
        if self.quorum is not None:
            return await self._answer(request, ApiKey.FETCH_SNAPSHOT)
        return FetchSnapshotResponse(error_code=ErrorCode.NONE, topics=[
            FetchSnapshotResponse.TopicSnapshot(name=topic.name, partitions=[
                FetchSnapshotResponse.PartitionSnapshot(index=partition.partition,
                                                        error_code=ErrorCode.INVALID_REQUEST)
                for partition in topic.partitions])
            for topic in request.topics])
