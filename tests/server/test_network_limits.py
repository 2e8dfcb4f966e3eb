"""The socket server's bounds, on real sockets against a SocketServer in this process (its dispatcher serves
ApiVersions): connection quotas, the queued.max.request.bytes memory pool, the request receive timeout."""

from __future__ import annotations

import asyncio
import errno
import logging
import socket
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import pytest

from kfk.common.constants import INT32_MAX
from kfk.config import BrokerConfig, parse_host_counts
from kfk.errors import ErrorCode, InvalidConfigurationError
from kfk.protocol.headers import RequestHeader, decode_response, encode_request
from kfk.protocol.messages import ApiKey
from kfk.protocol.messages.api_versions import ApiVersionsRequest
from kfk.protocol.primitives import INT32
from kfk.server.connection_quotas import ConnectionQuotas, ListenerQuota, RateLimitedLog
from kfk.server.dispatch import SERVED_VERSIONS, Dispatcher
from kfk.server.handlers.api_versions import ApiVersionsHandler
from kfk.server.network import Listener, SocketServer


def api_versions_frame(correlation_id: int = 1, padding: int = 0) -> bytes:
    """An ApiVersions v3 request; `padding` trailing bytes after the body (which the broker tolerates)."""
    header = RequestHeader(request_api_key=ApiKey.API_VERSIONS, request_api_version=3,
                           correlation_id=correlation_id, client_id="t")
    frame = encode_request(header, ApiVersionsRequest(client_software_name="t", client_software_version="1"))
    return INT32.pack(len(frame) - 4 + padding) + frame[4:] + b"\x00" * padding


@asynccontextmanager
async def socket_server(listeners: tuple[str, ...] = ("PLAINTEXT",), **options) -> AsyncIterator[SocketServer]:
    dispatcher = Dispatcher()
    ApiVersionsHandler(SERVED_VERSIONS).register(dispatcher)
    server = SocketServer(dispatcher, [Listener(name, "127.0.0.1", 0) for name in listeners],
                          max_request_bytes=100 * 1024 * 1024, connections_max_idle_ms=600000, **options)
    await server.bind()
    await server.start_serving()
    try:
        yield server
    finally:
        await server.stop()


async def connect(server: SocketServer, listener: int = 0) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection("127.0.0.1", server.bound[listener].port)


async def answered(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, timeout: float = 5.0,
                   correlation_id: int = 1) -> bool:
    """Send ApiVersions and wait for its answer: False if the broker closed the connection instead."""
    try:
        writer.write(api_versions_frame(correlation_id))
        size = INT32.unpack(await asyncio.wait_for(reader.readexactly(4), timeout))[0]
        frame = await asyncio.wait_for(reader.readexactly(size), timeout)
    except (asyncio.IncompleteReadError, ConnectionError):
        return False
    answered_id, response = decode_response(frame, ApiKey.API_VERSIONS, 3)
    assert answered_id == correlation_id and response.error_code == ErrorCode.NONE
    return True


async def closed(reader: asyncio.StreamReader, timeout: float = 5.0) -> bool:
    try:
        return await asyncio.wait_for(reader.read(1), timeout) == b""
    except ConnectionError:
        return True


def run(test: Callable[[], object]) -> None:
    asyncio.run(test())  # type: ignore[arg-type]


def test_connections_beyond_the_per_ip_limit_are_closed_and_counted_back_when_one_closes() -> None:
    async def test() -> None:
        async with socket_server(quotas=ConnectionQuotas(max_connections_per_ip=2)) as server:
            first, second = await connect(server), await connect(server)
            assert await answered(*first) and await answered(*second)
            third = await connect(server)
            assert await closed(third[0])
            first[1].close()
            await closed(first[0])
            for _ in range(100):  # the server counts the closed connection off when it sees it go
                if server.quotas.total == 1:
                    break
                await asyncio.sleep(0.01)
            assert await answered(*await connect(server))
            assert server.quotas.by_ip["127.0.0.1"] == 2

    run(test)


def test_a_per_ip_override_beats_the_default() -> None:
    async def test() -> None:
        quotas = ConnectionQuotas(max_connections_per_ip=0, max_connections_per_ip_overrides={"127.0.0.1": 1})
        async with socket_server(quotas=quotas) as server:
            first = await connect(server)
            assert await answered(*first)
            assert await closed((await connect(server))[0])

    run(test)


def test_a_listener_limit_applies_to_its_listener_only() -> None:
    async def test() -> None:
        quotas = ConnectionQuotas(listeners={"CLIENTS": ListenerQuota(max_connections=1)})
        async with socket_server(("CLIENTS", "OTHER"), quotas=quotas) as server:
            assert await answered(*await connect(server, 0))
            assert await closed((await connect(server, 0))[0])
            assert await answered(*await connect(server, 1))
            assert await answered(*await connect(server, 1))

    run(test)


def test_the_inter_broker_listener_takes_the_least_recently_active_connection_s_place() -> None:
    async def test() -> None:
        quotas = ConnectionQuotas(max_connections=2, inter_broker_listener="REPLICATION")
        async with socket_server(("CLIENTS", "REPLICATION"), quotas=quotas) as server:
            older, newer = await connect(server, 0), await connect(server, 0)
            assert await answered(*older)
            await asyncio.sleep(0.05)
            assert await answered(*newer)  # `older` is now the least recently active
            assert await closed((await connect(server, 0))[0])  # a client beyond max.connections is refused
            replication = await connect(server, 1)
            assert await answered(*replication)
            assert await closed(older[0])
            assert await answered(*newer, correlation_id=2)

    run(test)


def test_the_creation_rate_refuses_a_burst_beyond_one_second_s_worth() -> None:
    async def test() -> None:
        async with socket_server(quotas=ConnectionQuotas(max_connection_creation_rate=5)) as server:
            connections = [await connect(server) for _ in range(12)]
            results = [await answered(*connection, timeout=2) for connection in connections]
            assert 5 <= results.count(True) <= 7  # the bucket refills while the burst is being opened
            assert results[:5] == [True] * 5
            await asyncio.sleep(1.0)
            assert await answered(*await connect(server))

    run(test)


def test_rejections_are_logged_once_per_interval_with_a_count(caplog: pytest.LogCaptureFixture) -> None:
    now = [0.0]
    rejections = RateLimitedLog(interval_seconds=30, clock=lambda: now[0])
    with caplog.at_level(logging.WARNING, logger="kfk.server.network"):
        for _ in range(10):
            rejections.warning("ip", "rejected %s", "x")
        now[0] = 31.0
        rejections.warning("ip", "rejected %s", "x")
    assert [record.getMessage() for record in caplog.records] == [
        "rejected x", "rejected x (and 9 more like it in the last 31 s)"]


def test_an_exhausted_memory_pool_stops_reading_new_requests_until_one_is_handled() -> None:
    async def test() -> None:
        async with socket_server(queued_max_request_bytes=1024 * 1024) as server:
            waiting = await connect(server)
            assert await answered(*waiting)
            big = await connect(server)
            padding = 2 * 1024 * 1024
            frame = api_versions_frame(correlation_id=9, padding=padding)
            big[1].write(frame[:100_000])  # the announced 2 MB are reserved: the pool is exhausted
            for _ in range(200):
                if server.memory_pool.exhausted:
                    break
                await asyncio.sleep(0.01)
            assert server.memory_pool.exhausted
            waiting[1].write(api_versions_frame(correlation_id=2))
            with pytest.raises(asyncio.TimeoutError):  # not read while the pool is exhausted
                await asyncio.wait_for(waiting[0].readexactly(4), 0.5)
            big[1].write(frame[100_000:])  # the big request completes, is answered, and gives its memory back
            size = INT32.unpack(await asyncio.wait_for(big[0].readexactly(4), 5))[0]
            assert decode_response(await big[0].readexactly(size), ApiKey.API_VERSIONS, 3)[0] == 9
            size = INT32.unpack(await asyncio.wait_for(waiting[0].readexactly(4), 5))[0]
            assert decode_response(await waiting[0].readexactly(size), ApiKey.API_VERSIONS, 3)[0] == 2
            assert server.memory_pool.available == server.memory_pool.capacity

    run(test)


def test_a_frame_not_complete_within_the_receive_timeout_closes_its_connection() -> None:
    async def test() -> None:
        async with socket_server(request_receive_timeout_ms=300) as server:
            stalled = await connect(server)
            stalled[1].write(INT32.pack(100 * 1024 * 1024) + b"\x00\x12")
            slow = await connect(server)
            frame = api_versions_frame(correlation_id=4)
            started = asyncio.get_running_loop().time()
            slow[1].write(frame[:10])
            assert await closed(stalled[0], timeout=5)
            assert asyncio.get_running_loop().time() - started >= 0.25
            assert await closed(slow[0], timeout=5)  # a frame begun is a frame that must finish
            idle = await connect(server)
            await asyncio.sleep(0.6)  # between frames, only connections.max.idle.ms applies
            assert await answered(*idle)

    run(test)


def test_quotas_from_server_properties_with_kafka_s_defaults_and_listener_prefixes() -> None:
    base = {"process.roles": "broker,controller", "node.id": "1"}
    defaults = BrokerConfig(base)
    assert (defaults.max_connections, defaults.max_connections_per_ip, defaults.max_connection_creation_rate,
            defaults.max_connections_per_ip_overrides, defaults.queued_max_request_bytes,
            defaults.socket_request_receive_timeout_ms) == (INT32_MAX, INT32_MAX, INT32_MAX, "", -1, 30000)
    config = BrokerConfig({**base, "max.connections": "10", "listener.name.internal.max.connections": "4",
                           "listener.name.internal.max.connection.creation.rate": "2",
                           "max.connections.per.ip.overrides": "127.0.0.1:3, [::1]:5"})
    assert config.unknown == []  # listener-prefixed keys are known keys
    quotas = ConnectionQuotas.from_config(config, ["INTERNAL", "EXTERNAL"], "INTERNAL",
                                          parse_host_counts(config.max_connections_per_ip_overrides))
    assert quotas.max_connections == 10 and quotas.per_ip_overrides == {"127.0.0.1": 3, "::1": 5}
    assert quotas.listeners["INTERNAL"] == ListenerQuota(4, 2)
    assert quotas.listeners["EXTERNAL"] == ListenerQuota(INT32_MAX, INT32_MAX)
    with pytest.raises(InvalidConfigurationError, match="host:count"):
        BrokerConfig({**base, "max.connections.per.ip.overrides": "127.0.0.1"})
    with pytest.raises(InvalidConfigurationError, match="max.connections"):
        BrokerConfig({**base, "listener.name.internal.max.connections": "-1"})


def test_a_bound_listener_holds_its_port_and_queues_connections_until_it_serves() -> None:
    """Between bind() and start_serving() the broker loads its logs: its port must already be its own (no other
    SO_REUSEADDR socket may bind it, as one could before the listen) and a client that connects early is answered
    once it serves."""
    async def test() -> None:
        dispatcher = Dispatcher()
        ApiVersionsHandler(SERVED_VERSIONS).register(dispatcher)
        server = SocketServer(dispatcher, [Listener("PLAINTEXT", "127.0.0.1", 0)],
                              max_request_bytes=100 * 1024 * 1024, connections_max_idle_ms=600000)
        await server.bind()
        try:
            port = server.bound[0].port
            with socket.socket() as other:
                other.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                with pytest.raises(OSError) as refused:
                    other.bind(("127.0.0.1", port))
                assert refused.value.errno == errno.EADDRINUSE
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            await server.start_serving()
            assert await answered(reader, writer)
            writer.close()
        finally:
            await server.stop()

    run(test)
