"""How remote topics are named (Kafka's ReplicationPolicy): DefaultReplicationPolicy renames `topic` replicated from
cluster `A` to `A.topic` (the separator is `replication.policy.separator`), IdentityReplicationPolicy keeps the name.
Both also name MirrorMaker's internal topics and tell them apart from the topics to replicate."""

from __future__ import annotations

import re
from typing import Mapping

REPLICATION_POLICY_CLASS = "replication.policy.class"
REPLICATION_POLICY_SEPARATOR = "replication.policy.separator"
INTERNAL_TOPIC_SEPARATOR_ENABLED = "replication.policy.internal.topic.separator.enabled"
DEFAULT_POLICY = "org.apache.kafka.connect.mirror.DefaultReplicationPolicy"
IDENTITY_POLICY = "org.apache.kafka.connect.mirror.IdentityReplicationPolicy"
HEARTBEATS_TOPIC = "heartbeats"


class DefaultReplicationPolicy:
    def __init__(self, props: Mapping[str, str] | None = None) -> None:
        props = props or {}
        self.separator = props.get(REPLICATION_POLICY_SEPARATOR, ".")
        internal_enabled = str(props.get(INTERNAL_TOPIC_SEPARATOR_ENABLED, "true")).strip().lower() == "true"
        self.internal_separator = self.separator if internal_enabled else "."

    def format_remote_topic(self, source_cluster_alias: str, topic: str) -> str:
        return f"{source_cluster_alias}{self.separator}{topic}"

    def topic_source(self, topic: str) -> str | None:
        # Java's Pattern.split drops trailing empty strings: "A." has no source, ".x" has source ""
        parts = re.split(re.escape(self.separator), topic)
        while parts and parts[-1] == "":
            parts.pop()
        return parts[0] if len(parts) >= 2 else None

    def upstream_topic(self, topic: str) -> str | None:
        source = self.topic_source(topic)
        return None if source is None else topic[len(source) + len(self.separator):]

    def original_topic(self, topic: str) -> str:
        upstream = self.upstream_topic(topic)
        if upstream is None or upstream == topic:
            return topic
        return self.original_topic(upstream)

    def heartbeats_topic(self) -> str:
        return HEARTBEATS_TOPIC

    def offset_syncs_topic(self, cluster_alias: str) -> str:
        return f"mm2-offset-syncs{self.internal_separator}{cluster_alias}{self.internal_separator}internal"

    def checkpoints_topic(self, cluster_alias: str) -> str:
        return f"{cluster_alias}{self._checkpoints_suffix()}"

    def _checkpoints_suffix(self) -> str:
        return f"{self.internal_separator}checkpoints{self.internal_separator}internal"

    def is_heartbeats_topic(self, topic: str) -> bool:
        return self.heartbeats_topic() == self.original_topic(topic)

    def is_checkpoints_topic(self, topic: str) -> bool:
        return topic.endswith(self._checkpoints_suffix())

    def is_mm2_internal_topic(self, topic: str) -> bool:
        return (topic.startswith("mm2") and topic.endswith(f"{self.internal_separator}internal")) \
            or self.is_checkpoints_topic(topic)

    def is_internal_topic(self, topic: str) -> bool:
        return self.is_mm2_internal_topic(topic) or topic.startswith(("__", "."))


class IdentityReplicationPolicy(DefaultReplicationPolicy):
    """Remote topics keep their names (Kafka's IdentityReplicationPolicy): every topic but heartbeats is taken to come
    from `source.cluster.alias`, so this policy cannot prevent cycles (active/active needs DefaultReplicationPolicy)."""

    def __init__(self, props: Mapping[str, str] | None = None) -> None:
        super().__init__(props)
        self.source_cluster_alias = (props or {}).get("source.cluster.alias")

    def format_remote_topic(self, source_cluster_alias: str, topic: str) -> str:
        if self._looks_like_heartbeat(topic):
            return super().format_remote_topic(source_cluster_alias, topic)
        return topic

    def topic_source(self, topic: str) -> str | None:
        return super().topic_source(topic) if self._looks_like_heartbeat(topic) else self.source_cluster_alias

    def upstream_topic(self, topic: str) -> str | None:
        return super().upstream_topic(topic) if self._looks_like_heartbeat(topic) else topic

    def _looks_like_heartbeat(self, topic: str) -> bool:
        return topic is not None and topic.endswith(self.heartbeats_topic())


def replication_policy(props: Mapping[str, str]) -> DefaultReplicationPolicy:
    """The policy `replication.policy.class` names (Kafka's class names, simple names accepted)."""
    name = props.get(REPLICATION_POLICY_CLASS, DEFAULT_POLICY).strip()
    if name in (IDENTITY_POLICY, "IdentityReplicationPolicy"):
        return IdentityReplicationPolicy(props)
    if name in (DEFAULT_POLICY, "DefaultReplicationPolicy"):
        return DefaultReplicationPolicy(props)
    from kfk.connect.config_def import ConfigException
    raise ConfigException(f"Invalid value {name} for configuration {REPLICATION_POLICY_CLASS}: kfk knows "
                          "DefaultReplicationPolicy and IdentityReplicationPolicy")
