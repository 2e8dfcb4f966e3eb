"""Client configuration: Kafka's producer, consumer and admin property names, types and defaults.

Clients take a mapping with Kafka's dotted names (``{"bootstrap.servers": "...", "linger.ms": 5}``, the way
confluent-kafka and the Java client are configured) and/or keyword arguments with the same names in snake_case
(``linger_ms=5``). Both go through kfk.config's ConfigDef, the parser and validators the broker's configs use, so a
bad value fails with the same InvalidConfigurationError naming the key; an unknown name fails too (a typo in a
client config silently ignored is a classic Kafka trap).

Defaults are Apache Kafka 4.0's, except isolation.level: there kfk's client follows librdkafka's default
(read_committed, where the Java client reads uncommitted), because confluent-kafka is the Python client kfk's users
know, and a consumer that by default returns records of aborted transactions surprises nobody but hurts everybody.
Keys that only make sense in the JVM (serializer classes, interceptors, metric
reporters) are not accepted; key/value serializers are plain Python callables passed as arguments instead.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Callable, Mapping
from typing import Any

from kfk import __version__
from kfk.common.constants import INT32_MAX
from kfk.config import (ACCEPTED_BROKER_KEYS, ConfigDef, ConfigKey, ConfigType, at_least, between, list_of, one_of,
                        one_of_case_insensitive)
from kfk.config_support import CLIENT_UNSUPPORTED
from kfk.errors import InvalidConfigurationError
from kfk.protocol.connection import DEFAULT_MAX_RESPONSE_BYTES
from kfk.security.sasl import SaslClient
from kfk.security.sasl.jaas import parse_jaas_config
from kfk.security.sasl.settings import sasl_client

__all__ = [
    "ClientConfig",
    "PRODUCER_CONFIG_DEF",
    "CONSUMER_CONFIG_DEF",
    "ADMIN_CONFIG_DEF",
    "CLIENT_SOFTWARE_NAME",
    "CLIENT_SOFTWARE_VERSION",
    "max_response_bytes",
    "parse_bootstrap_servers",
    "group_protocol",
]

_log = logging.getLogger(__name__)

CLIENT_SOFTWARE_NAME = "kfk-python"
CLIENT_SOFTWARE_VERSION = __version__

ASSIGNORS = ("range", "roundrobin", "sticky", "cooperative-sticky")
COMPRESSION_TYPES = ("none", "gzip", "snappy", "lz4", "zstd")

_COMMON = [
    ConfigKey("bootstrap.servers", ConfigType.LIST, ["localhost:9092"], None,
              "host:port pairs used to discover the cluster; any one reachable broker is enough."),
    ConfigKey("client.id", ConfigType.STRING, "", None, "Sent with every request, for the brokers' logs and quotas."),
    ConfigKey("client.rack", ConfigType.STRING, "", None, "The client's rack (KIP-392 closest-replica fetching)."),
    ConfigKey("request.timeout.ms", ConfigType.INT, 30_000, at_least(0),
              "How long to wait for a response before failing the request and closing the connection."),
    ConfigKey("socket.connection.setup.timeout.ms", ConfigType.LONG, 10_000, at_least(0),
              "How long a TCP connect (and the ApiVersions handshake) may take."),
    ConfigKey("reconnect.backoff.ms", ConfigType.LONG, 50, at_least(0),
              "The first wait before reconnecting to a broker after a failure."),
    ConfigKey("reconnect.backoff.max.ms", ConfigType.LONG, 1000, at_least(0),
              "The reconnect wait doubles per failure (with 20% jitter) up to this."),
    ConfigKey("retry.backoff.ms", ConfigType.LONG, 100, at_least(0), "The first wait before retrying a request."),
    ConfigKey("retry.backoff.max.ms", ConfigType.LONG, 1000, at_least(0),
              "Retry waits grow exponentially (with jitter) up to this."),
    ConfigKey("metadata.max.age.ms", ConfigType.LONG, 300_000, at_least(0),
              "Refresh cluster metadata at least this often, even without a sign that it changed."),
    ConfigKey("connections.max.idle.ms", ConfigType.LONG, 540_000, None, "Close connections idle this long."),
    ConfigKey("receive.message.max.bytes", ConfigType.INT, DEFAULT_MAX_RESPONSE_BYTES, at_least(1000),
              "librdkafka's: the largest response accepted from a broker (a larger one closes the connection). A "
              "response's buffer is allocated whole from its size prefix, so this bounds what a broken or hostile "
              "broker can make the client allocate. A consumer raises it to fetch.max.bytes + 512 unless it is set; "
              "set, it must be at least that."),
    ConfigKey("security.protocol", ConfigType.STRING, "PLAINTEXT", one_of("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"),
              "PLAINTEXT; SSL: TLS with the ssl.* settings (PEM key and trust stores); SASL_PLAINTEXT: authenticate "
              "every connection with sasl.mechanism; SASL_SSL: both."),
    ConfigKey("sasl.mechanism", ConfigType.STRING, "GSSAPI", None,
              "PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER (kfk has no GSSAPI, Kafka's default)."),
    ConfigKey("sasl.username", ConfigType.STRING, None, None,
              "The SASL user (librdkafka's name; Java clients put it in sasl.jaas.config)."),
    ConfigKey("sasl.password", ConfigType.PASSWORD, None, None, "The SASL user's password."),
    ConfigKey("sasl.jaas.config", ConfigType.PASSWORD, None, None,
              "Java style: `org.apache.kafka.common.security.plain.PlainLoginModule required username=\"alice\" "
              "password=\"...\";` (ScramLoginModule for SCRAM; OAuthBearerLoginModule with "
              "unsecuredLoginStringClaim_sub for an unsecured development token)."),
    ConfigKey("sasl.oauthbearer.token", ConfigType.PASSWORD, None, None,
              "kfk's own: the bearer token (a JWT) OAUTHBEARER sends, e.g. one signed by your identity provider."),
]

#: The Java client's ssl.* settings that a Python client can honour (kfk.security.tls reads them), with the same
#: types and defaults as the broker's: PEM stores only (ssl.keystore.type/ssl.truststore.type=PEM), TLS versions,
#: TLS 1.2 cipher suites, the host name check (ssl.endpoint.identification.algorithm=https, empty to turn it off).
#: The store passwords and ssl.protocol are accepted for properties files written for Java clients; PEM stores do
#: not use them.
SSL_CLIENT_CONFIGS = ("ssl.cipher.suites", "ssl.enabled.protocols", "ssl.endpoint.identification.algorithm",
                      "ssl.key.password", "ssl.keystore.certificate.chain", "ssl.keystore.key", "ssl.keystore.location",
                      "ssl.keystore.password", "ssl.keystore.type", "ssl.protocol", "ssl.truststore.certificates",
                      "ssl.truststore.location", "ssl.truststore.password", "ssl.truststore.type")
_COMMON += [ConfigKey(name, config_type, default, None, "TLS (security.protocol=SSL), as the Java client's.")
            for name, config_type, default in ACCEPTED_BROKER_KEYS if name in SSL_CLIENT_CONFIGS]

PRODUCER_CONFIG_DEF = ConfigDef(_COMMON + [
    ConfigKey("acks", ConfigType.STRING, "all", one_of("all", "-1", "0", "1"),
              "0: do not wait; 1: the leader wrote it; all: every in-sync replica has it."),
    ConfigKey("linger.ms", ConfigType.LONG, 5, at_least(0),
              "Wait up to this long for more records to fill a batch (Kafka 4.0's default is 5)."),
    ConfigKey("batch.size", ConfigType.INT, 16384, at_least(0), "Upper bound, in bytes, of one partition's batch."),
    ConfigKey("buffer.memory", ConfigType.LONG, 33_554_432, at_least(0),
              "Bytes of records waiting to be sent; send() blocks (max.block.ms) once they are all taken."),
    ConfigKey("max.block.ms", ConfigType.LONG, 60_000, at_least(0),
              "How long send() may block for metadata or buffer space, and flush/close wait per call."),
    ConfigKey("max.request.size", ConfigType.INT, 1_048_576, at_least(0),
              "The largest record and the largest produce request the producer will send."),
    ConfigKey("compression.type", ConfigType.STRING, "none", one_of(*COMPRESSION_TYPES),
              "Codec for the producer's batches: none, gzip, snappy, lz4 or zstd."),
    ConfigKey("compression.gzip.level", ConfigType.INT, -1, None, "gzip level (-1: the codec's default)."),
    ConfigKey("compression.lz4.level", ConfigType.INT, 9, between(1, 17), "lz4 level."),
    ConfigKey("compression.zstd.level", ConfigType.INT, 3, between(-131072, 22), "zstd level."),
    ConfigKey("retries", ConfigType.INT, INT32_MAX, at_least(0),
              "How often a failed batch is retried; delivery.timeout.ms bounds the total time anyway."),
    ConfigKey("delivery.timeout.ms", ConfigType.INT, 120_000, at_least(0),
              "Upper bound on the time between send() and the record's success or failure."),
    ConfigKey("max.in.flight.requests.per.connection", ConfigType.INT, 5, at_least(1),
              "Unanswered produce requests allowed per broker connection (at most 5 with idempotence)."),
    ConfigKey("enable.idempotence", ConfigType.BOOLEAN, None, None,
              "Exactly one copy of each record per partition, in order (default on unless acks/retries/in-flight "
              "settings conflict, as in Kafka 3+)."),
    ConfigKey("partitioner.ignore.keys", ConfigType.BOOLEAN, False, None,
              "Spread keyed records with the sticky partitioner instead of hashing their keys."),
    ConfigKey("partitioner.adaptive.partitioning.enable", ConfigType.BOOLEAN, True, None,
              "Accepted for compatibility; kfk's sticky partitioner switches after batch.size bytes."),
    ConfigKey("transactional.id", ConfigType.STRING, None, None,
              "Makes the producer transactional (init_transactions, begin/commit/abort_transaction); the id fences "
              "older producers of the same id. Implies enable.idempotence=true and acks=all."),
    ConfigKey("transaction.timeout.ms", ConfigType.INT, 60_000, at_least(1),
              "The coordinator aborts a transaction left open longer than this (at most the broker's "
              "transaction.max.timeout.ms)."),
])

CONSUMER_CONFIG_DEF = ConfigDef(_COMMON + [
    ConfigKey("group.id", ConfigType.STRING, None, None,
              "The consumer group; needed for subscribe() and committed offsets."),
    ConfigKey("group.instance.id", ConfigType.STRING, None, None, "Static membership id (KIP-345)."),
    ConfigKey("group.protocol", ConfigType.STRING, "classic", one_of_case_insensitive("CLASSIC", "CONSUMER"),
              "classic: JoinGroup/SyncGroup/Heartbeat, the members assign (partition.assignment.strategy); "
              "consumer: the consumer group protocol (KIP-848), the coordinator assigns and the members heartbeat "
              "(ConsumerGroupHeartbeat), needs Kafka 4.0 or later. Case-insensitive, as Kafka's."),
    ConfigKey("group.remote.assignor", ConfigType.STRING, None, None,
              "group.protocol=consumer: the coordinator's assignor to use (uniform or range in Kafka; unset: the "
              "coordinator's default)."),
    ConfigKey("enable.auto.commit", ConfigType.BOOLEAN, True, None,
              "Commit the consumed positions in the background of poll() every auto.commit.interval.ms."),
    ConfigKey("auto.commit.interval.ms", ConfigType.INT, 5000, at_least(0), "How often auto-commit runs."),
    ConfigKey("auto.offset.reset", ConfigType.STRING, "latest", one_of("latest", "earliest", "none"),
              "Where to start when there is no committed offset, or it is out of range."),
    ConfigKey("session.timeout.ms", ConfigType.INT, 45_000, None,
              "The coordinator removes a member whose heartbeats stop for this long."),
    ConfigKey("heartbeat.interval.ms", ConfigType.INT, 3000, None, "Time between heartbeats."),
    ConfigKey("max.poll.interval.ms", ConfigType.INT, 300_000, at_least(1),
              "Leave the group when poll() is not called for this long (the member is stuck)."),
    ConfigKey("rebalance.timeout.ms", ConfigType.INT, None, None,
              "How long the group waits for members to rejoin (default: max.poll.interval.ms)."),
    ConfigKey("max.poll.records", ConfigType.INT, 500, at_least(1), "The most records one poll() returns."),
    ConfigKey("fetch.min.bytes", ConfigType.INT, 1, at_least(0), "The broker answers a fetch once it has this much."),
    ConfigKey("fetch.max.bytes", ConfigType.INT, 52_428_800, at_least(0), "Upper bound of one fetch response."),
    ConfigKey("fetch.max.wait.ms", ConfigType.INT, 500, at_least(0),
              "How long the broker may hold a fetch waiting for fetch.min.bytes."),
    ConfigKey("max.partition.fetch.bytes", ConfigType.INT, 1_048_576, at_least(0),
              "Upper bound per partition in one fetch response."),
    ConfigKey("isolation.level", ConfigType.STRING, "read_committed", one_of("read_uncommitted", "read_committed"),
              "read_committed returns transactional records only once their transaction committed (never those of "
              "aborted ones) and reads up to the last stable offset; read_uncommitted returns everything up to the "
              "high watermark. Default read_committed, as librdkafka's (the Java client's is read_uncommitted): "
              "a consumer moved between kfk and confluent-kafka sees the same records."),
    ConfigKey("partition.assignment.strategy", ConfigType.LIST, ["range", "cooperative-sticky"], list_of(*ASSIGNORS),
              "Assignors in order of preference: range, roundrobin, sticky, cooperative-sticky."),
    ConfigKey("check.crcs", ConfigType.BOOLEAN, True, None, "Verify the CRC32C of every fetched batch."),
    ConfigKey("exclude.internal.topics", ConfigType.BOOLEAN, True, None,
              "Pattern subscriptions never match internal topics."),
    ConfigKey("allow.auto.create.topics", ConfigType.BOOLEAN, True, None,
              "Let metadata requests for subscribed topics create them (if the broker allows it)."),
])

ADMIN_CONFIG_DEF = ConfigDef(_COMMON + [
    ConfigKey("default.api.timeout.ms", ConfigType.INT, 60_000, at_least(0), "Timeout of one admin call."),
])


def _attribute_to_name(config_def: ConfigDef) -> dict[str, str]:
    return {key.attribute: key.name for key in config_def.keys.values()}


class ClientConfig:
    """Typed values of one client's configuration: ``config.linger_ms``, ``config.bootstrap_servers``.

    Attributes are the snake_case of Kafka's names; ``config["linger.ms"]`` reads by Kafka's name.
    """

    def __init__(self, config_def: ConfigDef, kind: str, properties: Mapping[str, Any] | None = None,
                 **overrides: Any) -> None:
        names = _attribute_to_name(config_def)
        merged: dict[str, Any] = dict(properties or {})
        for attribute, value in overrides.items():
            if attribute not in names:
                raise InvalidConfigurationError(f"Unknown {kind} config name: {attribute}")
            merged[names[attribute]] = value
        config_def.validate_names(merged, kind)
        self.given = frozenset(merged)
        self._values = config_def.parse(merged)
        for name, value in self._values.items():
            setattr(self, name.replace(".", "_"), value)
        for name in sorted(self.given):  # a Java client's key kfk's client does not act on: said once, here
            support = CLIENT_UNSUPPORTED.get(name)
            if support is not None and not support.accepts(self._values[name], config_def.keys[name].default):
                _log.warning("%s", support.message(name, self._values[name]))
        if not self.client_id:
            self.client_id = f"kfk-{kind}-{socket.gethostname()}"

    def __getitem__(self, name: str) -> Any:
        return self._values[name]

    def __repr__(self) -> str:
        return f"ClientConfig({self._values!r})"

    def __getattr__(self, name: str) -> Any:  # only reached for names the ConfigDef does not define
        raise AttributeError(f"no client config attribute {name!r}")


#: Room for a Fetch response's own fields around fetch.max.bytes of records (librdkafka's figure).
FETCH_RESPONSE_OVERHEAD_BYTES = 512


#: Keys of one group protocol that the other refuses (Kafka's ConsumerConfig lists, in its order).
_UNSUPPORTED_BY_PROTOCOL = {
    "classic": ("group.remote.assignor",),
    "consumer": ("partition.assignment.strategy", "heartbeat.interval.ms", "session.timeout.ms"),
}


def group_protocol(config: ClientConfig) -> str:
    """The consumer's group.protocol, lower case; InvalidConfigurationError, in the Java consumer's words, when a key
    the protocol does not use is set (the coordinator assigns and sets the session and heartbeat times under
    group.protocol=consumer; a remote assignor means nothing to a classic group)."""
    protocol = config.group_protocol.lower()
    refused = [name for name in _UNSUPPORTED_BY_PROTOCOL[protocol]
               if name in config.given and str(config[name] or "").strip() not in ("", "[]")]
    if refused:
        raise InvalidConfigurationError(f"{', '.join(refused)} cannot be set when group.protocol={protocol.upper()}")
    return protocol


def max_response_bytes(config: ClientConfig) -> int:
    """The largest response the client's connections accept: receive.message.max.bytes, which a consumer raises to
    hold its largest fetch (fetch.max.bytes + FETCH_RESPONSE_OVERHEAD_BYTES) when it is not set, as librdkafka does;
    set below that, it is an InvalidConfigurationError."""
    bound = config.receive_message_max_bytes
    fetch_max_bytes = config._values.get("fetch.max.bytes")
    if fetch_max_bytes is None:
        return bound
    needed = fetch_max_bytes + FETCH_RESPONSE_OVERHEAD_BYTES
    if "receive.message.max.bytes" not in config.given:
        return max(bound, needed)
    if bound < needed:
        raise InvalidConfigurationError(f"receive.message.max.bytes ({bound}) must be at least fetch.max.bytes + "
                                        f"{FETCH_RESPONSE_OVERHEAD_BYTES} ({needed})")
    return bound


def sasl_client_factory(config: ClientConfig) -> Callable[[], SaslClient] | None:
    """A SASL client per connection when security.protocol is SASL_*, None otherwise; InvalidConfigurationError now
    for a mechanism kfk does not have or credentials that are missing."""
    if not config.security_protocol.startswith("SASL_"):
        return None
    jaas = None
    if config.sasl_jaas_config:
        try:
            jaas = parse_jaas_config(config.sasl_jaas_config)[0]
        except ValueError as error:
            raise InvalidConfigurationError(f"sasl.jaas.config: {error}") from None

    def factory() -> SaslClient:
        return sasl_client(config.sasl_mechanism, config.sasl_username, config.sasl_password,
                           token=config.sasl_oauthbearer_token, jaas=jaas)

    factory()
    return factory


def parse_bootstrap_servers(servers: list[str]) -> list[tuple[str, int]]:
    """host:port pairs (IPv6 hosts in brackets); a missing port means 9092, Kafka's default."""
    addresses: list[tuple[str, int]] = []
    for server in servers:
        server = server.strip()
        if not server:
            continue
        if server.startswith("["):
            host, _, rest = server[1:].partition("]")
            port_text = rest.lstrip(":")
        elif server.count(":") == 1:
            host, port_text = server.split(":")
        else:
            host, port_text = server, ""
        try:
            port = int(port_text) if port_text else 9092
        except ValueError:
            raise InvalidConfigurationError(f"Invalid url in bootstrap.servers: {server}") from None
        if not host or not 0 < port < 65536:
            raise InvalidConfigurationError(f"Invalid url in bootstrap.servers: {server}")
        addresses.append((host, port))
    if not addresses:
        raise InvalidConfigurationError("bootstrap.servers is empty: give at least one host:port")
    return addresses
