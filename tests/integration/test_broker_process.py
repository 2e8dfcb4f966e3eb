"""The broker process itself: start-up, ApiVersions negotiation, bad input, clean shutdown."""

from __future__ import annotations

import socket

import pytest

from kfk.errors import ErrorCode
from kfk.protocol.messages import ApiKey
from kfk.protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from kfk.protocol.primitives import INT32
from tests.integration.wire import api_versions_request, connect, is_closed, read_frame, request

pytestmark = pytest.mark.integration


def test_api_versions_lists_what_the_broker_serves(kfk_broker: str) -> None:
    with connect(kfk_broker) as sock:
        for version in (0, 1, 2, 3, 4, 5):
            response = request(sock, ApiVersionsRequest(client_software_name="kfk-tests",
                                                         client_software_version="1"), version, version + 1)
            assert response.error_code == ErrorCode.NONE
            ranges = {entry.api_key: (entry.min_version, entry.max_version) for entry in response.api_keys}
            assert ranges[ApiKey.API_VERSIONS] == (0, 5)


def test_api_versions_of_an_unknown_version_answers_v0_with_unsupported_version(kfk_broker: str) -> None:
    # A future ApiVersions v9 (flexible, header v2): the broker cannot read its body, but must answer at v0.
    body = b"\x00" * 3
    header = (18).to_bytes(2, "big") + (9).to_bytes(2, "big") + (7).to_bytes(4, "big") + b"\x00\x04test" + b"\x00"
    with connect(kfk_broker) as sock:
        sock.sendall(INT32.pack(len(header) + len(body)) + header + body)
        frame = read_frame(sock)
    assert frame is not None
    assert int.from_bytes(frame[:4], "big") == 7
    response = ApiVersionsResponse.decode(frame, 0, 4)
    assert response.error_code == ErrorCode.UNSUPPORTED_VERSION
    assert [(e.api_key, e.min_version, e.max_version) for e in response.api_keys] == [(18, 0, 5)]


@pytest.mark.parametrize(
    "frame",
    [
        b"\x00\x00\x00\x03abc",  # shorter than a request header
        b"\x00\x00\x00\x0a" + b"\x7f\x7f" + b"\x00" * 8,  # unknown api key
        b"\xff\xff\xff\xf0",  # negative size
        b"\x7f\x00\x00\x00",  # larger than socket.request.max.bytes
        b"\x00\x00\x00\x0c" + b"\x00\x12\x00\x03" + b"\x00\x00\x00\x01" + b"\x00\x05ab",  # client id runs past the end
    ],
    ids=["short-header", "unknown-api-key", "negative-size", "oversized", "truncated-client-id"],
)
def test_garbage_closes_that_connection_and_the_broker_keeps_serving(kfk_broker: str, frame: bytes) -> None:
    with connect(kfk_broker) as bad:
        bad.sendall(frame)
        assert is_closed(bad)
    with connect(kfk_broker) as good:
        assert request(good, api_versions_request(), 3).error_code == ErrorCode.NONE


def test_sigterm_stops_cleanly_and_removes_the_pid_file(kfk_broker_process) -> None:
    pid_file = kfk_broker_process.log_dir / "kfk.pid"
    assert pid_file.read_text().strip() == str(kfk_broker_process.process.pid)
    assert kfk_broker_process.stop() == 0
    assert not pid_file.exists()
    assert "stopped" in kfk_broker_process.output()
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", kfk_broker_process.port), timeout=1).close()
