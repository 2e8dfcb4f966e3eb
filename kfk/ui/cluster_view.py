"""What the console shows and does, as plain data, through kfk's client library only (Admin, Producer, Consumer):
so the console works against any Kafka cluster, and the pages are templates over these values.

One ClusterView per console process holds one Admin (its calls are thread-safe: each runs on the client's own
event loop thread) and, once a message is produced from the page, one Producer. Browsing messages uses a short-lived
Consumer without a group per request: reading a partition from an offset must not leave a group behind or move
anyone's committed offsets, as Kafka UIs promise.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeoutError
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kfk.client import Admin, Consumer, Producer
from kfk.client.config import ADMIN_CONFIG_DEF, CONSUMER_CONFIG_DEF, PRODUCER_CONFIG_DEF
from kfk.client.structs import (
    AlterConfigOp,
    AlterConfigOpType,
    SHARE_PROTOCOL_TYPE,
    ConfigResource,
    ConsumerGroupDescription,
    ElectionType,
    NewPartitionReassignment,
    NewTopic,
    PartitionInfo,
    ProducerState,
    TopicDescription,
)
from kfk.common.config_types import ConfigResourceType
from kfk.common.constants import NO_NODE
from kfk.common.structs import OffsetAndMetadata, TopicPartition
from kfk.errors import ElectionNotNeededError, GroupIdNotFoundError, KafkaError, UnknownTopicOrPartitionError
from kfk.ui.message_search import RecordFilter, SearchResult, search_records
from kfk.ui.rendering import RenderedBytes, render_bytes

__all__ = ["ClusterView", "PartitionRow", "LogDirUsage", "BrowsedRecord",
           "browsed_record", "GroupPartitionLag", "MissingPartition", "ThroughputSample",
           "describe_error", "total_lag"]

# Kafka's consoles page messages; a page larger than this is refused rather than pulling a topic into memory.
MAX_PAGE_SIZE = 500


@dataclass(frozen=True)
class PartitionRow:
    """A partition as the topic page shows it: Metadata's view plus its log start and end offsets."""

    info: PartitionInfo
    log_start_offset: int
    log_end_offset: int

    @property
    def preferred_leader(self) -> int:
        return self.info.replicas[0] if self.info.replicas else NO_NODE

    @property
    def leader_is_preferred(self) -> bool:
        return self.info.leader != NO_NODE and self.info.leader == self.preferred_leader

    @property
    def offline(self) -> bool:
        return self.info.leader == NO_NODE


@dataclass(frozen=True)
class BrowsedRecord:
    partition: int
    offset: int
    timestamp: int
    key: RenderedBytes
    value: RenderedBytes
    headers: list[tuple[str, RenderedBytes]]


@dataclass(frozen=True)
class LogDirUsage:
    """One log directory of one broker: its volume's total and usable bytes (None when the broker does not say) and
    the bytes of each topic's replicas in it; ``error`` when the directory (or the broker) could not be described."""

    broker_id: int
    path: str
    error: str | None
    total_bytes: int | None
    usable_bytes: int | None
    topic_bytes: dict[str, int]

    @property
    def size(self) -> int:
        return sum(self.topic_bytes.values())


@dataclass(frozen=True)
class GroupPartitionLag:
    topic: str
    partition: int
    committed_offset: int | None
    log_end_offset: int
    member: str | None
    #: A share group's lag as DescribeShareGroupOffsets gives it (the records after the start offset not yet
    #: acknowledged, as kafka-share-groups prints it); None: from the committed offset.
    share_lag: int | None = None

    @property
    def lag(self) -> int | None:
        if self.share_lag is not None:
            return self.share_lag
        return None if self.committed_offset is None else max(0, self.log_end_offset - self.committed_offset)


def total_lag(rows: Iterable[GroupPartitionLag]) -> int:
    """The group's lag summed over the partitions that have a committed offset: a partition without one has no lag
    (Kafka's tools print "-" for it), not a lag of zero, and librdkafka consumers leave every partition they have
    read nothing from without one."""
    return sum(row.lag for row in rows if row.lag is not None)


#: How long a topic created from the console may take to show its partitions in the metadata before its page opens.
TOPIC_VISIBLE_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class MissingPartition:
    """A partition a live figure could not include, and why (no leader, or its leader did not answer in time)."""

    topic: str
    partition: int
    reason: str


@dataclass
class ThroughputSample:
    """Sum of the log end offsets of each topic at a time: two samples give records/s without any broker metric.

    ``per_topic`` holds only topics whose every partition answered; the others' partitions are in ``missing``, so a
    rate computed topic by topic between two samples never counts a partition that comes or goes as traffic."""

    time_ms: int
    per_topic: dict[str, int] = field(default_factory=dict)
    missing: list[MissingPartition] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def total_offsets(self) -> int:
        return sum(self.per_topic.values())


def _subset(config: Mapping[str, Any], keys: Iterable[str]) -> dict[str, Any]:
    known = set(keys)
    return {key: value for key, value in config.items() if key in known}


class ClusterView:
    """The console's window on one cluster. ``client_config`` holds Kafka client properties (bootstrap.servers,
    and whatever --command-config gives); each client takes the keys it knows."""

    def __init__(self, client_config: Mapping[str, Any]) -> None:
        self._config = dict(client_config)
        self.admin = Admin(_subset(self._config, ADMIN_CONFIG_DEF.keys))
        self._producer: Producer | None = None
        self._producer_lock = threading.Lock()
        # Live figures ask every partition leader at once (throughput_sample); Admin calls are thread-safe.
        self._executor = ThreadPoolExecutor(max_workers=8, thread_name_prefix="kfk-ui-leaders")
        self._known_topics: tuple[float, dict[str, TopicDescription]] | None = None

    @property
    def bootstrap_servers(self) -> str:
        return str(self._config.get("bootstrap.servers", ""))

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)
        if self._producer is not None:
            self._producer.close(5)
        self.admin.close()

    # --- cluster and topics -----------------------------------------------------------------------------------

    def describe_topics(self, include_internal: bool = True) -> dict[str, TopicDescription]:
        return self.admin.describe_topics(None, include_internal=include_internal)

    def partition_rows(self, description: TopicDescription) -> list[PartitionRow]:
        partitions = [TopicPartition(description.name, info.partition) for info in description.partitions]
        starts = self.admin.beginning_offsets(partitions) if partitions else {}
        ends = self.admin.end_offsets(partitions) if partitions else {}
        return [PartitionRow(info, starts.get(TopicPartition(description.name, info.partition), 0),
                             ends.get(TopicPartition(description.name, info.partition), 0))
                for info in sorted(description.partitions, key=lambda info: info.partition)]

    def topic_configs(self, topic: str) -> list[tuple[str, str | None, str, bool]]:
        """(name, value, source, is_default) of every config of the topic, overrides first."""
        return self._configs(ConfigResource(ConfigResourceType.TOPIC, topic))

    def broker_configs(self, broker_id: int) -> list[tuple[str, str | None, str, bool]]:
        """(name, value, source, is_default) of every config of a broker, static and dynamic, those set first: its
        source says which (STATIC_BROKER_CONFIG, DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG...)."""
        return self._configs(ConfigResource(ConfigResourceType.BROKER, str(broker_id)))

    def _configs(self, resource: ConfigResource) -> list[tuple[str, str | None, str, bool]]:
        entries = self.admin.describe_configs([resource])[resource]
        rows = [(entry.name, None if entry.is_sensitive else entry.value, entry.source.name, entry.is_default)
                for entry in entries.values()]
        return sorted(rows, key=lambda row: (row[3], row[0]))

    def create_topic(self, name: str, partitions: int, replication_factor: int,
                     configs: Mapping[str, str]) -> None:
        """Create the topic, then wait (up to TOPIC_VISIBLE_TIMEOUT_S) until the metadata shows its partitions: the
        topic's page comes next, and CreateTopics answers once the controller has the topic, before every broker
        does (on ZooKeeper, each broker learns it from a watch), so the page could show a topic with no partitions."""
        error = self.admin.create_topics([NewTopic(name, partitions, replication_factor, dict(configs))])[name]
        if error is not None:
            raise error
        deadline = time.monotonic() + TOPIC_VISIBLE_TIMEOUT_S
        while time.monotonic() < deadline:
            try:
                described = self.admin.describe_topics([name]).get(name)
            except KafkaError:
                described = None
            if described is not None and described.partitions and \
                    (partitions < 0 or len(described.partitions) == partitions):
                return
            time.sleep(0.1)

    def delete_topic(self, name: str) -> None:
        error = self.admin.delete_topics([name])[name]
        if error is not None:
            raise error

    def alter_topic_config(self, topic: str, name: str, value: str | None) -> None:
        """Set one config of a topic (IncrementalAlterConfigs SET), or with None delete its override, so that the
        broker's default applies again (DELETE), as kafka-configs --alter --add-config / --delete-config do."""
        resource = ConfigResource(ConfigResourceType.TOPIC, topic)
        operation = AlterConfigOp(name, None, AlterConfigOpType.DELETE) if value is None else AlterConfigOp(name, value)
        error = self.admin.incremental_alter_configs({resource: [operation]})[resource]
        if error is not None:
            raise error

    def topic_producers(self, description: TopicDescription) -> list[tuple[int, ProducerState]]:
        """(partition, producer) for every producer the partitions' leaders remember (kafka-transactions.sh
        describe-producers); a partition whose leader refuses is skipped, the first refusal raised if all do."""
        partitions = [TopicPartition(description.name, info.partition) for info in description.partitions]
        found = self.admin.describe_producers(partitions) if partitions else {}
        errors = [state for state in found.values() if isinstance(state, KafkaError)]
        if errors and len(errors) == len(found):
            raise errors[0]
        return [(tp.partition, producer) for tp, state in sorted(found.items()) if not isinstance(state, KafkaError)
                for producer in state.active_producers]

    def elect_preferred_leaders(self, topic: str | None = None) -> tuple[int, list[str]]:
        """Run a preferred-replica election (of one topic's partitions, or of every partition); returns how many
        partitions changed leader and the errors other than 'already the preferred leader'."""
        partitions = None
        if topic is not None:
            description = self.admin.describe_topics([topic])[topic]
            partitions = [TopicPartition(topic, info.partition) for info in description.partitions]
        outcome = self.admin.elect_leaders(ElectionType.PREFERRED, partitions)
        elected = sum(1 for error in outcome.values() if error is None)
        errors = [f"{tp.topic}-{tp.partition}: {error}" for tp, error in sorted(outcome.items())
                  if error is not None and not isinstance(error, ElectionNotNeededError)]
        return elected, errors

    def throughput_sample(self, timeout_ms: float, topic: str | None = None) -> ThroughputSample:
        """The end offsets of every partition (of ``topic``, or of every topic), asked of each leader separately
        and all within ``timeout_ms``: one partition without a leader, or one leader that does not answer, must not
        stop the live figures of the rest (one ListOffsets call over all partitions waits until every one of them
        answers)."""
        deadline = time.monotonic() + timeout_ms / 1000
        notes = []
        try:
            descriptions = self.admin.describe_topics(None if topic is None else [topic], include_internal=False,
                                                      timeout_ms=timeout_ms / 2)
            if topic is None:
                self._known_topics = (time.time(), descriptions)
        except UnknownTopicOrPartitionError:
            if topic is None:
                raise
            # Deleted while its page is open: the chart says so rather than failing every poll.
            return ThroughputSample(int(time.time() * 1000), notes=[f"topic {topic} does not exist"])
        except KafkaError as error:
            # A frozen broker asked for Metadata answers nothing: the partitions and leaders last seen still say
            # where to ask for offsets, which the brokers that answer give.
            if self._known_topics is None or (topic is not None and topic not in self._known_topics[1]):
                raise
            known_at, descriptions = self._known_topics
            if topic is not None:
                descriptions = {topic: descriptions[topic]}
            notes.append(f"Metadata did not answer ({error}): partitions and leaders as of "
                         f"{time.strftime('%H:%M:%S', time.localtime(known_at))}")
        missing: list[MissingPartition] = []
        by_leader: dict[int, list[TopicPartition]] = {}
        for name, description in descriptions.items():
            for info in description.partitions:
                if info.leader == NO_NODE:
                    missing.append(MissingPartition(name, info.partition, "no leader (offline)"))
                else:
                    by_leader.setdefault(info.leader, []).append(TopicPartition(name, info.partition))
        asked = {leader: self._executor.submit(self.admin.end_offsets, partitions,
                                               max(1.0, (deadline - time.monotonic()) * 1000))
                 for leader, partitions in by_leader.items()}
        ends: dict[TopicPartition, int] = {}
        for leader, answer in asked.items():
            try:
                # The Admin call keeps its own deadline; this one only guards against it not doing so.
                ends.update(answer.result(max(0.0, deadline - time.monotonic()) + 2))
                continue
            except FutureTimeoutError:
                reason = f"leader {leader} did not answer within {timeout_ms:.0f} ms"
            except KafkaError as error:
                reason = f"leader {leader}: {error}"
            missing.extend(MissingPartition(tp.topic, tp.partition, reason) for tp in by_leader[leader])
        incomplete = {entry.topic for entry in missing}
        per_topic = {name: 0 for name in descriptions if name not in incomplete}
        for tp, offset in ends.items():
            if tp.topic in per_topic:
                per_topic[tp.topic] += offset
        return ThroughputSample(int(time.time() * 1000), per_topic,
                                sorted(missing, key=lambda entry: (entry.topic, entry.partition)), notes)

    # --- log directories --------------------------------------------------------------------------------------

    def log_dirs(self, broker_ids: Iterable[int]) -> list[LogDirUsage]:
        """Each log directory of the brokers (DescribeLogDirs), with the bytes of each topic in it; a broker that
        refuses is one row with its error."""
        rows = []
        for broker_id, found in sorted(self.admin.describe_log_dirs(broker_ids).items()):
            if isinstance(found, KafkaError):
                rows.append(LogDirUsage(broker_id, "", str(found), None, None, {}))
                continue
            for path, description in sorted(found.items()):
                per_topic: dict[str, int] = {}
                for tp, replica in description.replicas.items():
                    per_topic[tp.topic] = per_topic.get(tp.topic, 0) + replica.size
                rows.append(LogDirUsage(broker_id, path, None if description.error is None else str(description.error),
                                        description.total_bytes, description.usable_bytes,
                                        dict(sorted(per_topic.items()))))
        return rows

    def topic_replica_sizes(self, topic: str) -> dict[int, dict[int, int]]:
        """partition -> broker -> bytes of that replica on disk (summed over the broker's log directories: a
        replica being moved between directories is in two)."""
        brokers = [broker.node_id for broker in self.admin.describe_cluster().brokers]
        sizes: dict[int, dict[int, int]] = {}
        for broker_id, found in self.admin.describe_log_dirs(brokers).items():
            if isinstance(found, KafkaError):
                raise found
            for description in found.values():
                for tp, replica in description.replicas.items():
                    if tp.topic == topic:
                        by_broker = sizes.setdefault(tp.partition, {})
                        by_broker[broker_id] = by_broker.get(broker_id, 0) + replica.size
        return sizes

    # --- messages ---------------------------------------------------------------------------------------------

    def browse(self, topic: str, partition: int, *, offset: int | None = None, timestamp_ms: int | None = None,
               limit: int = 50, timeout_s: float = 5.0) -> tuple[list[BrowsedRecord], int, int]:
        """Up to ``limit`` records of one partition from ``offset`` (or the first at or after ``timestamp_ms``; by
        default the last ``limit`` records); returns them with the partition's log start and end offsets."""
        limit = max(1, min(limit, MAX_PAGE_SIZE))
        tp = TopicPartition(topic, partition)
        start = self.admin.beginning_offsets([tp])[tp]
        end = self.admin.end_offsets([tp])[tp]
        if timestamp_ms is not None:
            found = self.admin.list_offsets({tp: timestamp_ms})[tp]
            offset = end if found is None or found.offset < 0 else found.offset
        elif offset is None:
            offset = max(start, end - limit)
        offset = max(start, min(offset, end))
        if offset >= end:
            return [], start, end
        records: list[BrowsedRecord] = []
        consumer = self.browsing_consumer()
        try:
            consumer.assign([tp])
            consumer.seek(tp, offset)
            deadline = time.monotonic() + timeout_s
            wanted_end = min(end, offset + limit)
            while len(records) < limit and time.monotonic() < deadline:
                batch = consumer.poll(0.5, max_records=limit - len(records))
                records.extend(map(browsed_record, batch))
                if records and records[-1].offset + 1 >= wanted_end:
                    break
                if consumer.position(tp) >= wanted_end:
                    break
        finally:
            consumer.close(timeout=1.0)
        return records, start, end

    def browsing_consumer(self) -> Consumer:
        """A Consumer without a group that commits nothing, for reading partitions by offset (browse, search,
        tail); the caller assigns it and closes it."""
        consumer_config = _subset(self._config, CONSUMER_CONFIG_DEF.keys)
        consumer_config.update({"enable.auto.commit": False, "isolation.level": "read_uncommitted"})
        consumer_config.pop("group.id", None)
        return Consumer(consumer_config)

    def search(self, topic: str, partitions: list[int], record_filter: RecordFilter, **limits: Any) -> SearchResult:
        """The records of ``partitions`` that ``record_filter`` accepts, scanned under limits (message_search)."""
        return search_records(self.admin, self.browsing_consumer, topic, partitions, record_filter,
                              make_record=browsed_record, **limits)

    def produce(self, topic: str, value: bytes | None, key: bytes | None = None,
                headers: list[tuple[str, bytes]] | None = None, partition: int | None = None) -> tuple[int, int]:
        """Send one record and wait for it; returns (partition, offset)."""
        with self._producer_lock:
            if self._producer is None:
                producer_config = _subset(self._config, PRODUCER_CONFIG_DEF.keys)
                producer_config.setdefault("acks", "all")
                self._producer = Producer(producer_config)
            producer = self._producer
        metadata = producer.send(topic, value, key, partition=partition, headers=headers or None).result(30)
        return metadata.partition, metadata.offset

    # --- consumer groups --------------------------------------------------------------------------------------

    def describe_group(self, group_id: str) -> ConsumerGroupDescription:
        """The group as ConsumerGroupDescribe or DescribeGroups gives it, or as ShareGroupDescribe does for a share
        group (protocol type "share"): the former two answer GROUP_ID_NOT_FOUND for a share group, as Kafka's do."""
        try:
            return self.admin.describe_consumer_groups([group_id])[group_id]
        except GroupIdNotFoundError:
            return self.admin.describe_share_groups([group_id])[group_id]

    def group_lag(self, group_id: str) -> list[GroupPartitionLag]:
        """Committed offset (a share group's share-partition start offset), log end offset and owners of every
        partition the group has an offset for or is assigned (lag is None where nothing is committed yet). A
        share group's members share partitions: each row names them all."""
        description = self.describe_group(group_id)
        owners: dict[TopicPartition, list[str]] = {}
        for member in description.members:
            for tp in member.assignment:
                owners.setdefault(tp, []).append(member.client_id or member.member_id)
        share_lag: dict[TopicPartition, int] = {}
        if description.protocol_type == SHARE_PROTOCOL_TYPE:
            committed = {}
            for tp, (start, _, lag) in self.admin.list_share_group_offsets(group_id).items():
                if start >= 0:
                    committed[tp] = start
                    if lag >= 0:
                        share_lag[tp] = lag
        else:
            committed = {tp: offset.offset for tp, offset in self.admin.list_consumer_group_offsets(group_id).items()}
        partitions = sorted(set(committed) | set(owners))
        ends = self.admin.end_offsets(partitions) if partitions else {}
        return [GroupPartitionLag(tp.topic, tp.partition, committed.get(tp), ends.get(tp, 0),
                                  ", ".join(sorted(set(owners[tp]))) if tp in owners else None, share_lag.get(tp))
                for tp in partitions]

    def plan_offset_reset(self, topic: str, to: str) -> dict[TopicPartition, int]:
        """The offsets Kafka's --reset-offsets --to-earliest / --to-latest / --to-offset N would set for one topic
        (its --dry-run: nothing is changed)."""
        description = self.admin.describe_topics([topic])[topic]
        partitions = [TopicPartition(topic, info.partition) for info in description.partitions]
        if to == "earliest":
            targets = self.admin.beginning_offsets(partitions)
        elif to == "latest":
            targets = self.admin.end_offsets(partitions)
        else:
            try:
                wanted = int(to)
            except ValueError:
                raise ValueError(f"reset to 'earliest', 'latest' or an offset, not {to!r}") from None
            starts = self.admin.beginning_offsets(partitions)
            ends = self.admin.end_offsets(partitions)
            targets = {tp: max(starts[tp], min(wanted, ends[tp])) for tp in partitions}
        return targets

    def reset_group_offsets(self, group_id: str, topic: str, to: str) -> dict[TopicPartition, int]:
        """Kafka's --reset-offsets ... --execute for one topic of an inactive group (kafka-share-groups' for a
        share group: its share-partition start offsets): the offsets it set."""
        targets = self.plan_offset_reset(topic, to)
        if self.describe_group(group_id).protocol_type == SHARE_PROTOCOL_TYPE:
            outcome = self.admin.alter_share_group_offsets(group_id, targets)
        else:
            outcome = self.admin.alter_consumer_group_offsets(
                group_id, {tp: OffsetAndMetadata(offset) for tp, offset in targets.items()})
        for error in outcome.values():
            if error is not None:
                raise error
        return targets

    def delete_group(self, group_id: str) -> None:
        """kafka-consumer-groups --delete: the group and its committed offsets (refused while it has members)."""
        error = self.admin.delete_consumer_groups([group_id])[group_id]
        if error is not None:
            raise error

    def delete_group_offsets(self, group_id: str, topic: str) -> int:
        """kafka-consumer-groups --delete-offsets for one topic (kafka-share-groups' for a share group: the
        topic's share state): how many partitions' offsets went."""
        share = self.describe_group(group_id).protocol_type == SHARE_PROTOCOL_TYPE
        committed = [tp for tp in (self.admin.list_share_group_offsets(group_id) if share
                                   else self.admin.list_consumer_group_offsets(group_id)) if tp.topic == topic]
        if not committed:
            raise ValueError(f"group {group_id} has no committed offsets of {topic}")
        outcome = self.admin.delete_share_group_offsets(group_id, [topic]) if share \
            else self.admin.delete_consumer_group_offsets(group_id, committed)
        for error in outcome.values():
            if error is not None:
                raise error
        return len(committed)

    # --- reassignment -----------------------------------------------------------------------------------------

    def current_assignment(self, topics: Iterable[str]) -> dict[str, dict[int, list[int]]]:
        descriptions = self.admin.describe_topics(list(topics))
        return {name: {info.partition: list(info.replicas) for info in description.partitions}
                for name, description in descriptions.items()}

    def propose_reassignment(self, topics: Iterable[str], broker_ids: Iterable[int]) -> dict[str, dict[int, list[int]]]:
        """kafka-reassign-partitions --generate: the topics' partitions placed on ``broker_ids`` by Kafka's
        placement algorithm (the one topic creation uses)."""
        from kfk.controller.reassignment import propose_assignment

        return propose_assignment(self.current_assignment(topics), sorted(set(broker_ids)))

    def start_reassignment(self, proposal: Mapping[str, Mapping[int, list[int]]]) -> list[str]:
        """Start the moves; returns the per-partition errors (empty when all were accepted)."""
        outcome = self.admin.alter_partition_reassignments(
            {TopicPartition(topic, int(partition)): NewPartitionReassignment([int(b) for b in replicas])
             for topic, partitions in proposal.items() for partition, replicas in partitions.items()})
        return [f"{tp.topic}-{tp.partition}: {error}" for tp, error in sorted(outcome.items()) if error is not None]

    def reassignments_in_progress(self) -> list[tuple[TopicPartition, list[int], list[int], list[int]]]:
        found = self.admin.list_partition_reassignments()
        return [(tp, list(state.replicas), list(state.adding_replicas), list(state.removing_replicas))
                for tp, state in sorted(found.items())]


def browsed_record(record: Any) -> BrowsedRecord:
    """A consumed record as the browser's table shows it."""
    return BrowsedRecord(record.partition, record.offset, record.timestamp, render_bytes(record.key),
                         render_bytes(record.value), [(name, render_bytes(value)) for name, value in record.headers])


def describe_error(error: BaseException) -> str:
    """One line for the page: Kafka's error name and message for client errors, the message otherwise."""
    if isinstance(error, KafkaError):
        return str(error)
    return f"{type(error).__name__}: {error}"

