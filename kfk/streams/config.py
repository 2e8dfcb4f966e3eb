"""StreamsConfig: Kafka Streams' configuration keys, defaults and validation (StreamsConfig.java's names).

A Streams application is configured with one mapping. Keys Kafka Streams defines are read here; a key prefixed
``consumer.``, ``producer.`` or ``admin.`` goes to that client only (Kafka's StreamsConfig.consumerPrefix(...)), and
an unprefixed client key (``security.protocol``, ``sasl.mechanism``...) goes to every client that knows it, as in
Kafka. Keys the application's clients must have their way (group.id, enable.auto.commit, transactional.id,
isolation.level) are set by kfk.streams and cannot be overridden, as Kafka Streams refuses them too.
"""

from __future__ import annotations

import logging
import os
import tempfile
from collections.abc import Mapping
from typing import Any

from kfk.client.config import ADMIN_CONFIG_DEF, CONSUMER_CONFIG_DEF, PRODUCER_CONFIG_DEF
from kfk.config import ConfigDef, ConfigKey, ConfigType, at_least, at_most_elements, one_of
from kfk.errors import InvalidConfigurationError
from kfk.streams.errors import (DEAD_LETTER_QUEUE_TOPIC_NAME_CONFIG, ExceptionHandlers, handler_instance,
                               resolve_handler)
from kfk.streams.serdes import Serde, serde_from_config

__all__ = ["StreamsConfig", "AT_LEAST_ONCE", "EXACTLY_ONCE_V2", "STREAMS_CONFIG_DEF"]

AT_LEAST_ONCE = "at_least_once"
EXACTLY_ONCE_V2 = "exactly_once_v2"

log = logging.getLogger("kfk.streams")

#: The exception handlers' config keys, each with the name Kafka deprecated for it in 4.0 (KIP-1056), still accepted;
#: when both are set the new one wins, as in Kafka.
_HANDLER_KEYS = {"deserialization.exception.handler": "default.deserialization.exception.handler",
                 "processing.exception.handler": None,
                 "production.exception.handler": "default.production.exception.handler"}

#: commit.interval.ms's default depends on processing.guarantee (Kafka: 30 s, and 100 ms under exactly-once).
_COMMIT_INTERVAL_MS = {AT_LEAST_ONCE: 30_000, EXACTLY_ONCE_V2: 100}

#: client.tag.<key>=<value>: this instance's tags, which rack.aware.assignment.tags names (Kafka's limits).
CLIENT_TAG_PREFIX = "client.tag."
MAX_RACK_AWARE_ASSIGNMENT_TAGS = 5
MAX_TAG_KEY_LENGTH, MAX_TAG_VALUE_LENGTH = 20, 30

STREAMS_CONFIG_DEF = ConfigDef([
    ConfigKey("application.id", ConfigType.STRING, None, None,
              "The consumer group id, the transactional.id prefix and the prefix of every internal topic."),
    ConfigKey("bootstrap.servers", ConfigType.LIST, None, None, "host:port pairs of any broker of the cluster."),
    ConfigKey("processing.guarantee", ConfigType.STRING, AT_LEAST_ONCE, one_of(AT_LEAST_ONCE, EXACTLY_ONCE_V2),
              "at_least_once, or exactly_once_v2 (one transactional producer per stream thread)."),
    ConfigKey("state.dir", ConfigType.STRING, os.path.join(tempfile.gettempdir(), "kafka-streams"), None,
              "Where the state stores live: <state.dir>/<application.id>/<task id>/rocksdb/<store>."),
    ConfigKey("commit.interval.ms", ConfigType.LONG, None, at_least(0),
              "How often offsets are committed (and transactions committed under exactly_once_v2)."),
    ConfigKey("num.stream.threads", ConfigType.INT, 1, at_least(1), "Stream threads of this instance."),
    ConfigKey("num.standby.replicas", ConfigType.INT, 0, at_least(0),
              "Standby replicas per stateful task, each on another instance: copies of its stores kept up to date "
              "from their changelogs, so that a task that moves restores only the changelog's tail."),
    ConfigKey("acceptable.recovery.lag", ConfigType.LONG, 10_000, at_least(0),
              "The most changelog records an instance may lag behind on a stateful task and still be given it as an "
              "active task (it is caught up); a task's target instance that lags more gets a warm-up replica first."),
    ConfigKey("max.warmup.replicas", ConfigType.INT, 2, at_least(1),
              "The most warm-up replicas (standbys beyond num.standby.replicas, restoring a task on the instance it "
              "should move to) assigned at once across the application."),
    ConfigKey("rack.aware.assignment.tags", ConfigType.LIST, [], at_most_elements(MAX_RACK_AWARE_ASSIGNMENT_TAGS),
              "The client tag keys (client.tag.<key>) standby replicas are spread over: a task's standbys go to "
              "instances whose values of these tags differ from the active's and from each other's, where they can "
              "(KIP-708)."),
    ConfigKey("probing.rebalance.interval.ms", ConfigType.LONG, 600_000, at_least(60_000),
              "How long after a rebalance that assigned warm-up replicas the next (probing) rebalance comes, to move "
              "the tasks whose warm-ups have caught up."),
    ConfigKey("replication.factor", ConfigType.INT, -1, None,
              "Replication factor of internal topics; -1 means the broker's default.replication.factor."),
    ConfigKey("statestore.cache.max.bytes", ConfigType.LONG, 10 * 1024 * 1024, at_least(0),
              "The record cache of the instance, divided evenly between its stream threads (kfk.streams.cache); "
              "0 turns caching off: every update goes downstream."),
    ConfigKey("cache.max.bytes.buffering", ConfigType.LONG, 10 * 1024 * 1024, at_least(0),
              "Deprecated name of statestore.cache.max.bytes."),
    ConfigKey("client.id", ConfigType.STRING, "", None, "Prefix of the clients' client.id."),
    ConfigKey("poll.ms", ConfigType.LONG, 100, at_least(0), "How long a stream thread blocks in poll."),
    ConfigKey("max.task.idle.ms", ConfigType.LONG, 0, None, "Accepted for Kafka's configs; not used yet."),
    ConfigKey("application.server", ConfigType.STRING, "", None,
              "host:port where this instance answers interactive queries: the other instances learn it through the "
              "group (KafkaStreams.query_metadata_for_key)."),
    ConfigKey("default.key.serde", ConfigType.STRING, None, None, "Serde of keys where the topology names none."),
    ConfigKey("default.value.serde", ConfigType.STRING, None, None,
              "Serde of values where the topology names none."),
    ConfigKey("schema.registry.url", ConfigType.STRING, None, None,
              "The schema registry of Avro serdes (io.confluent.kafka.streams.serdes.avro.GenericAvroSerde)."),
    ConfigKey("deserialization.exception.handler", ConfigType.CLASS, None, None,
              "What to do with a record its source serde cannot read (kfk.streams.errors); LogAndFail by default."),
    ConfigKey("default.deserialization.exception.handler", ConfigType.CLASS, None, None,
              "Deprecated name of deserialization.exception.handler."),
    ConfigKey("processing.exception.handler", ConfigType.CLASS, None, None,
              "What to do when user code in a processor raises on a record; LogAndFail by default."),
    ConfigKey("production.exception.handler", ConfigType.CLASS, None, None,
              "What to do when a sink's record cannot be serialized or written; "
              "DefaultProductionExceptionHandler (fail) by default."),
    ConfigKey("default.production.exception.handler", ConfigType.CLASS, None, None,
              "Deprecated name of production.exception.handler."),
    ConfigKey(DEAD_LETTER_QUEUE_TOPIC_NAME_CONFIG, ConfigType.STRING, None, None,
              "Where Kafka's exception handlers write the records that failed (KIP-1034); unset: nowhere."),
    ConfigKey("topology.optimization", ConfigType.STRING, "none", one_of("none"),
              "Only Kafka's default (none) is supported."),
])

_CLIENT_PREFIXES = {"consumer.": CONSUMER_CONFIG_DEF, "producer.": PRODUCER_CONFIG_DEF, "admin.": ADMIN_CONFIG_DEF}
#: What kfk.streams sets on its clients itself (Kafka Streams' "non-configurable" client configs).
_FIXED_CLIENT_KEYS = frozenset({"group.id", "enable.auto.commit", "transactional.id", "isolation.level",
                                "partition.assignment.strategy", "key.serializer", "value.serializer"})


class StreamsConfig:
    """Typed values of a Streams application's configuration, and its clients' configurations."""

    def __init__(self, properties: Mapping[str, Any]) -> None:
        streams: dict[str, Any] = {}
        self._client_overrides: dict[str, dict[str, Any]] = {prefix: {} for prefix in _CLIENT_PREFIXES}
        #: This instance's client tags (client.tag.<key>), sent to the group leader (rack-aware standbys).
        self.client_tags: dict[str, str] = {}
        for name, value in properties.items():
            prefix = next((prefix for prefix in _CLIENT_PREFIXES if name.startswith(prefix)), None)
            if name.startswith(CLIENT_TAG_PREFIX):
                self.client_tags[name[len(CLIENT_TAG_PREFIX):]] = str(value)
            elif prefix is not None:
                self._set_client_key(prefix, name[len(prefix):], value)
            elif name in STREAMS_CONFIG_DEF.keys:
                streams[name] = value
            elif any(name in config_def.keys for config_def in _CLIENT_PREFIXES.values()):
                for client_prefix, config_def in _CLIENT_PREFIXES.items():
                    if name in config_def.keys:
                        self._set_client_key(client_prefix, name, value)
            else:
                raise InvalidConfigurationError(f"Unknown streams config name: {name}")
        registry_url = streams.get("schema.registry.url")
        try:
            self.key_serde: Serde = serde_from_config(streams.pop("default.key.serde", None), True, registry_url)
            self.value_serde: Serde = serde_from_config(streams.pop("default.value.serde", None), False,
                                                        registry_url)
        except ValueError as error:
            raise InvalidConfigurationError(str(error)) from None
        self._handlers: dict[str, object] = {}
        for key, deprecated in _HANDLER_KEYS.items():
            value = streams.pop(key, None)
            old = streams.pop(deprecated, None) if deprecated else None
            if value is not None and old is not None:
                log.warning("Both the deprecated and new config for %s are configured. The deprecated one will be "
                            "ignored.", key.replace(".handler", " handler").replace(".", " "))
            self._handlers[key] = resolve_handler(key, value if value is not None else old)
        self.originals = dict(properties)
        values = STREAMS_CONFIG_DEF.parse(streams)
        for required in ("application.id", "bootstrap.servers"):
            if not values[required]:
                raise InvalidConfigurationError(f'Missing required configuration "{required}" which has no '
                                                "default value.")
        self.application_id: str = values["application.id"]
        self.bootstrap_servers: list[str] = values["bootstrap.servers"]
        self.processing_guarantee: str = values["processing.guarantee"]
        self.exactly_once = self.processing_guarantee == EXACTLY_ONCE_V2
        self.state_dir: str = values["state.dir"]
        self.commit_interval_ms: int = (values["commit.interval.ms"] if values["commit.interval.ms"] is not None
                                        else _COMMIT_INTERVAL_MS[self.processing_guarantee])
        self.num_stream_threads: int = values["num.stream.threads"]
        self.num_standby_replicas: int = values["num.standby.replicas"]
        self.acceptable_recovery_lag: int = values["acceptable.recovery.lag"]
        self.max_warmup_replicas: int = values["max.warmup.replicas"]
        self.probing_rebalance_interval_ms: int = values["probing.rebalance.interval.ms"]
        self.rack_aware_assignment_tags: list[str] = values["rack.aware.assignment.tags"]
        self._check_client_tags()
        self.replication_factor: int = values["replication.factor"]
        self.client_id: str = values["client.id"] or self.application_id
        self.poll_ms: int = values["poll.ms"]
        self.application_server: str = values["application.server"]
        self.statestore_cache_max_bytes: int = values["statestore.cache.max.bytes"]
        if "cache.max.bytes.buffering" in streams:
            if "statestore.cache.max.bytes" in streams:
                log.warning("Both deprecated config cache.max.bytes.buffering and the new config "
                            "statestore.cache.max.bytes are set, hence cache.max.bytes.buffering is ignored and "
                            "statestore.cache.max.bytes is used.")
            else:
                log.warning("Deprecated config cache.max.bytes.buffering is set, and will be used; we suggest "
                            "setting the new config statestore.cache.max.bytes instead as deprecated "
                            "cache.max.bytes.buffering would be removed in the future.")
                self.statestore_cache_max_bytes = values["cache.max.bytes.buffering"]

    def _check_client_tags(self) -> None:
        """Kafka's checks of the rack awareness configs."""
        if len(self.client_tags) > MAX_RACK_AWARE_ASSIGNMENT_TAGS:
            raise InvalidConfigurationError(f"At most {MAX_RACK_AWARE_ASSIGNMENT_TAGS} client tags can be specified "
                                            f"using {CLIENT_TAG_PREFIX} prefix.")
        missing = [tag for tag in self.rack_aware_assignment_tags if tag not in self.client_tags]
        if missing:
            raise InvalidConfigurationError(
                f"Invalid value [{', '.join(self.rack_aware_assignment_tags)}] for configuration "
                f"rack.aware.assignment.tags: Contains invalid value [{', '.join(missing)}] which doesn't have "
                f"corresponding tag set via [{CLIENT_TAG_PREFIX}] prefix.")
        for key, value in self.client_tags.items():
            for text, limit, what in ((key, MAX_TAG_KEY_LENGTH, "key"), (value, MAX_TAG_VALUE_LENGTH, "value")):
                if len(text) > limit:
                    raise InvalidConfigurationError(f"Invalid value {text} for configuration {CLIENT_TAG_PREFIX}{key}: "
                                                    f"Tag {what} exceeds maximum length of {limit}.")

    def exception_handlers(self) -> ExceptionHandlers:
        """One task's exception handlers, each class instantiated and configured anew (Kafka Streams gives every
        task its own instances)."""
        return ExceptionHandlers(*(handler_instance(self._handlers[key], self.originals) for key in _HANDLER_KEYS))

    def _set_client_key(self, prefix: str, name: str, value: Any) -> None:
        if name in _FIXED_CLIENT_KEYS:
            raise InvalidConfigurationError(f"{prefix}{name}: kfk.streams sets {name} itself, as Kafka Streams does")
        if name not in _CLIENT_PREFIXES[prefix].keys:
            raise InvalidConfigurationError(f"Unknown {prefix.rstrip('.')} config name: {name}")
        self._client_overrides[prefix][name] = value

    def consumer_config(self, client_id: str, thread_index: int) -> dict[str, Any]:
        """The main consumer's: the application's group, offsets committed by the thread (never automatically),
        read_committed under exactly_once_v2, and the range assignor (see kfk.streams.kafka_streams). A
        group.instance.id (static membership) gets the thread's index appended, as in Kafka Streams."""
        config = {"bootstrap.servers": self.bootstrap_servers, "client.id": client_id,
                  "group.id": self.application_id, "enable.auto.commit": False, "auto.offset.reset": "earliest",
                  "isolation.level": "read_committed" if self.exactly_once else "read_uncommitted",
                  "partition.assignment.strategy": ["range"], **self._client_overrides["consumer."]}
        if config.get("group.instance.id"):
            config["group.instance.id"] = f"{config['group.instance.id']}-{thread_index}"
        return config

    def restore_consumer_config(self, client_id: str) -> dict[str, Any]:
        """The restore consumer's: no group (it is assigned changelog partitions by hand)."""
        overrides = {name: value for name, value in self._client_overrides["consumer."].items()
                     if name != "auto.offset.reset"}
        return {"bootstrap.servers": self.bootstrap_servers, "client.id": client_id, "enable.auto.commit": False,
                "auto.offset.reset": "none",
                "isolation.level": "read_committed" if self.exactly_once else "read_uncommitted", **overrides}

    def producer_config(self, client_id: str, transactional_id: str | None) -> dict[str, Any]:
        config: dict[str, Any] = {"bootstrap.servers": self.bootstrap_servers, "client.id": client_id,
                                  "linger.ms": 100,  # Kafka Streams' producer default
                                  **self._client_overrides["producer."]}
        if transactional_id is not None:
            config["transactional.id"] = transactional_id
        return config

    def admin_config(self, client_id: str) -> dict[str, Any]:
        return {"bootstrap.servers": self.bootstrap_servers, "client.id": client_id,
                **self._client_overrides["admin."]}
