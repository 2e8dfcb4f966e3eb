"""ControllerChannel: requests from this broker to the active controller (Kafka's NodeToControllerChannelManager),
for what a broker cannot decide itself.

- ZooKeeper mode: a topic that a client's Metadata or FindCoordinator request should auto-create, and
  ControlledShutdown; the controller is a broker, reached on the inter-broker listener.
- KRaft: BrokerRegistration and BrokerHeartbeat (BrokerLifecycleManager), AlterPartition, AllocateProducerIds, and
  the admin requests clients send to any broker (forwarded); the controller is a voter of the metadata quorum,
  reached on its controller listener (the address `controller.quorum.voters` gives it). A combined node whose own
  controller is active hands the request to it in-process: the single-node default costs no connection.

Who the active controller is comes from the metadata backend; a request that finds no controller, or one that
moved (the answer says NOT_CONTROLLER), is retried until the timeout.

One connection carries one request at a time, so requests of different kinds get channels of their own
(`for_purpose`), as Kafka's broker keeps one NodeToControllerChannelManager per purpose (forwarding, heartbeat,
alter-partition): a heartbeat never queues behind a forwarded CreateTopics of thousands of partitions or a burst of
ISR changes, which would otherwise cost the broker its session.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import time
from collections.abc import Awaitable, Callable

from kfk.errors import ErrorCode, KafkaTimeoutError, NetworkError
from kfk.protocol.message import Message
from kfk.replication.broker_channel import BrokerChannel
from kfk.security.sasl import SaslClient

log = logging.getLogger("kfk.server.controller_channel")

#: A request still unanswered this long (seconds) is logged once, with why it is waiting.
SLOW_REQUEST_WARNING_S = 5.0

#: The active controller's node id, if one is known.
ActiveController = Callable[[], "int | None"]
#: Where a controller is reached: (host, port), None when unknown.
ControllerAddress = Callable[[int], "tuple[str, int] | None"]
#: An in-process controller: (request, api version) -> response.
LocalController = Callable[[Message, int], Awaitable[Message]]


class ControllerChannel:
    def __init__(self, node_id: int, active_controller: ActiveController, address_of: ControllerAddress,
                 request_timeout_ms: int = 30_000, local: LocalController | None = None,
                 ssl_context: ssl.SSLContext | None = None, sasl: Callable[[], SaslClient] | None = None) -> None:
        """`ssl_context` / `sasl`: the TLS and SASL client settings of the listener the controller is reached on."""
        self.node_id = node_id
        self.active_controller = active_controller
        self.address_of = address_of
        self.request_timeout_ms = request_timeout_ms
        self.local = local
        self.ssl_context = ssl_context
        self.sasl = sasl
        self._channel: BrokerChannel | None = None
        self._client_id = f"node-{node_id}-to-controller"
        self._purposes: dict[str, ControllerChannel] = {}

    def for_purpose(self, purpose: str, request_timeout_ms: int | None = None) -> ControllerChannel:
        """The channel (created on first use, closed with this one) that carries the requests of one purpose on a
        connection of its own; `request_timeout_ms` defaults to this channel's."""
        channel = self._purposes.get(purpose)
        if channel is None:
            channel = self._purposes[purpose] = ControllerChannel(
                self.node_id, self.active_controller, self.address_of,
                self.request_timeout_ms if request_timeout_ms is None else request_timeout_ms, self.local,
                self.ssl_context, self.sasl)
            channel._client_id = f"{self._client_id}-{purpose}"
        return channel

    def _controller_channel(self, controller_id: int) -> BrokerChannel | None:
        address = self.address_of(controller_id)
        if address is None:
            return None
        channel = self._channel
        if channel is None or (channel.host, channel.port) != address:
            if channel is not None:
                asyncio.get_running_loop().create_task(channel.close())
            channel = self._channel = BrokerChannel(address[0], address[1], self._client_id,
                                                    self.request_timeout_ms, self.ssl_context, self.sasl)
        return channel

    async def send(self, message: Message, api_version: int,
                   not_controller: Callable[[Message], bool] | None = None, timeout_ms: int | None = None) -> Message:
        """Send to the active controller; retry while there is none, it cannot be reached, or the answer says the
        node asked was not (or no longer) the controller (`not_controller`, default: any NOT_CONTROLLER error)."""
        not_controller = not_controller or answers_not_controller
        timeout_ms = self.request_timeout_ms if timeout_ms is None else timeout_ms
        started = time.monotonic()
        deadline = started + timeout_ms / 1000
        warned = False
        while True:
            controller_id = self.active_controller()
            if controller_id is None:
                waiting = "no active controller is known"
            else:
                try:
                    if controller_id == self.node_id and self.local is not None:
                        response = await self.local(message, api_version)
                    else:
                        channel = self._controller_channel(controller_id)
                        response = None if channel is None else await channel.request(message, api_version)
                    if response is not None and not not_controller(response):
                        return response
                    waiting = (f"controller {controller_id} has no known address" if response is None
                               else f"node {controller_id} answered that it is not the controller")
                except NetworkError as error:
                    waiting = str(error)
            now = time.monotonic()
            if now > deadline:
                raise KafkaTimeoutError(f"no controller answered {message.NAME} within {timeout_ms} ms ({waiting})")
            if not warned and now - started > SLOW_REQUEST_WARNING_S:
                # Once per request: what it waits for is what an operator needs when a forwarded request hangs.
                log.warning("%s to the controller still unanswered after %.0f s: %s", message.NAME, now - started,
                            waiting)
                warned = True
            await asyncio.sleep(0.05)

    async def close(self) -> None:
        for channel in self._purposes.values():
            await channel.close()
        if self._channel is not None:
            await self._channel.close()


def answers_not_controller(response: Message) -> bool:
    """Whether a controller's answer says it is not the controller: at the top level or for any entry of its
    top-level lists (CreateTopics answers per topic, IncrementalAlterConfigs per resource...)."""
    if getattr(response, "error_code", None) == ErrorCode.NOT_CONTROLLER:
        return True
    for name in response.__slots__:
        value = getattr(response, name)
        if isinstance(value, list):
            for entry in value:
                if getattr(entry, "error_code", None) == ErrorCode.NOT_CONTROLLER:
                    return True
    return False
