"""Requests served in the callback that received them (network.py's _serve_inline), on real sockets against a
SocketServer in this process: a Metadata fast handler that answers at once, suspends, declines or fails, chosen by
the request's correlation id. Responses keep request order whichever way each request went."""

from __future__ import annotations

import asyncio
import time

from kfk.protocol.headers import RequestHeader, encode_request
from kfk.protocol.message import Buffer
from kfk.protocol.messages import ApiKey
from kfk.protocol.messages.metadata import MetadataRequest, MetadataResponse
from kfk.protocol.primitives import INT32
from kfk.server.dispatch import NOT_SERVED, Dispatcher, RequestContext
from kfk.server.network import Listener, SocketServer

GENERIC, AT_ONCE, SUSPENDS, FAILS, THROTTLED = range(5)  # correlation id % 5: what the fast handler does


def metadata_frame(correlation_id: int) -> bytes:
    header = RequestHeader(request_api_key=ApiKey.METADATA, request_api_version=12, correlation_id=correlation_id,
                           client_id="t")
    return encode_request(header, MetadataRequest(topics=[]))


class Served:
    """What served each request: the fast handler (inline: outside any task; or in the connection's task) or the
    generic one."""

    def __init__(self) -> None:
        self.inline: list[int] = []
        self.in_task: list[int] = []
        self.by_generic: list[int] = []

    async def fast(self, context: RequestContext, frame: Buffer, position: int) -> list | None:
        correlation_id = context.header.correlation_id
        kind = correlation_id % 5
        if kind == GENERIC:
            return NOT_SERVED
        (self.inline if asyncio.current_task() is None else self.in_task).append(correlation_id)
        if kind == SUSPENDS:
            await asyncio.sleep(0.05)
        elif kind == FAILS:
            raise RuntimeError("the fast handler failed")
        elif kind == THROTTLED:
            context.throttle_time_ms = 300
        return [INT32.pack(5) + INT32.pack(correlation_id) + b"\x00"]

    async def generic(self, context: RequestContext, request: MetadataRequest) -> MetadataResponse:
        self.by_generic.append(context.header.correlation_id)
        await asyncio.sleep(0.05)
        return MetadataResponse()


async def serve(test) -> None:
    served = Served()
    dispatcher = Dispatcher()
    dispatcher.register(ApiKey.METADATA, served.generic, served.fast)
    server = SocketServer(dispatcher, [Listener("PLAINTEXT", "127.0.0.1", 0)], max_request_bytes=1 << 20,
                          connections_max_idle_ms=600000)
    await server.bind()
    await server.start_serving()
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.bound[0].port)
        await test(served, reader, writer)
        writer.close()
    finally:
        await server.stop()


async def answers(reader: asyncio.StreamReader, count: int) -> list[int]:
    """The correlation ids of the next `count` responses."""
    ids = []
    for _ in range(count):
        size = INT32.unpack(await asyncio.wait_for(reader.readexactly(4), 5))[0]
        ids.append(INT32.unpack((await asyncio.wait_for(reader.readexactly(size), 5))[:4])[0])
    return ids


def test_requests_answered_at_once_are_served_inline_and_in_order_behind_suspended_and_generic_ones() -> None:
    async def test(served: Served, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(metadata_frame(1))  # connected and idle: served where it was read
        assert await answers(reader, 1) == [1]
        assert served.inline == [1]
        burst = [6, 11, 16, 21]  # several in one send: all inline, answered in one write
        writer.write(b"".join(metadata_frame(i) for i in burst))
        assert await answers(reader, len(burst)) == burst
        assert served.inline == [1, *burst] and served.in_task == []
        # One that suspends, then one the generic handler serves, then quick ones: each waits its turn.
        mixed = [2, 26, 5, 31, 7, 36, 10, 41]
        writer.write(b"".join(metadata_frame(i) for i in mixed))
        assert await answers(reader, len(mixed)) == mixed
        assert served.by_generic == [5, 10]
        assert 2 in served.inline  # begun inline, finished by the connection's task
        assert {26, 31, 36, 41} <= set(served.in_task)  # queued behind it
        writer.write(metadata_frame(46))  # idle again: inline again
        assert await answers(reader, 1) == [46]
        assert served.inline[-1] == 46

    asyncio.run(serve(test))


def test_an_inline_handler_that_fails_closes_the_connection_after_the_responses_before_it() -> None:
    async def test(served: Served, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"".join(metadata_frame(i) for i in (1, 6, 3, 11)))
        assert await answers(reader, 2) == [1, 6]
        assert await asyncio.wait_for(reader.read(1), 5) == b""
        assert 11 not in served.inline + served.in_task

    asyncio.run(serve(test))


def test_a_throttled_inline_answer_mutes_the_connection_for_the_throttle_time() -> None:
    async def test(served: Served, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(metadata_frame(4))
        assert await answers(reader, 1) == [4]
        assert served.inline == [4]
        started = time.monotonic()
        writer.write(metadata_frame(1))
        assert await answers(reader, 1) == [1]
        assert time.monotonic() - started >= 0.25  # muted for the 300 ms from the first response on

    asyncio.run(serve(test))


def test_a_frame_too_short_to_name_its_api_closes_the_connection() -> None:
    async def test(served: Served, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(metadata_frame(1))
        assert await answers(reader, 1) == [1]
        writer.write(INT32.pack(1) + b"\x00")
        assert await asyncio.wait_for(reader.read(1), 5) == b""

    asyncio.run(serve(test))
