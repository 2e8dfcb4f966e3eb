"""InterBrokerChannels: this broker's connections to the other brokers for one kind of request (transaction
markers, transaction verification), one BrokerChannel per destination broker, kept for the next request.

A destination is found in the metadata image by its endpoint on the inter-broker listener, as the replica fetchers
find their leaders; a channel whose broker came back on another address is replaced. A broker with no live endpoint
raises NetworkError, as a failed request does: the callers retry after looking the partition's leader up again.
Each kind of request has its own instance, because a BrokerChannel carries one request at a time and a marker
append waiting for replicas must not hold up a produce's verification.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Callable

from kfk.errors import NetworkError
from kfk.metadata.cache import MetadataCache
from kfk.protocol.message import Message
from kfk.replication.broker_channel import BrokerChannel
from kfk.security.sasl import SaslClient


class InterBrokerChannels:
    def __init__(self, node_id: int, purpose: str, metadata_cache: MetadataCache, inter_broker_listener: str,
                 request_timeout_ms: int, ssl_context: ssl.SSLContext | None = None,
                 sasl: Callable[[], SaslClient] | None = None) -> None:
        self.node_id = node_id
        self.ssl_context = ssl_context
        self.purpose = purpose
        self.metadata_cache = metadata_cache
        self.inter_broker_listener = inter_broker_listener
        self.request_timeout_ms = request_timeout_ms
        self.sasl = sasl
        self._channels: dict[int, BrokerChannel] = {}

    async def request(self, broker_id: int, message: Message, api_version: int) -> Message:
        return await self._channel(broker_id).request(message, api_version)

    def _channel(self, broker_id: int) -> BrokerChannel:
        endpoint = self.metadata_cache.image.alive_endpoint(broker_id, self.inter_broker_listener)
        if endpoint is None:
            raise NetworkError(f"Broker {broker_id} has no live endpoint on {self.inter_broker_listener}")
        channel = self._channels.get(broker_id)
        if channel is None or (channel.host, channel.port) != (endpoint.host, endpoint.port):
            if channel is not None:
                asyncio.get_running_loop().create_task(channel.close())
            channel = BrokerChannel(endpoint.host, endpoint.port, f"broker-{self.node_id}-{self.purpose}",
                                    self.request_timeout_ms, self.ssl_context, self.sasl)
            self._channels[broker_id] = channel
        return channel

    async def close(self) -> None:
        channels, self._channels = list(self._channels.values()), {}
        for channel in channels:
            await channel.close()
