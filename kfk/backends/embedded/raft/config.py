"""The quorum's static configuration: who the voters are and where they listen, and Raft's timeouts.

`controller.quorum.voters` (Kafka's `id@host:port,...`, KIP-595 static voters) is parsed once, by the broker's config
(kfk.config.parse_quorum_voters), and handed in as VoterEndpoints; the timeouts are Kafka's `controller.quorum.*` keys
with Kafka's defaults. The state machine and its driver get both as plain values.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from kfk.errors import InvalidConfigurationError


@dataclass(frozen=True, slots=True)
class VoterEndpoint:
    """One voter of a static quorum and the controller listener its Raft requests go to."""

    node_id: int
    host: str
    port: int


@dataclass(frozen=True, slots=True)
class RaftConfig:
    """Kafka's `controller.quorum.*` timeouts, in milliseconds."""

    election_timeout_ms: int = 1000
    election_backoff_max_ms: int = 1000
    fetch_timeout_ms: int = 2000
    request_timeout_ms: int = 2000
    retry_backoff_ms: int = 20
    #: How long the leader holds a fetch that finds nothing new (Kafka's KafkaRaftClient uses 500 ms).
    fetch_max_wait_ms: int = 500
    #: The most one FetchSnapshot response carries (Kafka's KafkaRaftClient asks for up to 8 MiB a chunk).
    fetch_snapshot_max_bytes: int = 8 * 1024 * 1024

    @classmethod
    def from_values(cls, values: Mapping[str, Any]) -> RaftConfig:
        """From a broker config's values (the `controller.quorum.*` keys)."""
        return cls(
            election_timeout_ms=int(values["controller.quorum.election.timeout.ms"]),
            election_backoff_max_ms=int(values["controller.quorum.election.backoff.max.ms"]),
            fetch_timeout_ms=int(values["controller.quorum.fetch.timeout.ms"]),
            request_timeout_ms=int(values["controller.quorum.request.timeout.ms"]),
            retry_backoff_ms=int(values["controller.quorum.retry.backoff.ms"]),
        )


def parse_bootstrap_servers(entries: Iterable[str]) -> tuple[VoterEndpoint, ...]:
    """`controller.quorum.bootstrap.servers` entries (`host:port`), each under the id Kafka gives a bootstrap
    server (-2, -3, ...: no node has a negative id)."""
    servers = []
    for entry in filter(None, (entry.strip() for entry in entries)):
        host, colon, port_text = entry.rpartition(":")
        if not colon or not host or not port_text.isdigit() or not 0 < int(port_text) < 65536:
            raise InvalidConfigurationError(
                f"controller.quorum.bootstrap.servers entry {entry!r} is not of the form host:port")
        servers.append(VoterEndpoint(-2 - len(servers), host.strip("[]"), int(port_text)))
    return tuple(servers)
