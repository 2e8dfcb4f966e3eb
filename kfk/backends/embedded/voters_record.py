"""A dynamic quorum's voter set as the log and snapshots hold it: the VotersRecord control record (KIP-853,
scripts/kafka-protocol/raft/VotersRecord.json: each voter's id, directory id, endpoints and supported kraft.version
range), to and from the Raft state machine's VoterSet."""

from __future__ import annotations

from kfk.backends.embedded.raft.voter_set import Voter, VoterSet
from kfk.protocol.message import Message
from kfk.protocol.messages import data_class

VotersRecord = data_class("VotersRecord")
KRaftVersionRecord = data_class("KRaftVersionRecord")


def to_voters_record(voters: VoterSet) -> Message:
    return VotersRecord(version=0, voters=[
        VotersRecord.Voter(
            voter_id=voter.node_id, voter_directory_id=voter.directory_id,
            endpoints=[VotersRecord.Endpoint(name=name, host=host, port=port) for name, host, port in voter.listeners],
            k_raft_version_feature=VotersRecord.KRaftVersionFeature(
                min_supported_version=voter.kraft_version_range[0],
                max_supported_version=voter.kraft_version_range[1]))
        for voter in voters])


def from_voters_record(record: Message) -> VoterSet:
    return VoterSet.of(
        Voter(voter.voter_id, voter.voter_directory_id,
              tuple((endpoint.name, endpoint.host, endpoint.port) for endpoint in voter.endpoints),
              (voter.k_raft_version_feature.min_supported_version,
               voter.k_raft_version_feature.max_supported_version))
        for voter in record.voters)
