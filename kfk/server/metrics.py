"""The broker's metrics in Prometheus text format, on `metrics.port` (kfk's own key; 0, the default, for none).

Names follow Kafka's MBeans the way the Prometheus JMX exporter's usual rules spell them (domain_type_name, lower
case, `_total` on counters), so dashboards written for Kafka find them:

- kafka_server_brokertopicmetrics_{messagesin,bytesin,bytesout,replicationbytesout}_total{topic}: counters kept by
  the data path (kfk.replication.broker_topic_stats defines exactly what they count; bytes in is the size of the
  record batches a leader appended, as Kafka's BytesInPerSec);
- kafka_network_requestmetrics_requests_total{request}, and the histograms
  kafka_network_requestmetrics_totaltimems{request} (from the request's last byte received to its response
  written, in ms) and kafka_network_requestmetrics_requestqueuetimems{request} (waiting behind the connection's
  earlier requests, in ms);
- kafka_server_replicamanager_{underreplicatedpartitions,partitioncount,leadercount} and
  kafka_server_replicamanager_{isrshrinks,isrexpands}_total;
- kafka_controller_kafkacontroller_{activecontrollercount,offlinepartitionscount} (on the active controller, as in
  Kafka: 0 elsewhere);
- kafka_log_log_size{topic,partition}: the bytes of each partition's log on this broker;
- kafka_server_delayedoperationpurgatory_purgatorysize{delayedoperation="Produce"|"Fetch"};
- kafka_server_socketservermetrics_connection_count{listener};
- kafka_consumergroup_current_offset{consumergroup,topic,partition}: the offsets the groups this broker coordinates
  committed, and kafka_consumergroup_lag (the high watermark minus that offset) for those partitions this broker
  also leads (only the leader knows the high watermark; `kfk cluster describe` gives every group's lag).

Cost: the data path only adds to integers (per partition of a request, and once per request when the endpoint is
on); everything else is read when Prometheus scrapes. prometheus-client's HTTP server answers in its own thread, and
the collector reads the broker's state on the event loop (one call per scrape), never from that thread, so a scrape
sees one consistent moment and never races the broker's dictionaries.
"""

from __future__ import annotations

import asyncio
import logging
from bisect import bisect_left
from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

from kfk.common.structs import TopicPartition
from kfk.errors import ErrorCode, InvalidConfigurationError
from kfk.protocol.messages import ApiKey, request_class

if TYPE_CHECKING:
    from kfk.server.broker import BrokerServer

__all__ = ["RequestMetrics", "BrokerCollector", "MetricsEndpoint", "request_name"]

log = logging.getLogger("kfk.server.metrics")

#: Histogram bucket upper bounds, in ms (Kafka reports percentiles; Prometheus computes them from buckets).
TIME_BUCKETS_MS = (0.5, 1.0, 2.5, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1000.0, 2500.0, 5000.0, 10000.0,
                   30000.0)
#: How long a scrape waits for the event loop to read the broker's state.
SCRAPE_TIMEOUT_S = 10.0


class _Histogram:
    """Counts per bucket (not cumulative: one addition per observation) and the sum."""

    __slots__ = ("counts", "sum")

    def __init__(self) -> None:
        self.counts = [0] * (len(TIME_BUCKETS_MS) + 1)
        self.sum = 0.0

    def observe(self, value_ms: float) -> None:
        self.counts[bisect_left(TIME_BUCKETS_MS, value_ms)] += 1
        self.sum += value_ms

    def buckets(self) -> list[tuple[str, int]]:
        """Prometheus' cumulative buckets, +Inf last."""
        total, result = 0, []
        for bound, count in zip((*map(str, TIME_BUCKETS_MS), "+Inf"), self.counts):
            total += count
            result.append((bound, total))
        return result


class RequestMetrics:
    """Kafka's RequestMetrics per API: requests answered, total time and queue time (the socket server's
    request_observer)."""

    def __init__(self) -> None:
        self.by_api: dict[int, tuple[list[int], _Histogram, _Histogram]] = {}

    def observe(self, api_key: int, queue_s: float, total_s: float) -> None:
        entry = self.by_api.get(api_key)
        if entry is None:
            entry = self.by_api[api_key] = ([0], _Histogram(), _Histogram())
        entry[0][0] += 1
        entry[1].observe(total_s * 1000)
        entry[2].observe(queue_s * 1000)


def request_name(api_key: int) -> str:
    """Kafka's request names (Produce, Fetch, ApiVersions...): the request class without "Request"."""
    try:
        return request_class(ApiKey(api_key)).__name__.removesuffix("Request")
    except ValueError:
        return str(api_key)


class BrokerCollector(Collector):
    """Builds the metric families from the broker's state, on the broker's event loop."""

    def __init__(self, broker: BrokerServer, requests: RequestMetrics, loop: asyncio.AbstractEventLoop) -> None:
        self._broker = broker
        self._requests = requests
        self._loop = loop

    def collect(self) -> Iterator[Metric]:
        """Called in the HTTP server's thread: the reading itself runs on the event loop."""

        async def read() -> list[Metric]:
            return self._families()

        try:
            families = asyncio.run_coroutine_threadsafe(read(), self._loop).result(SCRAPE_TIMEOUT_S)
        except Exception as error:  # noqa: BLE001 - a scrape during shutdown gets nothing, the broker keeps going
            log.warning("metrics scrape failed: %s", error)
            return iter(())
        return iter(families)

    def _families(self) -> list[Metric]:
        return [*self._topic_families(), *self._request_families(), *self._replica_families(),
                *self._controller_families(), *self._server_families(), *self._group_families()]

    def _topic_families(self) -> list[Metric]:
        prefix = "kafka_server_brokertopicmetrics_"
        families = {name: CounterMetricFamily(prefix + name, text, labels=["topic"]) for name, text in (
            ("messagesin", "Records appended by this broker as leader."),
            ("bytesin", "Bytes of record batches appended by this broker as leader, as received."),
            ("bytesout", "Bytes of records fetched from this broker by consumers."),
            ("replicationbytesout", "Bytes of records fetched from this broker by follower replicas."))}
        for topic, counters in sorted(self._broker.replica_manager.topic_stats.topics.items()):
            families["messagesin"].add_metric([topic], counters.messages_in)
            families["bytesin"].add_metric([topic], counters.bytes_in)
            families["bytesout"].add_metric([topic], counters.bytes_out)
            families["replicationbytesout"].add_metric([topic], counters.replication_bytes_out)
        return list(families.values())

    def _request_families(self) -> list[Metric]:
        prefix = "kafka_network_requestmetrics_"
        requests = CounterMetricFamily(prefix + "requests", "Requests answered.", labels=["request"])
        total = HistogramMetricFamily(prefix + "totaltimems", "From a request's arrival to its response written, ms.",
                                      labels=["request"])
        queue = HistogramMetricFamily(prefix + "requestqueuetimems", "Time a request waited behind its "
                                      "connection's earlier requests, ms.", labels=["request"])
        for api_key, (count, total_time, queue_time) in sorted(self._requests.by_api.items()):
            labels = [request_name(api_key)]
            requests.add_metric(labels, count[0])
            total.add_metric(labels, total_time.buckets(), total_time.sum)
            queue.add_metric(labels, queue_time.buckets(), queue_time.sum)
        return [requests, total, queue]

    def _replica_families(self) -> list[Metric]:
        replica_manager = self._broker.replica_manager
        prefix = "kafka_server_replicamanager_"
        partitions = list(replica_manager.partitions.values())
        led = [partition for partition in partitions if partition.is_leader]
        under_replicated = sum(1 for partition in led
                               if len(partition.in_sync_replicas) < len(partition.assigned_replicas))
        sizes = GaugeMetricFamily("kafka_log_log_size", "Bytes of the partition's log on this broker.",
                                  labels=["topic", "partition"])
        for partition in sorted(partitions, key=lambda p: p.topic_partition):
            sizes.add_metric([partition.topic_partition.topic, str(partition.topic_partition.partition)],
                             partition.log.size)
        purgatory = GaugeMetricFamily("kafka_server_delayedoperationpurgatory_purgatorysize",
                                      "Requests waiting in the purgatory.", labels=["delayedoperation"])
        purgatory.add_metric(["Produce"], replica_manager.produce_purgatory.delayed)
        purgatory.add_metric(["Fetch"], replica_manager.fetch_purgatory.delayed)
        return [
            GaugeMetricFamily(prefix + "underreplicatedpartitions", "Partitions this broker leads whose ISR is "
                              "smaller than their replica set.", value=under_replicated),
            GaugeMetricFamily(prefix + "partitioncount", "Partitions hosted by this broker.", value=len(partitions)),
            GaugeMetricFamily(prefix + "leadercount", "Partitions this broker leads.", value=len(led)),
            CounterMetricFamily(prefix + "isrshrinks", "ISR shrinks of partitions this broker leads.",
                                value=replica_manager.isr_shrinks),
            CounterMetricFamily(prefix + "isrexpands", "ISR expansions of partitions this broker leads.",
                                value=replica_manager.isr_expands),
            sizes, purgatory]

    def _controller_families(self) -> list[Metric]:
        controller = self._broker.controller
        active = controller is not None and controller.is_active
        offline = 0
        if active:
            offline = sum(1 for topic in controller.image.topics_by_id.values()
                          for registration in topic.partitions.values() if registration.leader < 0)
        prefix = "kafka_controller_kafkacontroller_"
        return [GaugeMetricFamily(prefix + "activecontrollercount", "1 on the active controller.", value=int(active)),
                GaugeMetricFamily(prefix + "offlinepartitionscount", "Partitions without a leader (reported by the "
                                  "active controller).", value=offline)]

    def _server_families(self) -> list[Metric]:
        connections = GaugeMetricFamily("kafka_server_socketservermetrics_connection_count", "Open connections.",
                                        labels=["listener"])
        socket_server = self._broker.socket_server
        for listener in socket_server.listeners:
            connections.add_metric([listener.name], socket_server.quotas.by_listener.get(listener.name, 0))
        return [connections]

    def _group_families(self) -> list[Metric]:
        offsets = GaugeMetricFamily("kafka_consumergroup_current_offset", "Committed offsets of the groups this "
                                    "broker coordinates.", labels=["consumergroup", "topic", "partition"])
        lags = GaugeMetricFamily("kafka_consumergroup_lag", "High watermark minus the committed offset, for "
                                 "partitions this broker leads.", labels=["consumergroup", "topic", "partition"])
        coordinator = self._broker.group_coordinator
        replica_manager = self._broker.replica_manager
        _, groups = coordinator.list_groups([], [])
        for group in sorted(groups, key=lambda g: g.group_id):
            error, topics = coordinator.fetch_offsets(group.group_id, None)
            for topic, partitions in topics if error == ErrorCode.NONE else ():
                for index, committed, partition_error in partitions:
                    if committed is None or partition_error != ErrorCode.NONE:
                        continue
                    labels = [group.group_id, topic, str(index)]
                    offsets.add_metric(labels, committed.committed_offset)
                    hosted = replica_manager.get_partition(TopicPartition(topic, index))
                    if hosted is not None and hosted.is_leader:
                        lags.add_metric(labels, max(hosted.log.high_watermark - committed.committed_offset, 0))
        return [offsets, lags]


class MetricsEndpoint:
    """prometheus-client's HTTP server on metrics.host:metrics.port, serving the broker's collector."""

    def __init__(self, broker: BrokerServer) -> None:
        from prometheus_client import start_http_server

        config = broker.config
        self.requests = RequestMetrics()
        registry = CollectorRegistry(auto_describe=False)
        registry.register(BrokerCollector(broker, self.requests, asyncio.get_running_loop()))
        try:
            self._server, self._thread = start_http_server(config.metrics_port, config.metrics_host, registry)
        except OSError as error:  # the broker does not start, and says why in one line
            raise InvalidConfigurationError(f"metrics.port: cannot listen on {config.metrics_host}:"
                                            f"{config.metrics_port}: {error.strerror or error}") from error
        broker.socket_server.request_observer = self.requests.observe
        log.info("metrics on http://%s:%d/metrics", config.metrics_host, config.metrics_port)

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
