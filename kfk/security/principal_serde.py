"""A KafkaPrincipal as bytes, for a broker that forwards a client's request to the controller in an Envelope
(KIP-590): the controller must authorize the request as the client, not as the broker that carries it.

The bytes are Kafka's DefaultKafkaPrincipalBuilder's: an int16 schema version, then DefaultPrincipalData (type, name,
token_authenticated: whether the client authenticated with a delegation token, which may not manage tokens) at that
version.
"""

from __future__ import annotations

from kfk.errors import KafkaError, PrincipalDeserializationError
from kfk.protocol.messages.default_principal_data import DefaultPrincipalData
from kfk.protocol.primitives import INT16
from kfk.security.principal import KafkaPrincipal

#: The DefaultPrincipalData version written (the schema's only one).
PRINCIPAL_DATA_VERSION = DefaultPrincipalData.HIGHEST_VERSION


def serialize_principal(principal: KafkaPrincipal) -> bytes:
    data = DefaultPrincipalData(type=principal.principal_type, name=principal.name,
                                token_authenticated=principal.token_authenticated)
    return INT16.pack(PRINCIPAL_DATA_VERSION) + data.encode(PRINCIPAL_DATA_VERSION)


def deserialize_principal(data: bytes | None) -> KafkaPrincipal:
    """PrincipalDeserializationError (PRINCIPAL_DESERIALIZATION_FAILURE) for bytes that are not a principal."""
    if data is None or len(data) < INT16.size:
        raise PrincipalDeserializationError("the forwarded request carries no principal")
    version = INT16.unpack_from(data, 0)[0]
    try:
        decoded = DefaultPrincipalData.decode(data, version, INT16.size)
    except KafkaError as error:
        raise PrincipalDeserializationError(f"the forwarded principal does not parse: {error}") from None
    return KafkaPrincipal(decoded.type, decoded.name, decoded.token_authenticated)
