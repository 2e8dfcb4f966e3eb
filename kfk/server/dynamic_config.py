"""DynamicBrokerConfig: puts the dynamic broker configs of the metadata image in force on this broker.

`kfk configs --alter --broker 1` (or `--entity-default`) writes ConfigRecords of resource type BROKER, name "1" or
"" (in ZooKeeper /config/brokers/1 or /config/brokers/<default>); every broker's image carries them, after a
restart too. On each image that changes them, this broker's BrokerConfig takes them (its own over the default over
server.properties, BrokerConfig.reconfigure) and the components that act on a changed key are called. What each
key does in kfk:
- the broker defaults of topic configs (log.retention.ms, log.retention.bytes, log.segment.bytes,
  message.max.bytes, log.cleanup.policy, compression.type, min.insync.replicas, ...): every hosted log without an
  override of its own takes the new value at once (the replica manager recomputes the topics' LogConfigs, on the
  same image): the next roll uses the new segment size, the next Produce the new size limit, the next retention
  pass the new retention;
- listeners (with listener.security.protocol.map): the broker binds the listeners added and closes those dropped
  (never the inter-broker one), then publishes its endpoints (BrokerServer._update_listeners); a restart binds
  them again;
- max.connections, max.connections.per.ip, max.connections.per.ip.overrides, max.connection.creation.rate: the
  connection limits of the next connection (ConnectionQuotas.reconfigure);
- log.cleaner.threads, log.cleaner.backoff.ms, log.cleaner.io.max.bytes.per.second: the cleaner threads are
  stopped and started anew with them (LogManager.reconfigure_cleaner), as Kafka's LogCleaner.reconfigure;
- num.replica.fetchers: the followed partitions are spread over that many fetchers per leader again
  (ReplicaFetcherManager.resize), as Kafka resizes its fetcher pool;
- leader/follower.replication.throttled.rate: the replica manager reads them from the image (reassignments);
- num.io.threads, num.network.threads, background.threads and the other keys Kafka updates at run time are
  accepted, stored and described as in Kafka; kfk serves every connection on one asyncio event loop and runs
  blocking work in the default executor, so it has no such pools to resize.
"""

from __future__ import annotations

import logging
from typing import Callable

from kfk.common.config_types import ConfigResourceType
from kfk.config import BrokerConfig
from kfk.metadata.image import MetadataImage

log = logging.getLogger(__name__)

#: Called with the names of the keys whose value changed.
Reconfigurable = Callable[[set[str]], None]


class DynamicBrokerConfig:
    def __init__(self, config: BrokerConfig, node_id: int) -> None:
        self.config = config
        self.node_id = node_id
        self._reconfigurables: list[Reconfigurable] = []

    def add_reconfigurable(self, reconfigurable: Reconfigurable) -> None:
        self._reconfigurables.append(reconfigurable)

    def on_metadata_update(self, previous: MetadataImage, current: MetadataImage) -> None:
        """MetadataCache listener, subscribed before every component that reads the config."""
        default = current.config(ConfigResourceType.BROKER, "")
        own = current.config(ConfigResourceType.BROKER, str(self.node_id))
        if default == self.config.dynamic_default and own == self.config.dynamic_broker:
            return
        changed = self.config.reconfigure(default, own)
        if changed:
            log.info("Dynamic broker configs now in force: %s",
                     ", ".join(f"{name}={self.config.values[name]}" for name in sorted(changed)))
        for reconfigurable in self._reconfigurables:
            reconfigurable(changed)
