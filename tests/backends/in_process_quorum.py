"""A three-voter KRaft quorum in one event loop, for the MetadataBackend contract suite (DESIGN.md decision 10).

Three real EmbeddedMetadataBackends (nodes 1, 2, 3, each with its own log dir) form one static quorum; their Raft
RPCs go from one driver to another's `handle_raft_request` in process instead of over sockets (a node that is not
running fails every request, as an unreachable one would). The contract tests speak to node 1 through
`ThreeVoterQuorum`, which starts and stops the three together (a second open is the whole quorum after a restart) and
answers `elect_controller(1)` the way a quorum can: it hands the leadership to node 1 in a newer epoch by asking
whoever leads to resign (EndQuorumEpoch names its successors, which run at once), until node 1 has won. Everything
else is node 1's own answer.
"""

from __future__ import annotations

import asyncio
import random
import time
from pathlib import Path
from typing import Callable, Sequence

from kfk.backends.embedded import EmbeddedMetadataBackend
from kfk.backends.embedded.raft import RaftConfig, VoterEndpoint
from kfk.controller.backend import MetadataListener
from kfk.errors import NetworkError
from kfk.protocol.message import Message

VOTERS = (1, 2, 3)
#: Shorter than Kafka's defaults so that elections take tens of milliseconds, long enough for a loaded CI machine.
RAFT_CONFIG = RaftConfig(election_timeout_ms=300, election_backoff_max_ms=300, fetch_timeout_ms=2000,
                         request_timeout_ms=2000, fetch_max_wait_ms=200)
HANDOVER_TIMEOUT_S = 30.0


class _InProcessChannel:
    """A RequestChannel to the node whose voter endpoint port is its id."""

    def __init__(self, nodes: dict[int, EmbeddedMetadataBackend], node_id: int) -> None:
        self._nodes = nodes
        self._node_id = node_id

    async def request(self, message: Message, api_version: int, timeout_ms: int | None = None) -> Message:
        node = self._nodes[self._node_id]
        try:
            async with asyncio.timeout(None if timeout_ms is None else timeout_ms / 1000):
                return await node.handle_raft_request(message)
        except asyncio.CancelledError as error:
            if asyncio.current_task().cancelling():
                raise  # this request's sender is stopping
            # The node stopped and dropped the request: a closed connection.
            raise NetworkError(f"node {self._node_id} stopped before answering {message.NAME}") from error
        except Exception as error:  # noqa: BLE001 - a node that is not running, as a failed connection
            raise NetworkError(f"node {self._node_id} did not answer {message.NAME}: {error!r}") from error

    async def close(self) -> None:
        return None


class ThreeVoterQuorum:
    """Node 1 of a running three-voter quorum, as a MetadataBackend."""

    def __init__(self, directory: Path, cluster_id: str, seed: int = 0) -> None:
        self.nodes: dict[int, EmbeddedMetadataBackend] = {}
        endpoints = {node_id: VoterEndpoint(node_id, "in-process", node_id) for node_id in VOTERS}

        def channel_factory(host: str, port: int, client_id: str, timeout_ms: int) -> _InProcessChannel:
            return _InProcessChannel(self.nodes, port)

        for node_id in VOTERS:
            self.nodes[node_id] = EmbeddedMetadataBackend(
                str(directory / f"node-{node_id}"), node_id, cluster_id, endpoints, raft_config=RAFT_CONFIG,
                channel_factory=channel_factory, rng=random.Random(seed * 10 + node_id))
        self.member = self.nodes[1]

    @property
    def cluster_id(self) -> str:
        return self.member.cluster_id

    def add_listener(self, listener: MetadataListener) -> None:
        self.member.add_listener(listener)

    async def start(self) -> None:
        """Start the three; on a restart, return once node 1 has applied everything the quorum had committed (a
        restarted voter learns the high watermark from the leader, as a broker waits to catch up before it serves).
        A new quorum has nothing to replay: it returns at once, before any election."""
        await asyncio.gather(*(node.start() for node in self.nodes.values()))
        if all(node.metadata_log.log_end_offset == 0 for node in self.nodes.values()):
            return
        deadline = time.monotonic() + HANDOVER_TIMEOUT_S
        leader_id, _ = await self._leader(deadline, lambda leader: True)
        leader = self.nodes[leader_id]
        while leader.is_controller and leader.high_watermark <= leader.raft.epoch_start_offset:
            await asyncio.sleep(0.01)  # a new leader knows what is committed once its own epoch's first batch is
        committed = leader.high_watermark
        while self.member.applied_offset < committed:
            assert time.monotonic() < deadline, f"node 1 did not catch up with the high watermark {committed}"
            await asyncio.sleep(0.01)

    async def stop(self) -> None:
        for node in self.nodes.values():
            await node.stop()

    def active_controller(self) -> tuple[int, int] | None:
        return self.member.active_controller()

    async def append(self, records: Sequence[Message], controller_epoch: int) -> int:
        return await self.member.append(records, controller_epoch)

    async def elect_controller(self, node_id: int) -> int | None:
        if node_id != self.member.node_id:
            return await self.member.elect_controller(node_id)
        led = self.member.active_controller()
        newer_than = led[1] if led is not None and led[0] == node_id else -1
        deadline = time.monotonic() + HANDOVER_TIMEOUT_S
        while True:
            leader_id, epoch = await self._leader(deadline, lambda leader: True)
            if leader_id == node_id and epoch > newer_than:
                return await self.member.elect_controller(node_id)
            await self.nodes[leader_id].resign()
            await self._leader(deadline, lambda leader: leader[1] > epoch)

    async def _leader(self, deadline: float, wanted: Callable[[tuple[int, int]], bool]) -> tuple[int, int]:
        """(leader id, epoch) once a node leads and `wanted` holds for it."""
        while True:
            for node in self.nodes.values():
                if node.is_controller and wanted((node.node_id, node.raft.epoch)):
                    return node.node_id, node.raft.epoch
            assert time.monotonic() < deadline, "no leader was elected in the three-voter quorum"
            await asyncio.sleep(0.01)
