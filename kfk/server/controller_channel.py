"""ControllerChannel: requests from this broker to the active controller (Kafka's BrokerToControllerChannelManager),
for what a broker cannot decide itself: a topic that a client's Metadata or FindCoordinator request should
auto-create, and ControlledShutdown. The controller is the one the metadata backend names, reached on the
inter-broker listener; a request that finds no controller, or one that moved, is retried until the timeout."""

from __future__ import annotations

import asyncio
import ssl
import time
from typing import Callable

from kfk.controller.backend import MetadataBackend
from kfk.errors import ErrorCode, KafkaTimeoutError, NetworkError
from kfk.metadata.cache import MetadataCache
from kfk.protocol.message import Message
from kfk.replication.broker_channel import BrokerChannel
from kfk.security.sasl import SaslClient


class ControllerChannel:
    def __init__(self, node_id: int, backend: MetadataBackend, metadata_cache: MetadataCache,
                 listener_name: Callable[[], str], request_timeout_ms: int = 30_000,
                 ssl_context: ssl.SSLContext | None = None, sasl: Callable[[], SaslClient] | None = None) -> None:
        self.node_id = node_id
        self.ssl_context = ssl_context
        self.backend = backend
        self.metadata_cache = metadata_cache
        self.listener_name = listener_name
        self.request_timeout_ms = request_timeout_ms
        self.sasl = sasl
        self._channel: BrokerChannel | None = None

    def _controller_channel(self) -> BrokerChannel | None:
        active = self.backend.active_controller()
        if active is None:
            return None
        endpoint = self.metadata_cache.image.alive_endpoint(active[0], self.listener_name())
        if endpoint is None:
            return None
        channel = self._channel
        if channel is None or (channel.host, channel.port) != (endpoint.host, endpoint.port):
            if channel is not None:
                asyncio.get_running_loop().create_task(channel.close())
            channel = self._channel = BrokerChannel(endpoint.host, endpoint.port,
                                                    f"broker-{self.node_id}-to-controller", self.request_timeout_ms,
                                                    self.ssl_context, self.sasl)
        return channel

    async def send(self, message: Message, api_version: int,
                   not_controller: Callable[[Message], bool] = lambda response: False) -> Message:
        """Send to the controller; retry while there is none, it cannot be reached, or `not_controller` says the
        broker asked was not (or no longer) the controller."""
        deadline = time.monotonic() + self.request_timeout_ms / 1000
        while True:
            channel = self._controller_channel()
            if channel is not None:
                try:
                    response = await channel.request(message, api_version)
                    if not not_controller(response):
                        return response
                except NetworkError:
                    pass
            if time.monotonic() > deadline:
                raise KafkaTimeoutError(f"no controller answered {message.NAME} within {self.request_timeout_ms} ms")
            await asyncio.sleep(0.1)

    async def close(self) -> None:
        if self._channel is not None:
            await self._channel.close()


def create_topics_not_controller(response: Message) -> bool:
    return any(topic.error_code == ErrorCode.NOT_CONTROLLER for topic in response.topics)
