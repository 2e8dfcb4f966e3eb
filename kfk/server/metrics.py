"""The broker's metrics in Prometheus text format, on `metrics.port` (kfk's own key; 0, the default, for none).

Names follow Kafka's MBeans the way the Prometheus JMX exporter's usual rules spell them (domain_type_name, lower
case, `_total` on counters), so dashboards written for Kafka find them:

- kafka_server_brokertopicmetrics_{messagesin,bytesin,bytesout,replicationbytesout}_total{topic}: counters kept by
  the data path (kfk.replication.broker_topic_stats defines exactly what they count; bytes in is the size of the
  record batches a leader appended, as Kafka's BytesInPerSec);
- kafka_network_requestmetrics_requests_total{request}, with Fetch also split into request="FetchConsumer" and
  "FetchFollower" as Kafka's RequestsPerSec is; kafka_network_requestmetrics_errors_total{request,error} (Kafka's
  ErrorsPerSec: each error code of each response by its Kafka name, NONE included); and the histograms
  kafka_network_requestmetrics_totaltimems{request} (from the request's last byte received to its response
  written, in ms) and kafka_network_requestmetrics_requestqueuetimems{request} (waiting behind the connection's
  earlier requests, in ms);
- kafka_server_replicamanager_{underreplicatedpartitions,underminisrpartitioncount,partitioncount,leadercount} and
  kafka_server_replicamanager_{isrshrinks,isrexpands}_total;
- kafka_controller_kafkacontroller_{activecontrollercount,offlinepartitionscount} (on the active controller, as in
  Kafka: 0 elsewhere) and {activebrokercount,fencedbrokercount} (on every node with a controller);
- kafka_network_socketserver_networkprocessoravgidlepercent and
  kafka_server_kafkarequesthandlerpool_requesthandleravgidlepercent: the event loop's idle share (LoopIdleMeter);
- kafka_log_log_size{topic,partition}: the bytes of each partition's log on this broker;
- kafka_server_delayedoperationpurgatory_purgatorysize{delayedoperation="Produce"|"Fetch"};
- kafka_server_socketservermetrics_connection_count{listener};
- kafka_consumergroup_current_offset{consumergroup,topic,partition}: the offsets the groups this broker coordinates
  committed, and kafka_consumergroup_lag (the high watermark minus that offset) for every one of those partitions,
  the leaders elsewhere asked for their high watermarks (kfk/server/metrics_lag.py says why here);
- process_cpu_seconds_total, process_resident_memory_bytes, process_open_fds, process_max_fds, ... and python_info
  (prometheus-client's process and platform collectors).

Cost: the data path only adds to integers (per partition of a request, and once per request when the endpoint is
on; a one-partition produce on the fast path one dict update more, its error code, whether or not the endpoint is
on); a response of the generic path is walked once for its error codes when the endpoint is on; the event loop's
selector is timed (two clock reads per iteration). Everything else is read when Prometheus scrapes. prometheus-client's HTTP server answers in its own thread, and
the collector reads the broker's state on the event loop (one call per scrape), never from that thread, so a scrape
sees one consistent moment and never races the broker's dictionaries.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import sys
import time
from bisect import bisect_left
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

from kfk.common.structs import TopicPartition
from kfk.errors import ErrorCode, InvalidConfigurationError
from kfk.protocol.message import Message
from kfk.protocol.messages import ApiKey, request_class
from kfk.server.dispatch import is_follower_fetch
from kfk.server.inter_broker_channels import InterBrokerChannels
from kfk.server.metrics_lag import LEADER_TIMEOUT_S, HighWatermarks

if TYPE_CHECKING:
    from kfk.server.broker import BrokerServer

__all__ = ["RequestMetrics", "BrokerCollector", "LoopIdleMeter", "MetricsEndpoint", "request_name"]

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
    request_observer); the error codes of the responses and the split of Fetch into consumers' and followers'
    (the dispatcher's response_observer)."""

    def __init__(self) -> None:
        self.by_api: dict[int, tuple[list[int], _Histogram, _Histogram]] = {}
        #: (api key, error code) -> count: every error_code field of every response, NONE too (Kafka's ErrorsPerSec
        #: counts a response's errorCounts(): the top-level code and each partition's).
        self.errors: dict[tuple[int, int], int] = {}
        #: Fetch requests from consumers and from follower replicas (Kafka's FetchConsumer and FetchFollower).
        self.fetch_consumer = 0
        self.fetch_follower = 0

    def observe(self, api_key: int, queue_s: float, total_s: float) -> None:
        entry = self.by_api.get(api_key)
        if entry is None:
            entry = self.by_api[api_key] = ([0], _Histogram(), _Histogram())
        entry[0][0] += 1
        entry[1].observe(total_s * 1000)
        entry[2].observe(queue_s * 1000)

    def observe_response(self, api_key: int, api_version: int, request: Message, response: Message) -> None:
        """A response the generic path built (the fast produce path counts its own: ProduceHandler)."""
        if api_key == ApiKey.FETCH:
            if is_follower_fetch(api_version, request):
                self.fetch_follower += 1
            else:
                self.fetch_consumer += 1
        plan = _PLANS.get(response.__class__)
        if plan is None:
            plan = _PLANS[response.__class__] = _plan(response.__class__)
        if plan is _NO_ERROR_CODES:
            return
        codes: list[int] = []
        _collect(response, plan, codes)
        errors = self.errors
        for code in codes:
            key = (api_key, code)
            errors[key] = errors.get(key, 0) + 1


#: A struct class's walk, from its generated __init__'s annotations: its error-code fields, its struct fields and its
#: list-of-struct fields (those that hold error codes somewhere below; other subtrees are never visited).
_Plan = tuple[tuple[str, ...], tuple[tuple[str, "_Plan"], ...], tuple[tuple[str, "_Plan"], ...]]
_NO_ERROR_CODES: _Plan = ((), (), ())
_PLANS: dict[type, _Plan] = {}


def _plan(cls: type) -> _Plan:
    """The fields to visit for error codes: the generated classes annotate a nested struct as `Outer.Inner` and a
    list of them as `list[Outer.Inner]`, which is all the schema this needs."""
    errors, singles, lists = [], [], []
    for name, annotation in inspect.get_annotations(cls.__init__).items():
        if name.endswith("error_code") and annotation == "int":
            errors.append(name)
            continue
        is_list = annotation.startswith("list[")
        nested = annotation.removeprefix("list[").split("]")[0].split(" | ")[0]
        if "." not in nested:
            continue
        target: Any = sys.modules[cls.__module__]
        for part in nested.split("."):
            target = getattr(target, part)
        sub = _PLANS.get(target)
        if sub is None:
            sub = _PLANS[target] = _plan(target)
        if sub is not _NO_ERROR_CODES:
            (lists if is_list else singles).append((name, sub))
    if not (errors or singles or lists):
        return _NO_ERROR_CODES
    return tuple(errors), tuple(singles), tuple(lists)


def _collect(struct: Any, plan: _Plan, codes: list[int]) -> None:
    errors, singles, lists = plan
    for name in errors:
        codes.append(getattr(struct, name))
    for name, sub in singles:
        value = getattr(struct, name)
        if value is not None:
            _collect(value, sub, codes)
    for name, sub in lists:
        for entry in getattr(struct, name) or ():
            _collect(entry, sub, codes)


class LoopIdleMeter:
    """The share of time the broker's event loop waits in its selector with nothing to do: Kafka's
    NetworkProcessorAvgIdlePercent and RequestHandlerAvgIdlePercent, which in kfk are one and the same, as one event
    loop does the network processors' and the request handlers' work (blocking work goes to executors). The loop's
    selector is timed (two clock reads per loop iteration); each scrape reports the share since the previous one."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.idle_s = 0.0
        self._last = (time.monotonic(), 0.0)
        selector = getattr(loop, "_selector", None)  # asyncio's selector loops: the one kfk runs on
        self._selector = selector
        if selector is None:
            return
        select = selector.select
        clock = time.monotonic

        def timed_select(timeout: float | None = None) -> list:
            started = clock()
            try:
                return select(timeout)
            finally:
                self.idle_s += clock() - started

        selector.select = timed_select

    def close(self) -> None:
        if self._selector is not None:
            del self._selector.select  # the class's own method again

    def idle_share(self) -> float:
        """Idle time over wall time since the previous call (1.0 when no time has passed)."""
        now, idle = time.monotonic(), self.idle_s
        then, idle_then = self._last
        self._last = (now, idle)
        return min(max((idle - idle_then) / (now - then), 0.0), 1.0) if now > then else 1.0


def request_name(api_key: int) -> str:
    """Kafka's request names (Produce, Fetch, ApiVersions...): the request class without "Request"."""
    try:
        return request_class(ApiKey(api_key)).__name__.removesuffix("Request")
    except ValueError:
        return str(api_key)


class BrokerCollector(Collector):
    """Builds the metric families from the broker's state, on the broker's event loop."""

    def __init__(self, broker: BrokerServer, requests: RequestMetrics, loop: asyncio.AbstractEventLoop,
                 high_watermarks: HighWatermarks | None, idle: LoopIdleMeter) -> None:
        self._broker = broker
        self._requests = requests
        self._loop = loop
        self._high_watermarks = high_watermarks
        self._idle = idle

    def collect(self) -> Iterator[Metric]:
        """Called in the HTTP server's thread: the reading itself runs on the event loop."""
        try:
            families = asyncio.run_coroutine_threadsafe(self._families(), self._loop).result(SCRAPE_TIMEOUT_S)
        except Exception as error:  # noqa: BLE001 - a scrape during shutdown gets nothing, the broker keeps going
            log.warning("metrics scrape failed: %s", error)
            return iter(())
        return iter(families)

    async def _families(self) -> list[Metric]:
        """Everything read from the broker's state at one moment, then the lag (which may wait for other brokers'
        end offsets: the broker's state is not read again after that wait). A controller-only node has no replicas
        or groups: it reports its requests, controller, connections and idle share."""
        now = [*self._request_families(), *self._controller_families(), *self._server_families()]
        if self._high_watermarks is None:
            return now
        return [*now, *self._topic_families(), *self._replica_families(), *await self._group_families()]

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
        requests.add_metric(["FetchConsumer"], self._requests.fetch_consumer)
        requests.add_metric(["FetchFollower"], self._requests.fetch_follower)
        errors = CounterMetricFamily(prefix + "errors", "Error codes in responses, NONE included (a response with "
                                     "many partitions counts each partition's).", labels=["request", "error"])
        counts = dict(self._requests.errors)
        produce_handler = self._broker.produce_handler
        for code, count in (produce_handler.fast_error_counts if produce_handler is not None else {}).items():
            counts[(ApiKey.PRODUCE, code)] = counts.get((ApiKey.PRODUCE, code), 0) + count
        for (api_key, code), count in sorted(counts.items()):
            errors.add_metric([request_name(api_key), _error_name(code)], count)
        return [requests, total, queue, errors]

    def _replica_families(self) -> list[Metric]:
        replica_manager = self._broker.replica_manager
        prefix = "kafka_server_replicamanager_"
        partitions = list(replica_manager.partitions.values())
        led = [partition for partition in partitions if partition.is_leader]
        under_replicated = sum(1 for partition in led
                               if len(partition.in_sync_replicas) < len(partition.assigned_replicas))
        under_min_isr = sum(1 for partition in led if partition.is_under_min_isr)
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
            GaugeMetricFamily(prefix + "underminisrpartitioncount", "Partitions this broker leads whose ISR is "
                              "smaller than min.insync.replicas (acks=all produce is refused).", value=under_min_isr),
            GaugeMetricFamily(prefix + "partitioncount", "Partitions hosted by this broker.", value=len(partitions)),
            GaugeMetricFamily(prefix + "leadercount", "Partitions this broker leads.", value=len(led)),
            CounterMetricFamily(prefix + "isrshrinks", "ISR shrinks of partitions this broker leads.",
                                value=replica_manager.isr_shrinks),
            CounterMetricFamily(prefix + "isrexpands", "ISR expansions of partitions this broker leads.",
                                value=replica_manager.isr_expands),
            sizes, purgatory]

    def _controller_families(self) -> list[Metric]:
        """Kafka's KafkaController metrics. The active controller reports offline partitions (0 elsewhere); every
        controller reports the brokers it sees registered, active (unfenced) and fenced, as Kafka's controllers do
        (a dashboard takes the maximum over them); a broker without a controller reports none of the two."""
        controller = self._broker.controller
        active = controller is not None and controller.is_active
        offline = 0
        if active:
            offline = sum(1 for topic in controller.image.topics_by_id.values()
                          for registration in topic.partitions.values() if registration.leader < 0)
        prefix = "kafka_controller_kafkacontroller_"
        families = [
            GaugeMetricFamily(prefix + "activecontrollercount", "1 on the active controller.", value=int(active)),
            GaugeMetricFamily(prefix + "offlinepartitionscount", "Partitions without a leader (reported by the "
                              "active controller).", value=offline)]
        if controller is not None:
            brokers = controller.image.brokers.values()
            fenced = sum(1 for broker in brokers if broker.fenced)
            families += [
                GaugeMetricFamily(prefix + "activebrokercount", "Registered brokers not fenced, as this controller "
                                  "sees them.", value=len(brokers) - fenced),
                GaugeMetricFamily(prefix + "fencedbrokercount", "Registered brokers fenced, as this controller "
                                  "sees them.", value=fenced)]
        return families

    def _server_families(self) -> list[Metric]:
        connections = GaugeMetricFamily("kafka_server_socketservermetrics_connection_count", "Open connections.",
                                        labels=["listener"])
        socket_server = self._broker.socket_server
        for listener in socket_server.listeners:
            connections.add_metric([listener.name], socket_server.quotas.by_listener.get(listener.name, 0))
        idle = self._idle.idle_share()
        return [connections,
                GaugeMetricFamily("kafka_network_socketserver_networkprocessoravgidlepercent", "Share of time (0 to 1) "
                                  "the event loop, which does the network processors' work, waited with nothing to "
                                  "do, since the previous scrape.", value=idle),
                GaugeMetricFamily("kafka_server_kafkarequesthandlerpool_requesthandleravgidlepercent", "Share of time "
                                  "(0 to 1) the event loop, which runs the request handlers, waited with nothing to "
                                  "do, since the previous scrape (the same loop as the network's).", value=idle)]

    async def _group_families(self) -> list[Metric]:
        offsets = GaugeMetricFamily("kafka_consumergroup_current_offset", "Committed offsets of the groups this "
                                    "broker coordinates.", labels=["consumergroup", "topic", "partition"])
        lags = GaugeMetricFamily("kafka_consumergroup_lag", "High watermark minus the committed offset, for every "
                                 "partition of the groups this broker coordinates (kfk/server/metrics_lag.py).",
                                 labels=["consumergroup", "topic", "partition"])
        coordinator = self._broker.group_coordinator
        _, groups = coordinator.list_groups([], [])
        committed_offsets: list[tuple[list[str], TopicPartition, int]] = []
        for group in sorted(groups, key=lambda g: g.group_id):
            error, topics = coordinator.fetch_offsets(group.group_id, None)
            for topic, partitions in topics if error == ErrorCode.NONE else ():
                for index, committed, partition_error in partitions:
                    if committed is None or partition_error != ErrorCode.NONE:
                        continue
                    labels = [group.group_id, topic, str(index)]
                    offsets.add_metric(labels, committed.committed_offset)
                    committed_offsets.append((labels, TopicPartition(topic, index), committed.committed_offset))
        if committed_offsets:
            high_watermarks = await self._high_watermarks.of({entry[1] for entry in committed_offsets})
            for labels, topic_partition, committed_offset in committed_offsets:
                high_watermark = high_watermarks.get(topic_partition)
                if high_watermark is not None:
                    lags.add_metric(labels, max(high_watermark - committed_offset, 0))
        return [offsets, lags]


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)


class MetricsEndpoint:
    """prometheus-client's HTTP server on metrics.host:metrics.port, serving the broker's collector and
    prometheus-client's process collector (process_cpu_seconds_total, process_resident_memory_bytes,
    process_open_fds, ...) and platform collector (python_info)."""

    def __init__(self, broker: BrokerServer) -> None:
        from prometheus_client import PlatformCollector, ProcessCollector, start_http_server

        config = broker.config
        loop = asyncio.get_running_loop()
        self.requests = RequestMetrics()
        self.idle = LoopIdleMeter(loop)
        self.channels: InterBrokerChannels | None = None
        high_watermarks = None
        if broker.replica_manager is not None:  # a broker, not a controller-only node
            self.channels = InterBrokerChannels(
                broker.node_id, "metrics", broker.metadata_cache, broker.replica_manager.inter_broker_listener,
                int(LEADER_TIMEOUT_S * 1000), broker.inter_broker_ssl, broker.inter_broker_sasl)
            high_watermarks = HighWatermarks(broker.node_id, broker.replica_manager, broker.metadata_cache,
                                             self.channels)
        registry = CollectorRegistry(auto_describe=False)
        registry.register(BrokerCollector(broker, self.requests, loop, high_watermarks, self.idle))
        ProcessCollector(registry=registry)
        PlatformCollector(registry=registry)
        try:
            self._server, self._thread = start_http_server(config.metrics_port, config.metrics_host, registry)
        except OSError as error:  # the broker does not start, and says why in one line
            self.idle.close()
            raise InvalidConfigurationError(f"metrics.port: cannot listen on {config.metrics_host}:"
                                            f"{config.metrics_port}: {error.strerror or error}") from error
        broker.socket_server.request_observer = self.requests.observe
        broker.dispatcher.response_observer = self.requests.observe_response
        log.info("metrics on http://%s:%d/metrics", config.metrics_host, config.metrics_port)

    def stop(self) -> None:
        """Stops the HTTP server (blocking: run in an executor); then close() on the loop."""
        self._server.shutdown()
        self._server.server_close()

    async def close(self) -> None:
        self.idle.close()
        if self.channels is not None:
            await self.channels.close()
