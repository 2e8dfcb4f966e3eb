"""The MirrorMaker connectors' configuration (Kafka's MirrorConnectorConfig, MirrorSourceConfig,
MirrorCheckpointConfig, MirrorHeartbeatConfig): keys, defaults, and the client configs derived from them.

A connector config carries both clusters: `source.cluster.*` / `target.cluster.*` hold each cluster's connection
keys (bootstrap.servers and the security keys), `source.consumer.*`, `target.admin.*`, ... per-client overrides, and
plain `consumer.*`, `producer.*`, `admin.*` apply to either cluster. Topic and group filters are Kafka's: comma
separated regexes, each matching a whole name, an empty list matching nothing.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

from kfk.connect.config_def import ConfigDef, ConfigKey, at_least
from kfk.connect.mirror.replication_policy import (
    DEFAULT_POLICY,
    INTERNAL_TOPIC_SEPARATOR_ENABLED,
    REPLICATION_POLICY_CLASS,
    REPLICATION_POLICY_SEPARATOR,
    DefaultReplicationPolicy,
    replication_policy,
)

SOURCE_CLUSTER_ALIAS, TARGET_CLUSTER_ALIAS = "source.cluster.alias", "target.cluster.alias"
ENABLED = "enabled"
TOPICS, TOPICS_EXCLUDE = "topics", "topics.exclude"
TOPICS_DEFAULT, TOPICS_EXCLUDE_DEFAULT = ".*", r"mm2.*\.internal, .*\.replica, __.*"
GROUPS, GROUPS_EXCLUDE = "groups", "groups.exclude"
GROUPS_DEFAULT, GROUPS_EXCLUDE_DEFAULT = ".*", "console-consumer-.*, connect-.*, __.*"
CONFIG_PROPERTIES_EXCLUDE = "config.properties.exclude"
CONFIG_PROPERTIES_EXCLUDE_DEFAULT = (
    "follower.replication.throttled.replicas, leader.replication.throttled.replicas, "
    "message.timestamp.difference.max.ms, log.message.timestamp.before.max.ms, log.message.timestamp.after.max.ms, "
    "message.timestamp.type, unclean.leader.election.enable, min.insync.replicas")
USE_DEFAULTS_FROM = "use.defaults.from"
TASK_TOPIC_PARTITIONS, TASK_CONSUMER_GROUPS, TASK_INDEX = (
    "task.assigned.partitions", "task.assigned.groups", "task.index")
OFFSET_SYNCS_TOPIC_LOCATION = "offset-syncs.topic.location"
SOURCE_PREFIX, TARGET_PREFIX = "source.", "target."
SOURCE_CLUSTER_PREFIX, TARGET_CLUSTER_PREFIX = "source.cluster.", "target.cluster."
#: The connection keys of a cluster (Kafka's MirrorClientConfig.CLIENT_CONFIG_DEF: bootstrap and security).
CLIENT_KEY = re.compile(r"bootstrap\.servers|security\.protocol|ssl\..*|sasl\..*")


def _key(name: str, type: str, default: Any, documentation: str, importance: str = "LOW") -> ConfigKey:
    return ConfigKey(name, type, default, importance, documentation)


COMMON_KEYS = [
    _key(ENABLED, "BOOLEAN", True, "Whether to replicate source->target.", "LOW"),
    _key(SOURCE_CLUSTER_ALIAS, "STRING", "source", "Alias of source cluster", "HIGH"),
    _key(TARGET_CLUSTER_ALIAS, "STRING", "target", "Alias of target cluster. Used in metrics reporting.", "HIGH"),
    _key(REPLICATION_POLICY_CLASS, "CLASS", DEFAULT_POLICY, "Class which defines the remote topic naming convention."),
    _key(REPLICATION_POLICY_SEPARATOR, "STRING", ".", "Separator used in remote topic naming convention."),
    _key(INTERNAL_TOPIC_SEPARATOR_ENABLED, "BOOLEAN", True,
         "Whether to use replication.policy.separator to control the names of topics used by MirrorMaker 2."),
    _key("admin.timeout.ms", "LONG", 60000, "Timeout for administrative tasks, e.g. detecting new topics."),
    _key(TOPICS, "LIST", [TOPICS_DEFAULT], "List of topics and/or regexes to replicate.", "HIGH"),
    _key(TOPICS_EXCLUDE, "LIST", [item.strip() for item in TOPICS_EXCLUDE_DEFAULT.split(",")],
         "List of topics and/or regexes that should not be replicated.", "HIGH"),
    _key(OFFSET_SYNCS_TOPIC_LOCATION, "STRING", "source",
         "The location (source/target) of the offset-syncs topic."),
    _key("emit.offset-syncs.enabled", "BOOLEAN", True, "Whether to store the new offset of the replicated records "
         "in offset-syncs topic or not."),
    _key("consumer.poll.timeout.ms", "LONG", 1000, "Timeout when polling source cluster."),
]
SOURCE_KEYS = COMMON_KEYS + [
    _key("replication.factor", "INT", 2, "Replication factor for newly created remote topics."),
    _key("offset-syncs.topic.replication.factor", "SHORT", 3,
         "Replication factor for offset-syncs topic."),
    _key("offset.lag.max", "LONG", 100, "How out-of-sync a remote partition can be before it is resynced."),
    _key("refresh.topics.enabled", "BOOLEAN", True, "Whether to periodically check for new topics and partitions."),
    _key("refresh.topics.interval.seconds", "LONG", 600, "Frequency of topic refresh."),
    _key("sync.topic.configs.enabled", "BOOLEAN", True, "Whether to periodically configure remote topics to match "
         "their corresponding upstream topics."),
    _key("sync.topic.configs.interval.seconds", "LONG", 600, "Frequency of topic config sync."),
    _key("sync.topic.acls.enabled", "BOOLEAN", True, "Whether to periodically configure remote topic ACLs to match "
         "their corresponding upstream topics."),
    _key("sync.topic.acls.interval.seconds", "LONG", 600, "Frequency of topic ACL sync."),
    _key(CONFIG_PROPERTIES_EXCLUDE, "LIST", [item.strip() for item in CONFIG_PROPERTIES_EXCLUDE_DEFAULT.split(",")],
         "List of topic configuration properties and/or regexes that should not be replicated.", "HIGH"),
    _key(USE_DEFAULTS_FROM, "STRING", "target", "Which cluster's defaults (source or target) to use when syncing "
         "topic configurations that have default values.", "MEDIUM"),
    _key("heartbeats.replication.enabled", "BOOLEAN", True, "Whether to replicate the heartbeat topics even if the "
         "topic filter does not include them."),
]
CHECKPOINT_KEYS = COMMON_KEYS + [
    _key(GROUPS, "LIST", [GROUPS_DEFAULT], "List of consumer group names and/or regexes to replicate.", "HIGH"),
    _key(GROUPS_EXCLUDE, "LIST", [item.strip() for item in GROUPS_EXCLUDE_DEFAULT.split(",")],
         "List of consumer group names and/or regexes that should not be replicated.", "HIGH"),
    _key("checkpoints.topic.replication.factor", "SHORT", 3, "Replication factor for checkpoints topic."),
    _key("refresh.groups.enabled", "BOOLEAN", True, "Whether to periodically check for new consumer groups."),
    _key("refresh.groups.interval.seconds", "LONG", 600, "Frequency of group refresh."),
    _key("emit.checkpoints.enabled", "BOOLEAN", True, "Whether to replicate consumer offsets to target cluster."),
    _key("emit.checkpoints.interval.seconds", "LONG", 60, "Frequency of checkpoints."),
    _key("sync.group.offsets.enabled", "BOOLEAN", False, "Whether to periodically write the translated offsets to "
         "__consumer_offsets topic in target cluster, as long as no active consumers in that group are connected "
         "to the target cluster"),
    _key("sync.group.offsets.interval.seconds", "LONG", 60, "Frequency of consumer group offset sync."),
]
HEARTBEAT_KEYS = [key for key in COMMON_KEYS if key.name in (
    ENABLED, SOURCE_CLUSTER_ALIAS, TARGET_CLUSTER_ALIAS, REPLICATION_POLICY_CLASS, REPLICATION_POLICY_SEPARATOR,
    INTERNAL_TOPIC_SEPARATOR_ENABLED, "admin.timeout.ms")] + [
    _key("emit.heartbeats.enabled", "BOOLEAN", True, "Whether to emit heartbeats to target cluster."),
    _key("emit.heartbeats.interval.seconds", "LONG", 1, "Frequency of heartbeats."),
    _key("heartbeats.topic.replication.factor", "SHORT", 3, "Replication factor for heartbeats topic."),
]
for _keys in (SOURCE_KEYS, CHECKPOINT_KEYS):
    for _key_item in _keys:
        if _key_item.name.endswith("replication.factor"):
            _key_item.validator = at_least(-1)
SOURCE_CONFIG_DEF, CHECKPOINT_CONFIG_DEF, HEARTBEAT_CONFIG_DEF = (
    ConfigDef(SOURCE_KEYS), ConfigDef(CHECKPOINT_KEYS), ConfigDef(HEARTBEAT_KEYS))
ALL_CONFIG_NAMES = set(SOURCE_CONFIG_DEF.keys) | set(CHECKPOINT_CONFIG_DEF.keys) | set(HEARTBEAT_CONFIG_DEF.keys)


def compile_pattern_list(patterns: list[str]) -> re.Pattern[str] | None:
    """Kafka's MirrorUtils.compilePatternList: the regexes as one alternation; an empty list matches nothing."""
    return re.compile("|".join(patterns)) if patterns else None


class NameFilter:
    """DefaultTopicFilter / DefaultGroupFilter: a name is replicated when it matches the include list and not the
    exclude list (each regex matching the whole name, as Java's Matcher.matches)."""

    def __init__(self, include: list[str], exclude: list[str]) -> None:
        self.include, self.exclude = compile_pattern_list(include), compile_pattern_list(exclude)

    def __call__(self, name: str) -> bool:
        return self.include is not None and self.include.fullmatch(name) is not None \
            and not (self.exclude is not None and self.exclude.fullmatch(name) is not None)


def with_prefix(props: Mapping[str, str], prefix: str) -> dict[str, str]:
    return {key[len(prefix):]: value for key, value in props.items() if key.startswith(prefix)}


class MirrorConfig:
    """One MirrorMaker connector's (or task's) config, parsed against `config_def`."""

    def __init__(self, props: Mapping[str, str], config_def: ConfigDef) -> None:
        self.props = {key: str(value) for key, value in props.items()}
        self.values = config_def.parse(self.props)

    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    @property
    def source_cluster_alias(self) -> str:
        return self.values[SOURCE_CLUSTER_ALIAS]

    @property
    def target_cluster_alias(self) -> str:
        return self.values[TARGET_CLUSTER_ALIAS]

    @property
    def enabled(self) -> bool:
        return self.values[ENABLED]

    @property
    def entity_label(self) -> str:
        return f"{self.source_cluster_alias}->{self.target_cluster_alias}|{self.props.get('name', '')}"

    def replication_policy(self) -> DefaultReplicationPolicy:
        return replication_policy(self.props)

    def topic_filter(self) -> NameFilter:
        return NameFilter(self.values[TOPICS], self.values[TOPICS_EXCLUDE])

    def group_filter(self) -> NameFilter:
        return NameFilter(self.values[GROUPS], self.values[GROUPS_EXCLUDE])

    def interval_seconds(self, name: str) -> float | None:
        """`<name>.interval.seconds`, or None when `<name>.enabled` is false (Kafka's negative interval)."""
        return float(self.values[f"{name}.interval.seconds"]) if self.values[f"{name}.enabled"] else None

    def offset_syncs_topic(self) -> str:
        location = self.values[OFFSET_SYNCS_TOPIC_LOCATION]
        other = self.target_cluster_alias if location == "source" else self.source_cluster_alias
        return self.replication_policy().offset_syncs_topic(other)

    def offset_syncs_on_source(self) -> bool:
        return self.values[OFFSET_SYNCS_TOPIC_LOCATION] == "source"

    def checkpoints_topic(self) -> str:
        return self.replication_policy().checkpoints_topic(self.source_cluster_alias)

    def _client(self, side: str, kind: str, role: str) -> dict[str, str]:
        cluster_prefix, prefix = (SOURCE_CLUSTER_PREFIX, SOURCE_PREFIX) if side == "source" else (
            TARGET_CLUSTER_PREFIX, TARGET_PREFIX)
        config = {key: value for key, value in with_prefix(self.props, cluster_prefix).items()
                  if CLIENT_KEY.fullmatch(key)}
        config.update(with_prefix(self.props, f"{kind}."))
        config.update(with_prefix(self.props, f"{prefix}{kind}."))
        if kind == "consumer":
            config["enable.auto.commit"] = "false"
            config.setdefault("auto.offset.reset", "earliest")
        config.setdefault("client.id", f"{self.entity_label}|{role}")
        return config

    def source_consumer(self, role: str) -> dict[str, str]:
        return self._client("source", "consumer", role)

    def source_producer(self, role: str) -> dict[str, str]:
        return self._client("source", "producer", role)

    def source_admin(self, role: str) -> dict[str, str]:
        return self._client("source", "admin", role)

    def target_consumer(self, role: str) -> dict[str, str]:
        return self._client("target", "consumer", role)

    def target_producer(self, role: str) -> dict[str, str]:
        return self._client("target", "producer", role)

    def target_admin(self, role: str) -> dict[str, str]:
        return self._client("target", "admin", role)
