"""BrokerTopicStats: the traffic counters the data path keeps per topic (Kafka's BrokerTopicMetrics).

Plain integers, added to once per partition of a produce or fetch (never per record), on the event loop: the cost
on the hot path is a dict lookup and two additions. The broker's metrics endpoint (kfk.server.metrics) reads them
when scraped. What each counts, as Kafka's BytesInPerSec, MessagesInPerSec, BytesOutPerSec and
ReplicationBytesOutPerSec do:
- bytes_in: the size of the records field of each partition a leader appended successfully (what the client sent,
  batch headers included, before any conversion), coordinator writes to internal topics included;
- messages_in: the records those appends added (from the batch headers);
- bytes_out / replication_bytes_out: the size of the records a fetch returned per partition, to consumers / to
  follower replicas.
A deleted topic's counters are dropped, as Kafka removes its metrics.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["TopicCounters", "BrokerTopicStats"]


@dataclass(slots=True)
class TopicCounters:
    messages_in: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    replication_bytes_out: int = 0


class BrokerTopicStats:
    def __init__(self) -> None:
        self.topics: dict[str, TopicCounters] = {}

    def topic(self, name: str) -> TopicCounters:
        counters = self.topics.get(name)
        if counters is None:
            counters = self.topics[name] = TopicCounters()
        return counters

    def remove(self, name: str) -> None:
        self.topics.pop(name, None)
