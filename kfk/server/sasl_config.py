"""The SASL settings of one listener as the broker serves them: its enabled mechanisms, a fresh mechanism server
per authentication (PLAIN users from the JAAS config, SCRAM credentials from the cluster metadata, an OAUTHBEARER
token validator), connections.max.reauth.ms, connection.failed.authentication.delay.ms and
sasl.server.max.receive.size.

OAUTHBEARER validates signed JWTs against the JWKS at sasl.oauthbearer.jwks.endpoint.url (a file: URL or an
http(s) one, fetched off the event loop and refetched every sasl.oauthbearer.jwks.endpoint.refresh.ms) when that is
set; otherwise it accepts Kafka's unsecured development
tokens. (Kafka also wants its validator callback handler class named for JWKS validation; kfk never falls back to
unsecured tokens when a JWKS is configured.)
"""

from __future__ import annotations

import asyncio
import base64
import logging
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field

from kfk.config import BrokerConfig
from kfk.errors import InvalidConfigurationError
from kfk.metadata.image import MetadataImage
from kfk.security.sasl import OAUTHBEARER, PLAIN, SaslServer
from kfk.security.sasl.jaas import plain_users
from kfk.security.sasl.jwt import JwtValidator, PublicKey, parse_jwks
from kfk.security.sasl.oauthbearer import OAuthBearerServer, TokenValidator, UnsecuredJwsValidator
from kfk.security.sasl.plain import PlainServer
from kfk.metadata.delegation_tokens import token_hmac
from kfk.security.sasl.scram import (MIN_ITERATIONS, ScramCredential, ScramMechanism, ScramServer, TokenCredential,
                                     credential_from_password)
from kfk.security.sasl.settings import enabled_mechanisms, jaas_module, sasl_value

log = logging.getLogger("kfk.server.sasl")

ScramCredentials = Callable[[str, ScramMechanism], "ScramCredential | None"]
TokenCredentials = Callable[[str, ScramMechanism], "TokenCredential | None"]


def image_scram_credentials(image: Callable[[], MetadataImage | None]) -> ScramCredentials:
    """The credential lookup of SCRAM servers: the current metadata image's (None before there is one)."""
    def lookup(user: str, mechanism: ScramMechanism) -> ScramCredential | None:
        current = image()
        data = current.scram_credentials.get((user, int(mechanism))) if current is not None else None
        return None if data is None else ScramCredential(data.salt, data.stored_key, data.server_key,
                                                         data.iterations)
    return lookup


def image_token_credentials(image: Callable[[], MetadataImage | None], secret_key: str | None) -> TokenCredentials:
    """The delegation token lookup of SCRAM servers: a token of the current image that has not expired, checked
    against a credential derived from its HMAC (the client's password) at the mechanism's minimum iterations, as
    Kafka's brokers derive it. Each credential is derived once per token and mechanism (4,096 PBKDF2 rounds per
    authentication would be a denial of service waiting to happen) and forgotten with its token."""
    derived: dict[tuple[str, ScramMechanism], ScramCredential] = {}

    def lookup(token_id: str, mechanism: ScramMechanism) -> TokenCredential | None:
        current = image()
        token = current.delegation_tokens.get(token_id) if current is not None and secret_key else None
        if token is None or token.is_expired(int(time.time() * 1000)):
            return None
        if len(derived) > 2 * len(current.delegation_tokens) + 16:  # tokens that left the image
            for key in [key for key in derived if key[0] not in current.delegation_tokens]:
                del derived[key]
        credential = derived.get((token_id, mechanism))
        if credential is None:
            password = base64.b64encode(token_hmac(secret_key, token_id)).decode()
            credential = derived[(token_id, mechanism)] = credential_from_password(mechanism, password,
                                                                                   MIN_ITERATIONS)
        return TokenCredential(credential, token.owner.name, token.expiry_timestamp_ms)
    return lookup


class JwksKeys:
    """The keys of a JWKS URL, fetched with urllib in a worker thread (`refresh`) and read by the validator."""

    def __init__(self, url: str, refresh_ms: int) -> None:
        self.url = url
        self.refresh_ms = refresh_ms
        self.keys: dict[str | None, PublicKey] = {}
        self._fetched_at = float("-inf")

    def __call__(self) -> dict[str | None, PublicKey]:
        return self.keys

    @property
    def stale(self) -> bool:
        return time.monotonic() - self._fetched_at > self.refresh_ms / 1000

    def fetch(self) -> None:
        """Blocking: fetch and parse the set (keeping the old keys if that fails)."""
        try:
            with urllib.request.urlopen(self.url, timeout=10) as response:  # noqa: S310 - the operator's URL
                self.keys = parse_jwks(response.read())
        except (OSError, ValueError) as error:
            log.warning("cannot fetch the JWKS at %s: %s", self.url, error)
        self._fetched_at = time.monotonic()


def _max_receive_size(configured: int) -> int:
    """sasl.server.max.receive.size as a frame bound: -1 is Kafka's NetworkReceive.UNLIMITED (any size a 4-byte
    prefix can announce)."""
    return 2**31 - 1 if configured == -1 else configured


@dataclass
class SaslListenerConfig:
    listener_name: str
    enabled_mechanisms: list[str]
    connections_max_reauth_ms: int
    failed_authentication_delay_ms: int
    #: sasl.server.max.receive.size: the largest frame read while the connection authenticates.
    max_receive_size: int
    plain_users: dict[str, str] = field(default_factory=dict)
    scram_credentials: ScramCredentials | None = None
    token_credentials: TokenCredentials | None = None
    token_validator: TokenValidator | None = None
    jwks: JwksKeys | None = None

    def new_server(self, mechanism: str) -> SaslServer:
        if mechanism == PLAIN:
            return PlainServer(self.plain_users)
        if mechanism == OAUTHBEARER:
            assert self.token_validator is not None
            return OAuthBearerServer(self.token_validator)
        scram = ScramMechanism.from_mechanism_name(mechanism)
        lookup, tokens = self.scram_credentials, self.token_credentials
        return ScramServer(scram, lambda user: lookup(user, scram) if lookup is not None else None,
                           lambda token_id: tokens(token_id, scram) if tokens is not None else None)

    async def prepare(self, server: SaslServer) -> None:
        """Before a token is evaluated: an OAUTHBEARER server needs the JWKS keys (fetched when stale)."""
        if self.jwks is not None and server.mechanism == OAUTHBEARER and self.jwks.stale:
            await asyncio.to_thread(self.jwks.fetch)

    @staticmethod
    def from_broker_config(config: BrokerConfig, listener_name: str, scram_credentials: ScramCredentials,
                           token_credentials: TokenCredentials | None = None) -> SaslListenerConfig:
        """InvalidConfigurationError for what Kafka refuses at start-up too: an unknown mechanism, PLAIN without
        users in a JAAS config."""
        mechanisms = enabled_mechanisms(config, listener_name)
        listener = SaslListenerConfig(
            listener_name, mechanisms,
            connections_max_reauth_ms=int(sasl_value(config, listener_name, None, "connections.max.reauth.ms") or 0),
            failed_authentication_delay_ms=int(config.values.get("connection.failed.authentication.delay.ms") or 0),
            max_receive_size=_max_receive_size(config.listener_override(listener_name,
                                                                        "sasl.server.max.receive.size")),
            scram_credentials=scram_credentials, token_credentials=token_credentials)
        if PLAIN in mechanisms:
            module = jaas_module(config, listener_name, PLAIN)
            if module is None:
                raise InvalidConfigurationError(
                    f"listener {listener_name} enables PLAIN but has no JAAS config with its users: set "
                    f"listener.name.{listener_name.lower()}.plain.sasl.jaas.config (or sasl.jaas.config)")
            listener.plain_users = plain_users(module)
        if OAUTHBEARER in mechanisms:
            url = sasl_value(config, listener_name, OAUTHBEARER, "sasl.oauthbearer.jwks.endpoint.url")
            if url:
                listener.jwks = JwksKeys(str(url), int(sasl_value(
                    config, listener_name, OAUTHBEARER, "sasl.oauthbearer.jwks.endpoint.refresh.ms") or 3600000))
                audience = sasl_value(config, listener_name, OAUTHBEARER, "sasl.oauthbearer.expected.audience")
                listener.token_validator = JwtValidator(
                    listener.jwks,
                    expected_audience=audience.split(",") if isinstance(audience, str) else audience,
                    expected_issuer=sasl_value(config, listener_name, OAUTHBEARER,
                                               "sasl.oauthbearer.expected.issuer"),
                    sub_claim=str(sasl_value(config, listener_name, OAUTHBEARER, "sasl.oauthbearer.sub.claim.name")),
                    scope_claim=str(sasl_value(config, listener_name, OAUTHBEARER,
                                               "sasl.oauthbearer.scope.claim.name")),
                    clock_skew_seconds=int(sasl_value(config, listener_name, OAUTHBEARER,
                                                      "sasl.oauthbearer.clock.skew.seconds")))
            else:
                module = jaas_module(config, listener_name, OAUTHBEARER)
                listener.token_validator = UnsecuredJwsValidator(module.options if module is not None else {})
        return listener
