"""The principal a forwarding broker puts in an Envelope: Kafka's DefaultKafkaPrincipalBuilder bytes (an int16
version, then DefaultPrincipalData v0: compact strings type and name, token_authenticated, no tagged fields)."""

from __future__ import annotations

import pytest

from kfk.errors import PrincipalDeserializationError
from kfk.security.principal import KafkaPrincipal
from kfk.security.principal_serde import deserialize_principal, serialize_principal

ALICE = KafkaPrincipal("User", "alice")


def test_the_bytes_are_kafka_s_layout_and_read_back() -> None:
    data = serialize_principal(ALICE)
    assert data == b"\x00\x00" + b"\x05User" + b"\x06alice" + b"\x00" + b"\x00"
    assert deserialize_principal(data) == ALICE
    dn = KafkaPrincipal("User", "CN=alice,OU=eng,O=kfk-test,C=DE")
    assert deserialize_principal(serialize_principal(dn)) == dn


@pytest.mark.parametrize("data", [None, b"", b"\x00", b"\x00\x07\x05User\x06alice\x00\x00", b"\x00\x00\x09Us"])
def test_bytes_that_are_no_principal_are_refused(data: bytes | None) -> None:
    with pytest.raises(PrincipalDeserializationError):
        deserialize_principal(data)


def test_a_token_authenticated_principal_says_so() -> None:
    """A client that logged in with a delegation token: the flag travels to the controller, which refuses it token
    requests (the principal's identity, and so its ACLs, are the same)."""
    token_alice = KafkaPrincipal("User", "alice", token_authenticated=True)
    data = serialize_principal(token_alice)
    assert data == b"\x00\x00" + b"\x05User" + b"\x06alice" + b"\x01" + b"\x00"
    assert deserialize_principal(data).token_authenticated
    assert deserialize_principal(data) == ALICE
