"""MirrorMaker 2 in dedicated mode (Kafka's MirrorMaker, connect-mirror-maker.sh): one mm2.properties describing
every cluster and replication flow, run as one distributed Connect herder per source->target pair.

The properties are Kafka's: `clusters = A, B`; `A.bootstrap.servers` and other `<alias>.` keys for each cluster;
`A->B.enabled = true` and `A->B.<key>` for a flow's connector settings (`A->B.topics`, `A->B.groups`, ...); other
connector keys (`replication.factor`, `sync.group.offsets.enabled`, ...) apply to every flow. As in Kafka, a pair
gets a herder when its flow is enabled or when it emits heartbeats (on by default, so B->A exists to put heartbeats
into A for the A->B flow). A herder works against its target cluster with Kafka's worker defaults for MirrorMaker:
group `<source>-mm2`, topics `mm2-configs.<source>.internal`, `mm2-offsets.<source>.internal`,
`mm2-status.<source>.internal`, ByteArrayConverter for keys, values and headers. When a herder leads its group it
writes the three connectors' configs (named MirrorSourceConnector, MirrorCheckpointConnector,
MirrorHeartbeatConnector) to its config topic unless they are there already, so a Java MirrorMaker and kfk's can
share or take over the same herders.
"""

from __future__ import annotations

import logging
import socket
import threading
import uuid
from typing import TYPE_CHECKING, Iterable, Mapping

from kfk.connect.config_def import ConfigException
from kfk.connect.connector_config import source_config_def
from kfk.connect.mirror.config import ALL_CONFIG_NAMES, CLIENT_KEY, with_prefix

if TYPE_CHECKING:
    from kfk.connect.distributed import DistributedHerder

log = logging.getLogger("kfk.connect.mirror")

CLUSTERS = "clusters"
BYTE_ARRAY_CONVERTER = "org.apache.kafka.connect.converters.ByteArrayConverter"
CONNECTOR_CLASSES = ("org.apache.kafka.connect.mirror.MirrorSourceConnector",
                     "org.apache.kafka.connect.mirror.MirrorHeartbeatConnector",
                     "org.apache.kafka.connect.mirror.MirrorCheckpointConnector")
#: Keys every connector accepts (Kafka's ConnectorConfig, which MirrorMaker's connector ConfigDefs extend).
FRAMEWORK_CONFIG_NAMES = set(source_config_def("").keys)
CLIENT_ROLES = ("consumer", "producer", "admin")


def _true(value: str | None) -> bool:
    return (value or "").strip().lower() == "true"


class SourceAndTarget(tuple):
    def __new__(cls, source: str, target: str) -> SourceAndTarget:
        return super().__new__(cls, (source, target))

    @property
    def source(self) -> str:
        return self[0]

    @property
    def target(self) -> str:
        return self[1]

    def __str__(self) -> str:
        return f"{self.source}->{self.target}"


class MirrorMakerConfig:
    """Kafka's MirrorMakerConfig: the flows of an mm2.properties and each herder's worker and connector configs."""

    def __init__(self, props: Mapping[str, str]) -> None:
        self.raw = {key: str(value) for key, value in props.items()}
        if not self.raw.get(CLUSTERS, "").strip():
            raise ConfigException(f'Missing required configuration "{CLUSTERS}" which has no default value.')
        self.clusters = [alias.strip() for alias in self.raw[CLUSTERS].split(",") if alias.strip()]

    def cluster_pairs(self) -> list[SourceAndTarget]:
        heartbeats_default = _true(self.raw.get("emit.heartbeats.enabled", "true"))
        pairs = []
        for source in self.clusters:
            for target in self.clusters:
                if source == target:
                    continue
                prefix = f"{source}->{target}."
                heartbeats = heartbeats_default
                if prefix + "emit.heartbeats.enabled" in self.raw:
                    heartbeats = _true(self.raw[prefix + "emit.heartbeats.enabled"])
                if _true(self.raw.get(prefix + "enabled")) or heartbeats:
                    pairs.append(SourceAndTarget(source, target))
        return pairs

    def _with_prefix_kept(self, prefix: str) -> dict[str, str]:
        return {key: value for key, value in self.raw.items() if key.startswith(prefix)}

    def cluster_props(self, cluster: str) -> dict[str, str]:
        """`<cluster>.` keys, the cluster's connection keys copied to its producer., consumer. and admin. clients,
        then the top-level connection keys as defaults."""
        props = with_prefix(self.raw, cluster + ".")
        for key, value in list(props.items()):
            if CLIENT_KEY.fullmatch(key):
                for role in CLIENT_ROLES:
                    props.setdefault(f"{role}.{key}", value)
        for key, value in self.raw.items():
            if CLIENT_KEY.fullmatch(key):
                for role in CLIENT_ROLES:
                    props.setdefault(f"{role}.{key}", value)
                props.setdefault(key, value)
        return props

    def worker_config(self, pair: SourceAndTarget) -> dict[str, str]:
        props = self.cluster_props(pair.target)
        for prefix in ("offset.storage", "config.storage", "status.storage", "key.converter", "value.converter",
                       "header.converter", "task", "worker", "replication.policy"):
            props.update(self._with_prefix_kept(prefix))
        props.setdefault("client.id", str(pair))
        props.setdefault("group.id", f"{pair.source}-mm2")
        props.setdefault("offset.storage.topic", f"mm2-offsets.{pair.source}.internal")
        props.setdefault("status.storage.topic", f"mm2-status.{pair.source}.internal")
        props.setdefault("config.storage.topic", f"mm2-configs.{pair.source}.internal")
        for converter in ("key.converter", "value.converter", "header.converter"):
            props.setdefault(converter, BYTE_ARRAY_CONVERTER)
        return props

    def connector_base_config(self, pair: SourceAndTarget, connector_class: str) -> dict[str, str]:
        names = ALL_CONFIG_NAMES | FRAMEWORK_CONFIG_NAMES
        props = {key: value for key, value in self.raw.items() if key in names}
        props.update(self._with_prefix_kept("replication.policy"))
        for side, cluster in (("source", pair.source), ("target", pair.target)):
            for key, value in self.cluster_props(cluster).items():
                if key.startswith(CLIENT_ROLES):
                    props[f"{side}.{key}"] = value
                else:
                    props[f"{side}.cluster.{key}"] = value
        props.setdefault("name", connector_class.rsplit(".", 1)[-1])
        props.setdefault("connector.class", connector_class)
        props.setdefault("source.cluster.alias", pair.source)
        props.setdefault("target.cluster.alias", pair.target)
        props.update(with_prefix(self.raw, f"{pair}."))
        props.setdefault("enabled", "false")
        return props


class MirrorMaker:
    """The herders of one MirrorMaker node: those of every pair whose target is in `clusters` (all by default)."""

    def __init__(self, props: Mapping[str, str], clusters: Iterable[str] | None = None) -> None:
        self.config = MirrorMakerConfig(props)
        targets = set(clusters or ()) or set(self.config.clusters)
        self.pairs = [pair for pair in self.config.cluster_pairs() if pair.target in targets]
        if not self.pairs:
            raise ConfigException("No source->target replication flows.")
        self.herders: dict[SourceAndTarget, DistributedHerder] = {}
        self.stopping = threading.Event()
        self.thread: threading.Thread | None = None

    def start(self) -> None:
        from kfk.connect.distributed import DistributedHerder

        for pair in self.pairs:
            worker_id = f"{socket.getfqdn()}/{pair}/{uuid.uuid4()}"
            log.info("starting the herder for %s", pair)
            self.herders[pair] = DistributedHerder(self.config.worker_config(pair), worker_id, "NOTUSED")
        self.thread = threading.Thread(target=self._configure_when_leader, name="kfk-mirror-maker", daemon=True)
        self.thread.start()

    def _configure_when_leader(self) -> None:
        """Kafka's MirrorHerder: a herder that becomes its group's leader writes the connector configs that differ."""
        was_leader: dict[SourceAndTarget, bool] = {}
        while not self.stopping.wait(0.5):
            for pair, herder in self.herders.items():
                try:
                    leader = herder.write_leader_url() is None
                except Exception:  # rebalancing
                    continue
                if leader and not was_leader.get(pair):
                    try:
                        self._configure_connectors(pair, herder)
                    except Exception:
                        log.exception("configuring the connectors of %s failed; will retry", pair)
                        continue
                was_leader[pair] = leader

    def _configure_connectors(self, pair: SourceAndTarget, herder: DistributedHerder) -> None:
        for connector_class in CONNECTOR_CLASSES:
            desired = self.config.connector_base_config(pair, connector_class)
            name = desired["name"]
            with herder.lock:
                actual = herder.snapshot.connectors.get(name)
            if actual != desired:
                log.info("%s: configuring connector %s", pair, name)
                herder.put_connector_config(name, desired, allow_replace=True)

    def stop(self) -> None:
        self.stopping.set()
        if self.thread is not None:
            self.thread.join(5)
        # each herder waits for its own cluster: side by side, a cluster that is down delays the stop once
        stopping = [threading.Thread(target=herder.stop, daemon=True) for herder in self.herders.values()]
        for thread in stopping:
            thread.start()
        for thread in stopping:
            thread.join()
