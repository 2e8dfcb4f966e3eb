"""MirrorHeartbeatConnector and MirrorHeartbeatTask (Kafka's): one task writing a Heartbeat record
{source alias, target alias, timestamp} to the target's `heartbeats` topic every `emit.heartbeats.interval.seconds`.
Replicated onward as `<alias>.heartbeats`, heartbeats show that a replication flow is alive end to end."""

from __future__ import annotations

import threading
import time
from typing import Mapping

from kfk.connect.config_def import ConfigDef
from kfk.connect.connector import SourceConnector, SourceTask
from kfk.connect.data import BYTES_SCHEMA
from kfk.connect.mirror.admin_tasks import create_single_partition_compacted_topic
from kfk.connect.mirror.config import HEARTBEAT_CONFIG_DEF, MirrorConfig
from kfk.connect.mirror.records import Heartbeat, wrap_offset
from kfk.connect.mirror.source import _version
from kfk.connect.records import SourceRecord


class MirrorHeartbeatConnector(SourceConnector):
    def version(self) -> str:
        return _version()

    def config(self) -> ConfigDef:
        return HEARTBEAT_CONFIG_DEF

    def task_class(self) -> type:
        return MirrorHeartbeatTask

    def start(self, props: Mapping[str, str]) -> None:
        self.mirror_config = config = MirrorConfig(props, HEARTBEAT_CONFIG_DEF)
        create_single_partition_compacted_topic(config.target_admin("heartbeats-target-admin"),
                                                config.replication_policy().heartbeats_topic(),
                                                config["heartbeats.topic.replication.factor"])

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        if self.mirror_config.interval_seconds("emit.heartbeats") is None:
            return []
        return [dict(self.mirror_config.props)]  # a single task

    def stop(self) -> None:
        pass


class MirrorHeartbeatTask(SourceTask):
    def version(self) -> str:
        return _version()

    def start(self, props: Mapping[str, str]) -> None:
        config = MirrorConfig(props, HEARTBEAT_CONFIG_DEF)
        self.source_cluster_alias, self.target_cluster_alias = config.source_cluster_alias, config.target_cluster_alias
        self.topic = config.replication_policy().heartbeats_topic()
        self.interval = config.interval_seconds("emit.heartbeats") or 1.0
        self.stopped = threading.Event()

    def poll(self) -> list[SourceRecord] | None:
        if self.stopped.wait(self.interval):
            return None
        timestamp = int(time.time() * 1000)
        heartbeat = Heartbeat(self.source_cluster_alias, self.target_cluster_alias, timestamp)
        return [SourceRecord(self.topic, 0, BYTES_SCHEMA, heartbeat.record_key(), BYTES_SCHEMA,
                             heartbeat.record_value(), timestamp, source_partition=heartbeat.connect_partition(),
                             source_offset=wrap_offset(0))]

    def stop(self) -> None:
        self.stopped.set()
