"""BrokerConnection and NetworkClient against scripted peers (real sockets, a thread playing the broker) and a real
kfk broker: framing, correlation ids, ApiVersions negotiation and fallback, timeouts, reconnect backoff."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Callable

import pytest

from kfk.client.config import ADMIN_CONFIG_DEF, ClientConfig
from kfk.client.connection import BrokerConnection
from kfk.client.network_client import ExponentialBackoff, NetworkClient
from kfk.errors import ErrorCode, KafkaTimeoutError, NetworkError, ProtocolError, UnsupportedVersionError
from kfk.protocol.headers import decode_request, encode_response
from kfk.protocol.messages import ApiKey
from kfk.protocol.messages.api_versions import ApiVersionsResponse
from kfk.protocol.messages.metadata import MetadataRequest, MetadataResponse
from kfk.protocol.primitives import INT32

ApiVersion = ApiVersionsResponse.ApiVersion


class ScriptedBroker:
    """Accepts connections and answers each request frame with ``answer(header, request)`` -> frame chunks or
    None (no answer); records every (api_key, version) it was sent."""

    def __init__(self, answer: Callable) -> None:
        self.answer = answer
        self.requests: list[tuple[int, int]] = []
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            threading.Thread(target=self._handle, args=(client,), daemon=True).start()

    def _handle(self, client: socket.socket) -> None:
        with client:
            while True:
                size_bytes = _read(client, 4)
                if size_bytes is None:
                    return
                frame = _read(client, INT32.unpack(size_bytes)[0])
                if frame is None:
                    return
                header, request = decode_request(frame)
                self.requests.append((header.request_api_key, header.request_api_version))
                chunks = self.answer(header, request)
                if chunks == "close":
                    return
                if chunks is not None:
                    client.sendall(b"".join(chunks))

    def close(self) -> None:
        self.server.close()


def _read(sock: socket.socket, size: int) -> bytes | None:
    data = bytearray()
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            return None
        data += chunk
    return bytes(data)


def api_versions_response(header, api_keys: dict[int, tuple[int, int]], error: int = ErrorCode.NONE,
                          version: int | None = None) -> list:
    response = ApiVersionsResponse(error_code=error, api_keys=[
        ApiVersion(api_key=key, min_version=low, max_version=high) for key, (low, high) in api_keys.items()])
    return encode_response(header.correlation_id, ApiKey.API_VERSIONS,
                           header.request_api_version if version is None else version, response)


def connection(port: int, **options) -> BrokerConnection:
    settings = dict(node_id=-1, client_id="test", client_software_name="kfk-tests", client_software_version="1",
                    request_timeout_ms=2000, connection_setup_timeout_ms=2000)
    settings.update(options)
    return BrokerConnection("127.0.0.1", port, **settings)


@pytest.fixture
def scripted():
    brokers: list[ScriptedBroker] = []

    def start(answer: Callable) -> ScriptedBroker:
        broker = ScriptedBroker(answer)
        brokers.append(broker)
        return broker

    yield start
    for broker in brokers:
        broker.close()


def test_versions_are_the_highest_both_sides_support(scripted) -> None:
    def answer(header, request):
        if header.request_api_key == ApiKey.API_VERSIONS:
            return api_versions_response(header, {ApiKey.API_VERSIONS: (0, 3), ApiKey.METADATA: (1, 7)})
        response = MetadataResponse(cluster_id="c", controller_id=1)
        return encode_response(header.correlation_id, header.request_api_key, header.request_api_version, response)

    broker = scripted(answer)

    async def run() -> None:
        conn = connection(broker.port)
        await conn.connect()
        assert conn.version(ApiKey.METADATA) == 7
        assert conn.version(ApiKey.METADATA, highest=4) == 4
        with pytest.raises(UnsupportedVersionError, match="Produce"):
            conn.version(ApiKey.PRODUCE)
        response = await conn.send(MetadataRequest(topics=[]))
        assert response.cluster_id == "c"
        conn.close()

    asyncio.run(run())
    assert broker.requests[-1] == (ApiKey.METADATA, 7)


def test_unsupported_api_versions_version_falls_back_to_what_the_broker_offers(scripted) -> None:
    def answer(header, request):
        if header.request_api_version > 2:  # an older broker: answer v0 with its range, as KIP-511 says
            return api_versions_response(header, {ApiKey.API_VERSIONS: (0, 2)}, ErrorCode.UNSUPPORTED_VERSION, 0)
        return api_versions_response(header, {ApiKey.API_VERSIONS: (0, 2), ApiKey.METADATA: (0, 9)})

    broker = scripted(answer)

    async def run() -> None:
        conn = connection(broker.port)
        await conn.connect()
        assert conn.version(ApiKey.METADATA) == 9
        conn.close()

    asyncio.run(run())
    assert broker.requests == [(ApiKey.API_VERSIONS, 5), (ApiKey.API_VERSIONS, 2)]


def test_pipelined_requests_get_their_own_responses(scripted) -> None:
    def answer(header, request):
        if header.request_api_key == ApiKey.API_VERSIONS:
            return api_versions_response(header, {ApiKey.API_VERSIONS: (0, 3), ApiKey.METADATA: (0, 12)})
        response = MetadataResponse(cluster_id=f"answer-{header.correlation_id}", controller_id=1)
        return encode_response(header.correlation_id, header.request_api_key, header.request_api_version, response)

    broker = scripted(answer)

    async def run() -> list[str]:
        conn = connection(broker.port)
        await conn.connect()
        responses = await asyncio.gather(*(conn.send(MetadataRequest(topics=[])) for _ in range(20)))
        conn.close()
        return [response.cluster_id for response in responses]

    ids = asyncio.run(run())
    assert ids == [f"answer-{n}" for n in range(1, 21)]


def test_a_response_with_the_wrong_correlation_id_closes_the_connection(scripted) -> None:
    def answer(header, request):
        if header.request_api_key == ApiKey.API_VERSIONS:
            return api_versions_response(header, {ApiKey.API_VERSIONS: (0, 3), ApiKey.METADATA: (0, 12)})
        return encode_response(header.correlation_id + 7, header.request_api_key, header.request_api_version,
                               MetadataResponse())

    broker = scripted(answer)

    async def run() -> None:
        conn = connection(broker.port)
        await conn.connect()
        with pytest.raises(ProtocolError, match="correlation id"):
            await conn.send(MetadataRequest(topics=[]))
        assert not conn.connected

    asyncio.run(run())


def test_an_unanswered_request_times_out_and_closes_the_connection(scripted) -> None:
    def answer(header, request):
        if header.request_api_key == ApiKey.API_VERSIONS:
            return api_versions_response(header, {ApiKey.API_VERSIONS: (0, 3), ApiKey.METADATA: (0, 12)})
        return None

    broker = scripted(answer)

    async def run() -> None:
        conn = connection(broker.port, request_timeout_ms=200)
        await conn.connect()
        with pytest.raises(KafkaTimeoutError, match="200 ms"):
            await conn.send(MetadataRequest(topics=[]))
        assert not conn.connected
        with pytest.raises(KafkaTimeoutError):  # later requests fail with the same error
            await conn.send(MetadataRequest(topics=[]))

    asyncio.run(run())


def test_a_broker_that_hangs_up_fails_the_in_flight_requests(scripted) -> None:
    def answer(header, request):
        if header.request_api_key == ApiKey.API_VERSIONS:
            return api_versions_response(header, {ApiKey.API_VERSIONS: (0, 3), ApiKey.METADATA: (0, 12)})
        return "close"

    broker = scripted(answer)

    async def run() -> None:
        conn = connection(broker.port)
        await conn.connect()
        with pytest.raises(NetworkError, match="closed the connection"):
            await conn.send(MetadataRequest(topics=[]))

    asyncio.run(run())


def test_a_close_before_any_answer_but_api_versions_names_security_protocol(scripted) -> None:
    """What a client of the wrong security protocol sees (a SASL listener answers ApiVersions, then closes on the
    next request): the error says to set security.protocol. Once the broker has answered a request, a close is an
    ordinary disconnect and says only that."""
    def answer(header, request):
        if header.request_api_key == ApiKey.API_VERSIONS:
            return api_versions_response(header, {ApiKey.API_VERSIONS: (0, 3), ApiKey.METADATA: (0, 12)})
        if header.request_api_version > 0:
            return encode_response(header.correlation_id, header.request_api_key, header.request_api_version,
                                   MetadataResponse(cluster_id="c", controller_id=1))
        return "close"  # Metadata v0

    broker = scripted(answer)

    async def run() -> tuple[str, str]:
        failures = []
        for answered_first in (False, True):
            conn = connection(broker.port)
            await conn.connect()
            if answered_first:
                await conn.send(MetadataRequest(topics=[]))
            with pytest.raises(NetworkError) as failure:
                await conn.send(MetadataRequest(topics=[]), highest=0)
            failures.append(str(failure.value))
        return failures[0], failures[1]

    fresh, ordinary = asyncio.run(run())
    address = f"127.0.0.1:{broker.port}"
    assert fresh == (f"{address} closed the connection before answering anything but ApiVersions: if its "
                     f"listener's security protocol is SSL, SASL_PLAINTEXT or SASL_SSL, set that security.protocol "
                     f"(this client uses PLAINTEXT) with its ssl.* or sasl.* settings in the client's config (kfk's "
                     f"tools: --command-config FILE)")
    assert ordinary == f"{address} closed the connection"


def test_a_response_callback_is_called_once_per_request_with_its_response_or_the_error(scripted) -> None:
    def answer(header, request):
        if header.request_api_key == ApiKey.API_VERSIONS:
            return api_versions_response(header, {ApiKey.API_VERSIONS: (0, 3), ApiKey.METADATA: (0, 12)})
        if header.correlation_id == 3:
            return "close"
        response = MetadataResponse(cluster_id=f"answer-{header.correlation_id}", controller_id=1)
        return encode_response(header.correlation_id, header.request_api_key, header.request_api_version, response)

    broker = scripted(answer)
    calls: list[tuple[str, object]] = []

    async def run() -> None:
        conn = connection(broker.port)
        await conn.connect()
        done = asyncio.get_running_loop().create_future()

        def called(name: str, response, error) -> None:
            calls.append((name, response.cluster_id if response is not None else error))
            if len(calls) == 3:
                done.set_result(None)

        for name in ("first", "second", "third"):
            conn.send_request_then(MetadataRequest(topics=[]), lambda response, error, name=name:
                                   called(name, response, error))
        await asyncio.wait_for(done, 5)
        assert not conn.connected
        conn.send_request_then(MetadataRequest(topics=[]), lambda response, error: called("late", response, error))

    asyncio.run(run())
    assert [name for name, _ in calls] == ["first", "second", "third", "late"]
    assert calls[0][1] == "answer-1" and calls[1][1] == "answer-2"
    assert isinstance(calls[2][1], NetworkError) and isinstance(calls[3][1], NetworkError)


def test_connection_refused_is_a_network_error() -> None:
    with socket.create_server(("127.0.0.1", 0)) as placeholder:
        port = placeholder.getsockname()[1]

    async def run() -> None:
        with pytest.raises(NetworkError, match=f"127.0.0.1:{port}"):
            await connection(port).connect()

    asyncio.run(run())


def test_exponential_backoff_doubles_with_jitter_up_to_the_maximum() -> None:
    backoff = ExponentialBackoff(50, 1000)
    assert backoff.backoff_ms(0) == 0
    for attempts, base in [(1, 50), (2, 100), (3, 200), (5, 800), (6, 1000), (30, 1000)]:
        values = [backoff.backoff_ms(attempts) for _ in range(50)]
        assert all(base * 0.8 <= value <= base * 1.2 for value in values)


def test_network_client_backs_off_reconnects_and_fails_fast_when_no_bootstrap_answers() -> None:
    with socket.create_server(("127.0.0.1", 0)) as placeholder:
        port = placeholder.getsockname()[1]
    config = ClientConfig(ADMIN_CONFIG_DEF, "admin", {"bootstrap.servers": f"127.0.0.1:{port}",
                                                       "reconnect.backoff.ms": 100, "reconnect.backoff.max.ms": 100})

    async def run() -> None:
        network = NetworkClient(config)
        with pytest.raises(NetworkError, match="cannot connect to any bootstrap server"):
            await network.refresh_metadata([])
        assert network.bootstrap_unreachable()
        assert network.is_backing_off(-1)
        await network.close()

    asyncio.run(run())


@pytest.mark.integration
def test_negotiates_with_a_kfk_broker(kfk_broker: str) -> None:
    host, port = kfk_broker.rsplit(":", 1)

    async def run() -> None:
        conn = BrokerConnection(host, int(port), node_id=-1, client_id="t", client_software_name="kfk-tests",
                                client_software_version="1", request_timeout_ms=5000,
                                connection_setup_timeout_ms=5000)
        await conn.connect()
        assert conn.version(ApiKey.API_VERSIONS) == 5
        assert conn.supports(ApiKey.PRODUCE) and conn.supports(ApiKey.FETCH)
        response = await conn.send(MetadataRequest(topics=[]))
        assert len(response.brokers) == 1 and response.brokers[0].port == int(port)
        conn.close()

    asyncio.run(run())
