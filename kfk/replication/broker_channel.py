"""BrokerChannel: one connection from this broker to another, for inter-broker requests (follower fetches,
OffsetForLeaderEpoch, ControlledShutdown). Kafka's NetworkClient reduced to what a replica fetcher needs: one request
in flight at a time, a timeout per request, and a reconnect on the next request after any failure."""

from __future__ import annotations

import asyncio
import itertools

from kfk.errors import NetworkError
from kfk.protocol.headers import RequestHeader, decode_response, encode_request
from kfk.protocol.message import Message
from kfk.protocol.primitives import INT32


class BrokerChannel:
    def __init__(self, host: str, port: int, client_id: str, request_timeout_ms: int = 30_000) -> None:
        self.host = host
        self.port = port
        self.client_id = client_id
        self.request_timeout_ms = request_timeout_ms
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._correlation_ids = itertools.count(1)
        self._lock = asyncio.Lock()

    def __repr__(self) -> str:
        return f"BrokerChannel({self.host}:{self.port})"

    async def request(self, message: Message, api_version: int, timeout_ms: int | None = None) -> Message:
        """Send one request and wait for its response; NetworkError (and a closed connection) on any failure."""
        timeout = (timeout_ms if timeout_ms is not None else self.request_timeout_ms) / 1000
        async with self._lock:
            try:
                # asyncio.timeout, not wait_for: Python 3.11's wait_for can swallow a cancellation that arrives as
                # the response does, and a fetcher being stopped would then go on fetching.
                async with asyncio.timeout(timeout):
                    return await self._round_trip(message, api_version)
            except (OSError, asyncio.IncompleteReadError, asyncio.TimeoutError, ValueError) as error:
                self._close()
                raise NetworkError(f"request {message.NAME} to {self.host}:{self.port} failed: {error!r}") from error

    async def _round_trip(self, message: Message, api_version: int) -> Message:
        if self._writer is None:
            self._reader, self._writer = await asyncio.open_connection(self.host, self.port)
        correlation_id = next(self._correlation_ids)
        header = RequestHeader(request_api_key=message.API_KEY, request_api_version=api_version,
                               correlation_id=correlation_id, client_id=self.client_id)
        self._writer.write(encode_request(header, message))
        await self._writer.drain()
        size = INT32.unpack(await self._reader.readexactly(4))[0]
        frame = await self._reader.readexactly(size)
        answered, response = decode_response(frame, message.API_KEY, api_version)
        if answered != correlation_id:
            raise ValueError(f"response to correlation id {answered}, expected {correlation_id}")
        return response

    def _close(self) -> None:
        if self._writer is not None:
            self._writer.close()
        self._reader = self._writer = None

    async def close(self) -> None:
        async with self._lock:
            self._close()
