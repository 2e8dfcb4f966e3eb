"""RaftDriver: the asyncio shell that runs a RaftReplica against real time and real sockets.

Each input (a timer, a request from another replica, a response, a local append) is one synchronous step on the
event loop: the replica takes it with the current time, is polled, and what it produced is acted on at once:
responses complete the futures their requests wait on, requests go out over BrokerChannels (the broker's
inter-broker connection, one for fetches and snapshot chunks and one for the other RPCs per destination, so that a
fetch the leader holds never delays a vote), and the owner's `on_step` callback applies what was committed. Between
inputs the driver sleeps until the deadline the replica returned.

Requests reach the voters at the endpoints the replica gives (`RaftReplica.endpoint`: the voter set's, from
`controller.quorum.voters` or a dynamic quorum's VotersRecords, a leader's learnt from a fetch response, or a bootstrap
server), through channels the composition root provides (`channel_factory`: kfk.replication's BrokerChannel in the broker; backends sit below replication and do no
socket work of their own). A replica this node has no endpoint or channel for is unreachable: every request to it
fails, as a network failure would.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Callable, Protocol, TypeVar

from kfk.backends.embedded.raft import OutboundRequest, RaftReplica, VoterEndpoint
from kfk.common.clock import Clock
from kfk.errors import NetworkError
from kfk.protocol.message import Message
from kfk.protocol.messages.begin_quorum_epoch import BeginQuorumEpochRequest
from kfk.protocol.messages.end_quorum_epoch import EndQuorumEpochRequest
from kfk.protocol.messages.fetch import FetchRequest
from kfk.protocol.messages.fetch_snapshot import FetchSnapshotRequest
from kfk.protocol.messages.update_raft_voter import UpdateRaftVoterRequest
from kfk.protocol.messages.vote import VoteRequest

log = logging.getLogger("kfk.raft")

T = TypeVar("T")

#: The versions the driver sends: Kafka 4.0's. Kafka 4.4's raft sends Fetch v18, whose one addition is the follower's
#: high watermark (KIP-1166, so that a leader can answer as soon as it moves); kfk's leader does not act on it, so its
#: followers stay at v17 (which every 4.x node serves).
REQUEST_VERSIONS: dict[type, int] = {
    VoteRequest: 2,
    BeginQuorumEpochRequest: 1,
    EndQuorumEpochRequest: 1,
    FetchRequest: 17,
    FetchSnapshotRequest: 1,
    UpdateRaftVoterRequest: 0,
}


class RequestChannel(Protocol):
    """One connection to another node: a request at a version, its response (NetworkError on any failure)."""

    async def request(self, message: Message, api_version: int, timeout_ms: int | None = None) -> Message: ...

    async def close(self) -> None: ...


#: Opens a RequestChannel to (host, port) for a client id, with a request timeout in ms.
ChannelFactory = Callable[[str, int, str, int], RequestChannel]


class RaftDriver:
    def __init__(self, replica: RaftReplica, time_ms: Clock, on_step: Callable[[], None], request_timeout_ms: int,
                 channel_factory: ChannelFactory | None) -> None:
        self.replica = replica
        self._time_ms = time_ms
        self._on_step = on_step
        self._request_timeout_ms = request_timeout_ms
        self._channel_factory = channel_factory
        self._channels: dict[tuple[int, bool], tuple[VoterEndpoint, RequestChannel]] = {}
        self._sends: set[asyncio.Task] = set()
        #: Requests from other replicas still waiting for their response (a fetch the leader holds).
        self._answering: set[asyncio.Future] = set()
        self._wake = asyncio.Event()
        self._deadline_ms = 0
        self._task: asyncio.Task | None = None
        self._stopped = False

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        try:
            while True:
                self.step(lambda now_ms: None)
                self._wake.clear()
                delay_s = max(0, self._deadline_ms - self._time_ms()) / 1000
                try:
                    async with asyncio.timeout(delay_s):
                        await self._wake.wait()
                except TimeoutError:
                    pass
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("the Raft replica of node %d failed: it takes no further part in the quorum",
                          self.replica.node_id)
            raise

    def step(self, action: Callable[[int], T]) -> T:
        """Run one input on the replica, poll it, and act on what it produced."""
        now_ms = self._time_ms()
        result = action(now_ms)
        self._deadline_ms = self.replica.poll(now_ms)
        for item in self.replica.take_outbox():
            if isinstance(item, OutboundRequest) and self._stopped:
                continue  # a request handled while stopping sends nothing more
            if isinstance(item, OutboundRequest):
                task = asyncio.get_running_loop().create_task(self._send(item))
                self._sends.add(task)
                task.add_done_callback(self._sends.discard)
            elif not item.token.done():
                item.token.set_result(item.response)
        self._on_step()
        self._wake.set()
        return result

    async def request(self, request: Message) -> Message:
        """A request from another replica (through the broker's handlers); waits for the replica's response."""
        future: asyncio.Future[Message] = asyncio.get_running_loop().create_future()
        self._answering.add(future)
        future.add_done_callback(self._answering.discard)
        self.step(lambda now_ms: self.replica.handle_request(now_ms, future, request))
        return await future

    async def _send(self, item: OutboundRequest) -> None:
        response: Any = None
        channel = self._channel(item.destination, isinstance(item.request, (FetchRequest, FetchSnapshotRequest)))
        if channel is not None:
            try:
                response = await channel.request(item.request, REQUEST_VERSIONS[type(item.request)],
                                                 self._request_timeout_ms)
            except NetworkError as error:
                log.debug("Raft request to %d failed: %s", item.destination, error)
        if self._stopped:
            return  # the answer came as the driver stopped: the replica is gone
        self.step(lambda now_ms: self.replica.handle_response(now_ms, item.request_id, response))

    def _channel(self, destination: int, for_fetch: bool) -> RequestChannel | None:
        key = (destination, for_fetch)
        endpoint = self.replica.endpoint(destination)
        if endpoint is None or self._channel_factory is None:
            return None
        known = self._channels.get(key)
        if known is not None and known[0] == endpoint:
            return known[1]
        if known is not None:  # the voter moved (UpdateRaftVoter): the old connection goes
            task = asyncio.get_running_loop().create_task(known[1].close())
            self._sends.add(task)
            task.add_done_callback(self._sends.discard)
        channel = self._channel_factory(endpoint.host, endpoint.port, f"raft-client-{self.replica.node_id}",
                                        self._request_timeout_ms)
        self._channels[key] = endpoint, channel
        return channel

    async def drain(self, timeout_s: float) -> None:
        """Give the requests in flight (a resigning leader's EndQuorumEpoch) up to `timeout_s` to go out."""
        if self._sends:
            await asyncio.wait(list(self._sends), timeout=timeout_s)

    async def stop(self) -> None:
        self._stopped = True
        tasks = [task for task in (self._task, *self._sends) if task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for future in list(self._answering):
            future.cancel()  # no answer will come: the connection waiting for it is closed
        self._task = None
        for _, channel in self._channels.values():
            await channel.close()
        self._channels.clear()
