"""Apache Kafka 4.0.2 on a SASL_PLAINTEXT listener, checked on the wire as tests/security/test_sasl_wire.py checks
kfk, so that the two brokers are seen to agree: a frame over sasl.server.max.receive.size before authentication
closes the connection without the broker waiting for its body, and the broker serves on; a malformed PLAIN token is
answered with PlainSaslServer's own message, then the connection closes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kfk.errors import ErrorCode
from kfk.testing.apache_kafka import ApacheKafka, ApacheKafkaStartError
from kfk.testing.ports import free_port

from tests.security.test_sasl_clients import PLAIN_JAAS
from tests.security.test_sasl_wire import (MALFORMED_PLAIN_MESSAGE, OVERSIZED_FRAMES, malformed_plain_answer,
                                           oversized_handshake_closes, plain_login_works)

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def sasl_address(tmp_path_factory: pytest.TempPathFactory, kafka_classpath_fixture: str) -> Iterator[str]:
    """The SASL_PLAINTEXT listener (PLAIN, the users of PLAIN_JAAS) of an Apache Kafka node whose PLAINTEXT listener
    stays the one ApacheKafka watches for readiness."""
    port, sasl_port, controller_port = free_port(), free_port(), free_port()
    node = ApacheKafka(Path(tmp_path_factory.mktemp("apache-kafka-sasl")), port=port, controller_port=controller_port,
                       config={
                           "listeners": f"PLAINTEXT://127.0.0.1:{port},SASL_PLAINTEXT://127.0.0.1:{sasl_port},"
                                        f"CONTROLLER://127.0.0.1:{controller_port}",
                           "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port},"
                                                   f"SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
                           "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,"
                                                             "SASL_PLAINTEXT:SASL_PLAINTEXT",
                           "sasl.enabled.mechanisms": "PLAIN",
                           "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS})
    try:
        node.start()
    except ApacheKafkaStartError as error:
        pytest.fail(f"Apache Kafka could not be started: {error}")
    try:
        yield f"127.0.0.1:{sasl_port}"
    finally:
        node.stop()


@pytest.mark.parametrize("size", OVERSIZED_FRAMES)
def test_a_frame_over_sasl_server_max_receive_size_closes_before_its_body(sasl_address: str, size: int) -> None:
    assert oversized_handshake_closes(sasl_address, size)
    assert plain_login_works(sasl_address)


def test_a_malformed_plain_token_gets_plain_sasl_servers_message(sasl_address: str) -> None:
    assert malformed_plain_answer(sasl_address) == (ErrorCode.SASL_AUTHENTICATION_FAILED, MALFORMED_PLAIN_MESSAGE,
                                                    True)
