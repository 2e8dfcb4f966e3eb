"""Raft for the metadata log (KIP-595, KIP-996 pre-vote), as a pure state machine.

- config.py: the voters (`controller.quorum.voters`), the bootstrap servers (`controller.quorum.bootstrap.servers`)
  and the `controller.quorum.*` timeouts;
- voter_set.py: the voter set and its history along the log (KIP-853 dynamic voters);
- voter_changes.py: when the leader may add, remove or update a voter;
- log.py: RaftLog, what the state machine needs of the log (KafkaMetadataLog in the broker, in memory in tests),
  and RaftSnapshots, of the snapshots beside it (FetchSnapshot, KIP-630);
- election.py: the roles (unattached, prospective, candidate, leader, follower, resigned) and election timers;
- leader_state.py: the leader's view of the replicas' fetch offsets, the high watermark and check-quorum;
- fetch_state.py: a follower's or observer's fetch timer;
- messages.py: the Raft RPCs for `__cluster_metadata-0`, built and read;
- replica.py: RaftReplica, the state machine itself (time and messages in, messages and deadlines out).

The asyncio driver that runs it against real files and sockets is kfk/backends/embedded/raft_driver.py.
"""

from kfk.backends.embedded.raft.config import RaftConfig, VoterEndpoint, parse_bootstrap_servers
from kfk.backends.embedded.raft.election import Role
from kfk.backends.embedded.raft.replica import OutboundRequest, OutboundResponse, RaftError, RaftReplica

__all__ = ["OutboundRequest", "OutboundResponse", "RaftConfig", "RaftError", "RaftReplica", "Role", "VoterEndpoint",
           "parse_bootstrap_servers"]
