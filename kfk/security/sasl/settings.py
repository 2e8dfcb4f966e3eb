"""Where a broker's SASL settings come from: per listener and mechanism, as Kafka looks them up.

A SASL key is taken from `listener.name.<listener>.<mechanism>.<key>` (listener and mechanism in lower case, e.g.
`listener.name.sasl_plaintext.plain.sasl.jaas.config`), then `listener.name.<listener>.<key>`, then the bare
`<key>` (BrokerConfig.listener_override does the last two). The inter-broker client's credentials are the `username`/`password` options of the login module in the
inter-broker listener's JAAS config for `sasl.mechanism.inter.broker.protocol`, as in Kafka; a node's credentials
towards the controllers, those of the controller listener's JAAS config for `sasl.mechanism.controller.protocol`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kfk.config import BrokerConfig
from kfk.errors import InvalidConfigurationError
from kfk.security.sasl import (OAUTHBEARER, PLAIN, SCRAM_SHA_256, SCRAM_SHA_512, SUPPORTED_MECHANISMS, SaslClient)
from kfk.security.sasl.jaas import LoginModule, parse_jaas_config
from kfk.security.sasl.oauthbearer import OAuthBearerClient, unsecured_token
from kfk.security.sasl.plain import PlainClient
from kfk.security.sasl.scram import ScramClient, ScramMechanism

SASL_PROTOCOLS = frozenset({"SASL_PLAINTEXT", "SASL_SSL"})


def sasl_value(config: BrokerConfig, listener_name: str, mechanism: str | None, key: str) -> Any:
    """A SASL key for one listener (and mechanism): the most specific `listener.name.` form set, else the bare key."""
    if mechanism is not None:
        value = config.listener_override(listener_name, f"{mechanism.lower()}.{key}")
        if value is not None:
            return value
    return config.listener_override(listener_name, key)


def jaas_module(config: BrokerConfig, listener_name: str, mechanism: str) -> LoginModule | None:
    """The login module of the listener's JAAS config for `mechanism`; None if there is no JAAS config."""
    text = sasl_value(config, listener_name, mechanism, "sasl.jaas.config")
    if not text:
        return None
    try:
        modules = parse_jaas_config(str(text))
    except ValueError as error:
        raise InvalidConfigurationError(f"sasl.jaas.config of listener {listener_name}: {error}") from None
    return modules[0]


def enabled_mechanisms(config: BrokerConfig, listener_name: str) -> list[str]:
    """sasl.enabled.mechanisms of a listener; InvalidConfigurationError for one kfk does not implement (Kafka's
    default, GSSAPI, needs Kerberos)."""
    value = sasl_value(config, listener_name, None, "sasl.enabled.mechanisms")
    mechanisms = [item.strip() for item in (value.split(",") if isinstance(value, str) else value or []) if item.strip()]
    unsupported = [mechanism for mechanism in mechanisms if mechanism not in SUPPORTED_MECHANISMS]
    if unsupported or not mechanisms:
        raise InvalidConfigurationError(
            f"listener {listener_name}: sasl.enabled.mechanisms {','.join(mechanisms) or '(empty)'} names a mechanism "
            f"kfk does not implement; kfk has {', '.join(SUPPORTED_MECHANISMS)}")
    return mechanisms


def sasl_client(mechanism: str, username: str | None, password: str | None, *, token: str | None = None,
                jaas: LoginModule | None = None) -> SaslClient:
    """A client for `mechanism` with these credentials (from sasl.username/sasl.password or a JAAS module's
    username/password options); OAUTHBEARER takes a token, or makes an unsecured one from the JAAS options
    unsecuredLoginStringClaim_sub and unsecuredLoginLifetimeSeconds (Java's unsecured login handler). A SCRAM JAAS
    module with tokenauth="true" authenticates with a delegation token: its username is the token id and its password
    the token's HMAC in base64, as Java's ScramLoginModule takes them."""
    options = jaas.options if jaas is not None else {}
    username = username if username is not None else options.get("username")
    password = password if password is not None else options.get("password")
    if mechanism == OAUTHBEARER:
        if token is None:
            subject = options.get("unsecuredLoginStringClaim_sub")
            if subject is None:
                raise InvalidConfigurationError("OAUTHBEARER needs a token (sasl.oauthbearer.token) or the JAAS option "
                                                "unsecuredLoginStringClaim_sub for an unsecured one")
            token = unsecured_token(subject, int(options.get("unsecuredLoginLifetimeSeconds", "3600")))
        return OAuthBearerClient(token)
    if mechanism not in (PLAIN, SCRAM_SHA_256, SCRAM_SHA_512):
        raise InvalidConfigurationError(f"SASL mechanism {mechanism} is not one kfk implements "
                                        f"({', '.join(SUPPORTED_MECHANISMS)})")
    if not username or password is None:
        raise InvalidConfigurationError(f"SASL {mechanism} needs a user name and a password (sasl.username and "
                                        f"sasl.password, or username and password in sasl.jaas.config)")
    if mechanism == PLAIN:
        return PlainClient(username, password)
    extensions = {"tokenauth": "true"} if options.get("tokenauth", "").lower() == "true" else None
    return ScramClient(ScramMechanism.from_mechanism_name(mechanism), username, password, extensions)


def inter_broker_sasl(config: BrokerConfig) -> Callable[[], SaslClient] | None:
    """A factory of SASL clients for this broker's connections to the other brokers' inter-broker listener, None
    when that listener does not use SASL."""
    return _listener_client_sasl(config, config.inter_broker_listener, "sasl.mechanism.inter.broker.protocol",
                                 "the inter-broker listener")


def controller_sasl(config: BrokerConfig) -> Callable[[], SaslClient] | None:
    """A factory of SASL clients for this node's connections to the controllers (Raft requests, broker registration
    and heartbeats, AlterPartition, forwarding): the first of controller.listener.names, whose credentials are its
    JAAS config's for sasl.mechanism.controller.protocol, as in Kafka. None when that listener does not use SASL (or
    there is no controller listener: the single-node default talks to its controller in-process)."""
    if not config.controller_listener_names:
        return None
    return _listener_client_sasl(config, config.controller_listener_names[0].strip().upper(),
                                 "sasl.mechanism.controller.protocol", "the controller listener")


def _listener_client_sasl(config: BrokerConfig, listener_name: str, mechanism_key: str,
                          what: str) -> Callable[[], SaslClient] | None:
    """SASL clients for a node's own connections to `listener_name` (mechanism from `mechanism_key`), None when the
    listener does not use SASL; InvalidConfigurationError at start-up when the credentials are missing."""
    if config.listener_security_protocol(listener_name) not in SASL_PROTOCOLS:
        return None
    mechanism = config.values[mechanism_key]
    jaas = jaas_module(config, listener_name, mechanism)
    try:
        sasl_client(mechanism, None, None, jaas=jaas)  # fails now, at start-up, if the credentials are missing
    except InvalidConfigurationError as error:
        raise InvalidConfigurationError(f"{what} {listener_name} uses SASL ({mechanism_key}={mechanism}): "
                                        f"{error}") from None
    return lambda: sasl_client(mechanism, None, None, jaas=jaas)
