"""The request dispatcher: a registry of handlers, each declaring the version range it implements.

ApiVersions is answered from this registry (handlers/api_versions.py), so the broker advertises exactly what it can
serve. Registering an API twice is a programming error and fails at start-up.

Failure rules, as Apache Kafka applies them:
- a frame whose header cannot be read, an unknown API key, or a version outside what we serve (other than
  ApiVersions, which answers UNSUPPORTED_VERSION itself) closes the connection: the client cannot be sent a response
  it would understand;
- a body that does not parse closes the connection too (Kafka's InvalidRequestException path);
- a handler that raises a KafkaError or anything else is logged and the connection is closed, never the broker.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Awaitable, Callable, NamedTuple

from kfk.errors import KafkaError, ProtocolError
from kfk.protocol.headers import RequestHeader, decode_request_header, encode_response
from kfk.protocol.message import Buffer, Message
from kfk.protocol.messages import ApiKey, request_class

log = logging.getLogger("kfk.server.dispatch")


@dataclass(slots=True)
class RequestContext:
    """What a handler knows about the request besides its body."""

    header: RequestHeader
    api_version: int
    client_host: str
    client_port: int
    listener_name: str

    @property
    def client_id(self) -> str | None:
        return self.header.client_id


Handler = Callable[[RequestContext, Message], Awaitable[Message | None]]


class Registration(NamedTuple):
    api_key: ApiKey
    lowest_version: int
    highest_version: int
    handler: Handler
    request_class: type[Message]


class CloseConnection(Exception):
    """Raised to the network layer when the connection must be closed instead of answered."""


class Dispatcher:
    def __init__(self) -> None:
        self._registrations: dict[int, Registration] = {}

    def register(self, api_key: ApiKey, lowest_version: int, highest_version: int, handler: Handler) -> None:
        if api_key in self._registrations:
            raise ValueError(f"{api_key.name} is registered twice")
        cls = request_class(api_key)
        if not cls.LOWEST_VERSION <= lowest_version <= highest_version <= cls.HIGHEST_VERSION:
            raise ValueError(f"{api_key.name} versions {lowest_version}-{highest_version} are outside the schema")
        self._registrations[api_key] = Registration(ApiKey(api_key), lowest_version, highest_version, handler, cls)

    @property
    def registrations(self) -> list[Registration]:
        return sorted(self._registrations.values())

    def supports(self, api_key: int, api_version: int) -> bool:
        registration = self._registrations.get(api_key)
        return registration is not None and registration.lowest_version <= api_version <= registration.highest_version

    async def dispatch(
        self, frame: Buffer, client_host: str, client_port: int, listener_name: str
    ) -> list | None:
        """Handle one request frame (size prefix stripped; a bytearray the network layer gives up, or bytes).
        Returns the response chunks, or None when no response is due (acks=0 produce). Raises CloseConnection when
        the connection must be closed."""
        try:
            header, position = decode_request_header(frame)
        except KafkaError as error:
            raise CloseConnection(f"unreadable request header: {error}") from error
        api_key, api_version = header.request_api_key, header.request_api_version
        registration = self._registrations.get(api_key)
        if registration is None:
            raise CloseConnection(f"unsupported api key {api_key} from {client_host}:{client_port}")
        context = RequestContext(header, api_version, client_host, client_port, listener_name)
        if not registration.lowest_version <= api_version <= registration.highest_version:
            if api_key != ApiKey.API_VERSIONS:
                raise CloseConnection(f"unsupported version {api_version} of {registration.api_key.name}")
            # KIP-511: answer with UNSUPPORTED_VERSION at version 0, whatever the body holds.
            response = await registration.handler(context, None)
            return encode_response(header.correlation_id, api_key, 0, response)
        if isinstance(frame, bytearray):
            # Produce decodes from a writable view, so its records field is a view into the frame that the validator
            # edits in place (no copy between socket and file); every other request from immutable bytes, so the
            # handlers' bytes fields are ordinary hashable bytes (a copy of a small frame).
            frame = memoryview(frame) if api_key == ApiKey.PRODUCE else bytes(frame)
        try:
            request = registration.request_class.decode(frame, api_version, position)
        except ProtocolError as error:
            raise CloseConnection(f"malformed {registration.api_key.name} v{api_version}: {error}") from error
        try:
            response = await registration.handler(context, request)
        except CloseConnection:
            raise
        except Exception as error:  # a handler bug must cost one connection, never the broker
            log.exception("error handling %s v%d from %s", registration.api_key.name, api_version, client_host)
            raise CloseConnection(f"{registration.api_key.name} handler failed: {error}") from error
        if response is None:
            return None
        return encode_response(header.correlation_id, api_key, api_version, response)
