"""The SASL exchange on the wire with kfk's own codec, as Kafka's broker answers it: what is served before
authentication (ApiVersions, SaslHandshake, SaslAuthenticate; anything else closes the connection), an unsupported
mechanism, the raw tokens after a v0 SaslHandshake, ILLEGAL_SASL_STATE where no exchange is under way,
re-authentication (KIP-368: the session lifetime, a new exchange on the same connection, the principal that may not
change, a session that ends closes the connection), malformed tokens (hypothesis): the broker closes that
connection and keeps serving others; a frame larger than sasl.server.max.receive.size before authentication closes
the connection before its body is read (after authentication socket.request.max.bytes bounds requests again), and a
malformed PLAIN token is answered with Kafka's message. tests/interop/test_sasl_wire_agrees.py makes the same checks
against Apache Kafka."""

from __future__ import annotations

import socket
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kfk.client import Admin
from kfk.client.structs import UserScramCredentialUpsertion
from kfk.errors import ErrorCode
from kfk.protocol.messages import ApiKey
from kfk.protocol.messages.metadata import MetadataRequest
from kfk.protocol.messages.sasl_authenticate import SaslAuthenticateRequest
from kfk.protocol.messages.sasl_handshake import SaslHandshakeRequest
from kfk.security.sasl.scram import ScramClient, ScramMechanism
from kfk.testing.broker import BrokerProcess, start_broker

from tests.integration.wire import api_versions_request, connect, is_closed, read_frame, request
from tests.security.test_sasl_clients import PLAIN_FAILURE, kfk_config, sasl_overrides

pytestmark = pytest.mark.integration

ENABLED = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"]


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory):
    process = start_broker(tmp_path_factory.mktemp("sasl-wire"), sasl_overrides(), listener_name="SASL_PLAINTEXT")
    try:
        with Admin(kfk_config(process.bootstrap_servers, "PLAIN", "admin", "admin-secret")) as admin:
            assert admin.alter_user_scram_credentials(
                [UserScramCredentialUpsertion("alice", "SCRAM-SHA-256", 4096, "alice-secret")]) == {"alice": None}
        yield process
    finally:
        process.stop()


def plain_login(sock: socket.socket, user: str = "alice", password: str = "alice-secret", version: int = 2):
    handshake = request(sock, SaslHandshakeRequest(mechanism="PLAIN"), 1)
    assert handshake.error_code == ErrorCode.NONE
    return request(sock, SaslAuthenticateRequest(auth_bytes=f"\0{user}\0{password}".encode()), version)


def metadata_works(sock: socket.socket) -> bool:
    return len(request(sock, MetadataRequest(topics=[]), 12).brokers) == 1


def test_only_the_authentication_apis_before_authentication(broker: BrokerProcess) -> None:
    with connect(broker.bootstrap_servers) as sock:
        versions = {entry.api_key: (entry.min_version, entry.max_version)
                    for entry in request(sock, api_versions_request(), 3).api_keys}
        assert versions[ApiKey.SASL_HANDSHAKE] == (0, 1) and versions[ApiKey.SASL_AUTHENTICATE] == (0, 2)
        sock.sendall(_frame(MetadataRequest(topics=[]), 12))
        assert read_frame(sock) is None
    with connect(broker.bootstrap_servers) as sock:  # SaslAuthenticate without a SaslHandshake first
        sock.sendall(_frame(SaslAuthenticateRequest(auth_bytes=b"\0alice\0alice-secret"), 2))
        assert read_frame(sock) is None


def test_unsupported_mechanism_lists_the_enabled_ones_then_closes(broker: BrokerProcess) -> None:
    with connect(broker.bootstrap_servers) as sock:
        response = request(sock, SaslHandshakeRequest(mechanism="GSSAPI"), 1)
        assert response.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM
        assert list(response.mechanisms) == ENABLED
        assert is_closed(sock)


def test_plain_success_then_requests_are_served(broker: BrokerProcess) -> None:
    with connect(broker.bootstrap_servers) as sock:
        response = plain_login(sock)
        assert (response.error_code, response.session_lifetime_ms) == (ErrorCode.NONE, 0)
        assert metadata_works(sock)
        again = request(sock, SaslAuthenticateRequest(auth_bytes=b"\0alice\0alice-secret"), 2)
        assert again.error_code == ErrorCode.ILLEGAL_SASL_STATE
        assert again.error_message == "SaslAuthenticate request received after successful authentication"


def test_plain_failure_answers_then_closes(broker: BrokerProcess) -> None:
    with connect(broker.bootstrap_servers) as sock:
        response = plain_login(sock, password="nope", version=1)
        assert (response.error_code, response.error_message) == (ErrorCode.SASL_AUTHENTICATION_FAILED, PLAIN_FAILURE)
        assert is_closed(sock)


def test_raw_tokens_after_a_v0_handshake(broker: BrokerProcess) -> None:
    """Before KIP-152 the tokens follow SaslHandshake v0 as bare size-prefixed frames, the answers too."""
    with connect(broker.bootstrap_servers) as sock:
        assert request(sock, SaslHandshakeRequest(mechanism="SCRAM-SHA-256"), 0).error_code == ErrorCode.NONE
        client = ScramClient(ScramMechanism.SCRAM_SHA_256, "alice", "alice-secret")
        sock.sendall(_raw(client.initial_response()))
        final = client.evaluate_challenge(read_frame(sock))
        sock.sendall(_raw(final))
        assert client.evaluate_challenge(read_frame(sock)) is None and client.complete
        assert metadata_works(sock)
    with connect(broker.bootstrap_servers) as sock:
        assert request(sock, SaslHandshakeRequest(mechanism="PLAIN"), 0).error_code == ErrorCode.NONE
        sock.sendall(_raw(b"\0alice\0wrong"))
        assert read_frame(sock) is None  # no way to say why: the connection just closes


#: Over sasl.server.max.receive.size (512 KiB), and the largest socket.request.max.bytes (100 MiB) lets through.
OVERSIZED_FRAMES = [600 * 1024, 100 * 1024 * 1024]
MALFORMED_PLAIN_MESSAGE = "Invalid SASL/PLAIN response: expected 3 tokens, got 2"


def oversized_handshake_closes(address: str, size: int) -> bool:
    """Announce a SaslHandshake frame of `size` bytes and send only its header: True if the broker closes the
    connection at once (it cannot have waited for the body, which never comes); a broker that reads on waits, and
    the socket's timeout fails the caller."""
    header = _frame(SaslHandshakeRequest(mechanism="PLAIN"), 1)[4:]
    with connect(address) as sock:
        sock.sendall(size.to_bytes(4, "big") + header)
        return is_closed(sock)


def malformed_plain_answer(address: str) -> tuple[int, str | None, bool]:
    """SaslAuthenticate with a PLAIN token of two fields (no authorization id NUL): the error code, the message and
    whether the broker then closed the connection."""
    with connect(address) as sock:
        assert request(sock, SaslHandshakeRequest(mechanism="PLAIN"), 1).error_code == ErrorCode.NONE
        response = request(sock, SaslAuthenticateRequest(auth_bytes=b"alice\0alice-secret"), 2)
        return response.error_code, response.error_message, is_closed(sock)


def plain_login_works(address: str) -> bool:
    with connect(address) as sock:
        return plain_login(sock).error_code == ErrorCode.NONE and metadata_works(sock)


@pytest.mark.parametrize("size", OVERSIZED_FRAMES)
def test_a_frame_over_sasl_server_max_receive_size_closes_before_its_body(broker: BrokerProcess, size: int) -> None:
    assert oversized_handshake_closes(broker.bootstrap_servers, size)
    assert "Failing SASL authentication due to invalid receive size" in broker.output()
    assert plain_login_works(broker.bootstrap_servers)  # the broker serves on


def test_after_authentication_requests_are_bounded_by_socket_request_max_bytes(broker: BrokerProcess) -> None:
    """The SASL bound ends with the authentication: an authenticated client's 600 KiB request is read (a Metadata
    request padded with trailing bytes, which the broker ignores, as Kafka does)."""
    with connect(broker.bootstrap_servers) as sock:
        assert plain_login(sock).error_code == ErrorCode.NONE
        frame = _frame(MetadataRequest(topics=[]), 12, correlation_id=9)
        padded = frame[4:] + bytes(OVERSIZED_FRAMES[0])
        sock.sendall(len(padded).to_bytes(4, "big") + padded)
        answer = read_frame(sock)
        assert answer is not None and int.from_bytes(answer[:4], "big") == 9


def test_a_listeners_sasl_server_max_receive_size_also_bounds_reauthentication(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    """listener.name.<listener>.sasl.server.max.receive.size=8192: a 10000-byte frame closes the connection before
    authentication, and again during a re-authentication (from its SaslHandshake on, as Kafka reads those frames
    with the same bound); between the two, an authenticated connection's requests may be larger."""
    process = start_broker(tmp_path_factory.mktemp("sasl-receive-size"), sasl_overrides(**{
        "listener.name.sasl_plaintext.sasl.server.max.receive.size": "8192",
        "connections.max.reauth.ms": "600000"}), listener_name="SASL_PLAINTEXT")
    try:
        assert oversized_handshake_closes(process.bootstrap_servers, 10000)
        with connect(process.bootstrap_servers) as sock:
            assert plain_login(sock).error_code == ErrorCode.NONE
            metadata = _frame(MetadataRequest(topics=[]), 12, correlation_id=9)[4:] + bytes(10000)
            sock.sendall(len(metadata).to_bytes(4, "big") + metadata)
            assert read_frame(sock) is not None
            assert request(sock, SaslHandshakeRequest(mechanism="PLAIN"), 1).error_code == ErrorCode.NONE
            login = _frame(SaslAuthenticateRequest(auth_bytes=b"\0alice\0alice-secret"), 2)[4:] + bytes(10000)
            sock.sendall(len(login).to_bytes(4, "big") + login)  # a good login, in a frame too large
            assert is_closed(sock)
    finally:
        process.stop()


def test_a_malformed_plain_token_gets_kafkas_message(broker: BrokerProcess) -> None:
    assert malformed_plain_answer(broker.bootstrap_servers) == (
        ErrorCode.SASL_AUTHENTICATION_FAILED, MALFORMED_PLAIN_MESSAGE, True)


def test_handshake_on_a_plaintext_listener_is_illegal(kfk_broker: str) -> None:
    with connect(kfk_broker) as sock:
        response = request(sock, SaslHandshakeRequest(mechanism="PLAIN"), 1)
        assert (response.error_code, list(response.mechanisms)) == (ErrorCode.ILLEGAL_SASL_STATE, [])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(mechanism=st.sampled_from(ENABLED), tokens=st.lists(st.binary(max_size=300), min_size=1, max_size=3),
       raw=st.booleans())
def test_malformed_tokens_close_that_connection_only(broker: BrokerProcess, mechanism: str, tokens: list[bytes],
                                                     raw: bool) -> None:
    with connect(broker.bootstrap_servers) as bystander:
        assert plain_login(bystander).error_code == ErrorCode.NONE
        with connect(broker.bootstrap_servers) as sock:
            assert request(sock, SaslHandshakeRequest(mechanism=mechanism), 0 if raw else 1).error_code \
                == ErrorCode.NONE
            for token in tokens:
                sock.sendall(_raw(token) if raw else _frame(SaslAuthenticateRequest(auth_bytes=token), 2))
                if _closed_after_reading(sock):
                    break
            # Garbage never authenticates: a request that needs authentication gets no answer, the connection closes.
            try:
                sock.sendall(_frame(MetadataRequest(topics=[]), 12))
            except ConnectionError:
                pass
            assert _closed_after_reading(sock, until_closed=True)
        assert metadata_works(bystander)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(frame=st.binary(min_size=0, max_size=200))
def test_garbage_before_the_handshake_closes_that_connection_only(broker: BrokerProcess, frame: bytes) -> None:
    """Any frame that is not ApiVersions, SaslHandshake or a well-formed SaslAuthenticate-after-handshake, as the
    first thing on a connection: the broker closes it (or answers an ApiVersions it could read) and serves others."""
    with connect(broker.bootstrap_servers) as bystander:
        assert plain_login(bystander).error_code == ErrorCode.NONE
        with connect(broker.bootstrap_servers) as sock:
            sock.sendall(_raw(frame))
            if len(frame) >= 2 and int.from_bytes(frame[:2], "big") == ApiKey.API_VERSIONS:
                if not _closed_after_reading(sock):  # a readable ApiVersions: answered, then nothing else
                    sock.sendall(_frame(MetadataRequest(topics=[]), 12))
            assert _closed_after_reading(sock, until_closed=True)
        assert metadata_works(bystander)


def _closed_after_reading(sock: socket.socket, until_closed: bool = False) -> bool:
    """Read answers (a challenge, or a failure then the close); True once the broker has closed the connection."""
    try:
        while (frame := read_frame(sock)) is not None:
            if not until_closed:
                return False
    except ConnectionError:
        pass
    return True


def test_reauthentication(tmp_path_factory: pytest.TempPathFactory) -> None:
    """connections.max.reauth.ms=1500: the lifetime comes back in SaslAuthenticate v1+; the client authenticates
    again on the same connection; after the session ends unrenewed, the next request closes the connection."""
    process = start_broker(tmp_path_factory.mktemp("sasl-reauth"), sasl_overrides(**{
        "connections.max.reauth.ms": "1500"}), listener_name="SASL_PLAINTEXT")
    try:
        with connect(process.bootstrap_servers) as sock:
            assert plain_login(sock, version=1).session_lifetime_ms == 1500
            time.sleep(1)
            assert plain_login(sock).session_lifetime_ms == 1500  # renewed in time
            time.sleep(1)
            assert metadata_works(sock)  # 2 s after the first login, 1 s after the renewal
            time.sleep(1)
            sock.sendall(_frame(MetadataRequest(topics=[]), 12))
            assert read_frame(sock) is None
        with connect(process.bootstrap_servers) as sock:  # the principal may not change
            assert plain_login(sock).error_code == ErrorCode.NONE
            response = plain_login(sock, "admin", "admin-secret")
            assert response.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
            assert response.error_message == ("Cannot change principals during re-authentication from "
                                              "User.alice: User.admin")
            assert is_closed(sock)
    finally:
        process.stop()


def _frame(message, version: int, correlation_id: int = 7) -> bytes:
    from kfk.protocol.headers import RequestHeader, encode_request

    return encode_request(RequestHeader(request_api_key=message.API_KEY, request_api_version=version,
                                        correlation_id=correlation_id, client_id="kfk-tests"), message)


def _raw(token: bytes) -> bytes:
    return len(token).to_bytes(4, "big") + token
