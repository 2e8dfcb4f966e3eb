"""Consumer: the public consumer API (Java's KafkaConsumer), for one thread at a time.

    with Consumer({"bootstrap.servers": "localhost:9092", "group.id": "billing",
                   "auto.offset.reset": "earliest"}) as consumer:
        consumer.subscribe(["payments"])
        while True:
            for record in consumer.poll(1.0):
                handle(record.key, record.value)

poll(timeout) (seconds) does the group's work (join, rebalance callbacks, auto-commit), finds positions for
partitions that need one (the committed offset, else auto.offset.reset through ListOffsets), and returns up to
max.poll.records records that the fetcher has buffered, waiting up to ``timeout`` for some to arrive. Fetches are
sent by the network thread ahead of time, so a poll usually finds data waiting.

Without subscribe(), assign() picks partitions by hand; a group.id is then needed only to commit offsets.

group.protocol picks how the group is run: classic (the default, as in Kafka 4: JoinGroup/SyncGroup, the members'
assignors) or consumer (KIP-848: the coordinator assigns, kfk.client.consumer.consumer_protocol), behind the same API.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from kfk.client.config import CONSUMER_CONFIG_DEF, ClientConfig, group_protocol
from kfk.client.consumer.assignors import ConsumerPartitionAssignor, create_assignor
from kfk.client.consumer.consumer_protocol import ConsumerProtocolCoordinator
from kfk.client.consumer.coordinator import ConsumerCoordinator, ConsumerRebalanceListener
from kfk.client.consumer.fetcher import Fetcher
from kfk.client.consumer.subscription_state import OffsetResetStrategy, SubscriptionState, SubscriptionType
from kfk.client.event_loop import ClientLoop, LoopRunner
from kfk.client.network_client import ExponentialBackoff, NetworkClient, monotonic_ms
from kfk.client.offsets import READ_COMMITTED, READ_UNCOMMITTED, list_offsets
from kfk.client.response_errors import response_error
from kfk.client.structs import ConsumerGroupMetadata, ConsumerRecord, OffsetAndTimestamp
from kfk.common.constants import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP
from kfk.common.structs import OffsetAndMetadata, TopicPartition
from kfk.errors import (
    ErrorCode,
    InvalidConfigurationError,
    InvalidGroupIdError,
    KafkaError,
    KafkaTimeoutError,
    OffsetOutOfRangeError,
    UnknownTopicOrPartitionError,
)

__all__ = ["Consumer", "ConsumerRecords"]

Deserializer = Callable[[bytes | None], Any]


class ConsumerRecords:
    """What poll() returns: iterate for every record (in partition order), or ``records(tp)`` for one partition."""

    __slots__ = ("_by_partition", "_count")

    def __init__(self, by_partition: dict[TopicPartition, list[ConsumerRecord]]) -> None:
        self._by_partition = by_partition
        self._count = sum(len(records) for records in by_partition.values())

    def __iter__(self) -> Iterator[ConsumerRecord]:
        for records in self._by_partition.values():
            yield from records

    def __len__(self) -> int:
        return self._count

    def __bool__(self) -> bool:
        return self._count > 0

    def partitions(self) -> list[TopicPartition]:
        return list(self._by_partition)

    def records(self, partition: TopicPartition) -> list[ConsumerRecord]:
        return self._by_partition.get(partition, [])

    def by_partition(self) -> dict[TopicPartition, list[ConsumerRecord]]:
        return dict(self._by_partition)

    def as_list(self) -> list[ConsumerRecord]:
        """Every record in one list (the one partition's own list when there is one: no copy)."""
        if len(self._by_partition) == 1:
            return next(iter(self._by_partition.values()))
        return [record for records in self._by_partition.values() for record in records]


class Consumer:
    """A Kafka consumer. ``config`` takes Kafka's property names; keyword arguments the same in snake_case."""

    def __init__(self, config: Mapping[str, Any] | None = None, *, key_deserializer: Deserializer | None = None,
                 value_deserializer: Deserializer | None = None, network_loop: LoopRunner | None = None,
                 assignors: Sequence[ConsumerPartitionAssignor] | None = None, **overrides: Any) -> None:
        """``network_loop``: where the network side runs (kfk.client.aio passes the caller's loop); by default a
        network thread of the consumer's own. ``assignors``: assignor objects to use instead of those
        partition.assignment.strategy names (as Java and kafka-python take assignor classes)."""
        self.config = config = ClientConfig(CONSUMER_CONFIG_DEF, "consumer", config, **overrides)
        if config.group_id == "":
            raise InvalidGroupIdError("group.id must not be empty (leave it unset to consume without a group)")
        protocol = group_protocol(config)
        self.group_id: str | None = config.group_id
        self._default_timeout_ms = config.request_timeout_ms
        self._loop = network_loop or ClientLoop(f"kfk-consumer-network-thread | {config.client_id}")
        self._network = NetworkClient(config, allow_auto_topic_creation=config.allow_auto_create_topics)
        self._subscriptions = SubscriptionState(OffsetResetStrategy(config.auto_offset_reset))
        self._isolation_level = READ_COMMITTED if config.isolation_level == "read_committed" else READ_UNCOMMITTED
        self._retry_backoff = ExponentialBackoff(config.retry_backoff_ms, config.retry_backoff_max_ms)
        self._fetcher = Fetcher(
            self._network, self._subscriptions, fetch_min_bytes=config.fetch_min_bytes,
            fetch_max_bytes=config.fetch_max_bytes, fetch_max_wait_ms=config.fetch_max_wait_ms,
            max_partition_fetch_bytes=config.max_partition_fetch_bytes, isolation_level=self._isolation_level,
            check_crcs=config.check_crcs, client_rack=config.client_rack,
            request_timeout_ms=config.request_timeout_ms, retry_backoff_ms=config.retry_backoff_ms,
            key_deserializer=key_deserializer, value_deserializer=value_deserializer)
        self._coordinator: ConsumerCoordinator | None = None
        if self.group_id is not None:
            common = dict(group_id=self.group_id, group_instance_id=config.group_instance_id,
                          rebalance_timeout_ms=config.rebalance_timeout_ms or config.max_poll_interval_ms,
                          max_poll_interval_ms=config.max_poll_interval_ms,
                          enable_auto_commit=config.enable_auto_commit,
                          auto_commit_interval_ms=config.auto_commit_interval_ms, retry_backoff=self._retry_backoff,
                          client_rack=config.client_rack)
            if protocol == "consumer":
                self._coordinator = ConsumerProtocolCoordinator(
                    self._network, self._loop, self._subscriptions, self._fetcher,
                    server_assignor=config.group_remote_assignor or None, **common)
            else:
                if config.heartbeat_interval_ms >= config.session_timeout_ms:
                    raise InvalidConfigurationError("heartbeat.interval.ms must be lower than session.timeout.ms")
                self._coordinator = ConsumerCoordinator(
                    self._network, self._loop, self._subscriptions, self._fetcher,
                    assignors=list(assignors) if assignors else [
                        create_assignor(name) for name in config.partition_assignment_strategy],
                    session_timeout_ms=config.session_timeout_ms,
                    heartbeat_interval_ms=config.heartbeat_interval_ms, **common)
        self._fetcher_done = self._loop.submit(self._fetcher.run())
        self._closed = False

    def __enter__(self) -> Consumer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # --- what to consume ---------------------------------------------------------------------------------------------

    def subscribe(self, topics: Iterable[str] | str | re.Pattern,
                  listener: ConsumerRebalanceListener | None = None) -> None:
        """Join the group for ``topics`` (a list, or a regex pattern as str or re.Pattern). Under
        group.protocol=consumer the coordinator matches the pattern (Kafka uses RE2/J syntax), so that topics
        created later join the subscription without the consumer looking."""
        coordinator = self._require_group("subscribe()")
        coordinator.listener = listener
        if isinstance(topics, (str, re.Pattern)):
            pattern = re.compile(topics) if isinstance(topics, str) else topics
            self._subscriptions.subscribe_pattern(pattern)
            self._network.track_all_topics()
            cluster = self._loop.run(self._network.refresh_metadata(), self._default_timeout_ms / 1000)
            exclude_internal = self.config.exclude_internal_topics
            self._subscriptions.match_pattern(name for name, topic in cluster.topics.items()
                                              if not (exclude_internal and topic.is_internal))
            coordinator.subscription_changed()
            return
        topics = list(topics)
        if not topics:
            self.unsubscribe()
            return
        if any(not topic or not isinstance(topic, str) for topic in topics):
            raise ValueError("topic names must be non-empty strings")
        if self._subscriptions.subscribe(topics):
            coordinator.subscription_changed()
        self._loop.call_soon(self._network.set_topics, set(topics))

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Consume exactly these partitions, outside any group rebalancing."""
        partitions = [TopicPartition(*tp) for tp in partitions]
        if self._coordinator is not None:
            self._coordinator.maybe_auto_commit_sync()
        self._subscriptions.assign_from_user(partitions)
        self._fetcher.clear_buffered(set(partitions))
        self._loop.call_soon(self._network.set_topics, {tp.topic for tp in partitions})
        self._loop.call_soon(self._fetcher.wakeup)

    def unsubscribe(self) -> None:
        if self._coordinator is not None and self._subscriptions.has_auto_assigned_partitions:
            self._coordinator.maybe_auto_commit_sync()
            self._coordinator._invoke_revoked(self._subscriptions.assigned_partitions())
            self._loop.run(self._coordinator._leave_group("the consumer unsubscribed"),
                           self._default_timeout_ms / 1000)
            self._coordinator._reset_generation()
        self._subscriptions.unsubscribe()
        self._fetcher.clear_buffered()

    def enforce_rebalance(self, reason: str = "the application asked for a rebalance") -> None:
        """Rejoin the group at the next poll, so that the leader assigns again (Java's enforceRebalance); safe to
        call from any thread."""
        coordinator = self._require_group("enforce_rebalance")
        if not self._subscriptions.has_auto_assigned_partitions:
            raise KafkaError("Tried to force a rebalance but consumer does not have a group.")
        self._loop.call_soon(coordinator.request_rejoin, reason)

    def assignment(self) -> set[TopicPartition]:
        return set(self._subscriptions.assigned_partitions())

    def subscription(self) -> set[str]:
        return set(self._subscriptions.subscription)

    # --- polling -----------------------------------------------------------------------------------------------------

    def poll(self, timeout: float = 0.0, max_records: int | None = None) -> ConsumerRecords:
        """Records fetched since the last poll, waiting up to ``timeout`` seconds for some."""
        self._check_pollable()
        max_records = max_records or self.config.max_poll_records
        deadline = monotonic_ms() + timeout * 1000
        while True:
            if self._coordinator is not None:
                if not self._coordinator.poll(deadline):
                    return ConsumerRecords({})
            self._update_fetch_positions(deadline)
            records, drained = self._fetcher.fetched_records(max_records)
            if drained or not records:
                self._loop.call_soon(self._fetcher.wakeup)
            if records:
                return ConsumerRecords(records)
            remaining = deadline - monotonic_ms()
            if remaining <= 0:
                return ConsumerRecords({})
            wait = remaining
            if self._coordinator is not None:
                wait = min(wait, self._coordinator.heartbeat_interval_ms)
            self._fetcher.wait_for_data(wait / 1000)
            if self._coordinator is not None and self._coordinator.rejoin_needed:
                continue

    def consume(self, num_messages: int = 1, timeout: float = -1) -> list[ConsumerRecord]:
        """Up to ``num_messages`` records as one list, waiting up to ``timeout`` seconds (-1: forever) for the
        first (confluent-kafka's Consumer.consume)."""
        if num_messages < 1:
            raise ValueError(f"num_messages must be at least 1, got {num_messages}")
        while True:
            records = self.poll(3600.0 if timeout < 0 else timeout, max_records=num_messages)
            if records or timeout >= 0:
                return records.as_list()

    def poll_buffered(self, max_records: int | None = None) -> ConsumerRecords | None:
        """poll() without waiting, for a caller that must not block (kfk.client.aio, on the loop that does the
        network work): the records already fetched (maybe none), or None when poll() has blocking work to do first
        (joining the group, looking up positions)."""
        self._check_pollable()
        coordinator = self._coordinator
        if coordinator is not None and coordinator.join_pending():
            return None
        subscriptions = self._subscriptions
        if subscriptions.missing_positions() or subscriptions.awaiting_reset():
            return None
        if coordinator is not None:
            coordinator.poll(monotonic_ms())  # the group is stable: bookkeeping and auto-commit only, no wait
        records, drained = self._fetcher.fetched_records(max_records or self.config.max_poll_records)
        if drained or not records:
            self._fetcher.wakeup()
        return ConsumerRecords(records)

    def _check_pollable(self) -> None:
        if self._closed:
            raise RuntimeError("the consumer is closed")
        if self._subscriptions.subscription_type == SubscriptionType.NONE:
            raise KafkaError("the consumer is not subscribed to any topics or assigned any partitions")

    def _update_fetch_positions(self, deadline_ms: float) -> None:
        """Committed offsets for partitions without a position, else (or when none is committed) a reset."""
        subscriptions = self._subscriptions
        missing = subscriptions.missing_positions()
        if missing:
            committed: Mapping[TopicPartition, OffsetAndMetadata | None] = {}
            if self._coordinator is not None:
                committed = self._coordinator.fetch_committed(missing, max(deadline_ms - monotonic_ms(),
                                                                           self._default_timeout_ms))
            for tp in missing:
                offset = committed.get(tp)
                if offset is not None:
                    subscriptions.seek(tp, offset.offset, offset.leader_epoch)
                elif subscriptions.default_reset_strategy == OffsetResetStrategy.NONE:
                    raise OffsetOutOfRangeError(f"no committed offset for partition {tp} and auto.offset.reset "
                                                "is none")
                else:
                    subscriptions.request_offset_reset(tp)
        resets = subscriptions.awaiting_reset()
        if resets:
            targets = {tp: EARLIEST_TIMESTAMP if strategy == OffsetResetStrategy.EARLIEST else LATEST_TIMESTAMP
                       for tp, strategy in resets.items()}
            found = self._list_offsets(targets, max(deadline_ms - monotonic_ms(), self._default_timeout_ms))
            for tp, result in found.items():
                subscriptions.maybe_seek_unvalidated(tp, result.offset if result is not None else 0,
                                                     result.leader_epoch if result is not None else -1,
                                                     resets[tp])
            self._loop.call_soon(self._fetcher.wakeup)

    def _list_offsets(self, targets: Mapping[TopicPartition, int], timeout_ms: float
                      ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        return self._loop.run(list_offsets(self._network, targets, isolation_level=self._isolation_level,
                                           timeout_ms=timeout_ms), timeout_ms / 1000 + 1)

    # --- positions ---------------------------------------------------------------------------------------------------

    def seek(self, partition: TopicPartition, offset: int) -> None:
        if offset < 0:
            raise ValueError(f"seek offset must not be negative, got {offset}")
        self._subscriptions.seek(TopicPartition(*partition), offset)
        self._loop.call_soon(self._fetcher.wakeup)

    def seek_to_beginning(self, *partitions: TopicPartition) -> None:
        for tp in partitions or self._subscriptions.assigned_partitions():
            self._subscriptions.request_offset_reset(TopicPartition(*tp), OffsetResetStrategy.EARLIEST)

    def seek_to_end(self, *partitions: TopicPartition) -> None:
        for tp in partitions or self._subscriptions.assigned_partitions():
            self._subscriptions.request_offset_reset(TopicPartition(*tp), OffsetResetStrategy.LATEST)

    def position(self, partition: TopicPartition, timeout: float | None = None) -> int:
        """The offset of the next record poll() would return, looking it up if it is not known yet."""
        partition = TopicPartition(*partition)
        if not self._subscriptions.is_assigned(partition):
            raise ValueError(f"{partition} is not assigned to this consumer")
        timeout_ms = self._default_timeout_ms if timeout is None else timeout * 1000
        deadline = monotonic_ms() + timeout_ms
        while True:
            position = self._subscriptions.position(partition)
            if position is not None:
                return position
            self._update_fetch_positions(deadline)
            if monotonic_ms() >= deadline:
                raise KafkaTimeoutError(f"the position of {partition} could not be found in {timeout_ms:.0f} ms")

    def highwater(self, partition: TopicPartition) -> int | None:
        """The high watermark the last fetch of this partition reported (no request)."""
        state = self._subscriptions.state(TopicPartition(*partition))
        return None if state is None else state.high_watermark

    def pause(self, *partitions: TopicPartition) -> None:
        self._subscriptions.pause(TopicPartition(*tp) for tp in partitions)

    def resume(self, *partitions: TopicPartition) -> None:
        self._subscriptions.resume(TopicPartition(*tp) for tp in partitions)
        self._loop.call_soon(self._fetcher.wakeup)

    def paused(self) -> set[TopicPartition]:
        return self._subscriptions.paused_partitions()

    # --- offsets -----------------------------------------------------------------------------------------------------

    def commit_sync(self, offsets: Mapping[TopicPartition, OffsetAndMetadata | int] | None = None,
                    timeout: float | None = None) -> None:
        """Commit ``offsets`` (default: the current positions of every assigned partition) and wait."""
        coordinator = self._require_group("commit_sync()")
        coordinator.invoke_completed_commit_callbacks()
        timeout_ms = self._default_timeout_ms if timeout is None else timeout * 1000
        coordinator.commit_sync(self._offsets_to_commit(offsets), timeout_ms)

    commit = commit_sync

    def commit_async(self, offsets: Mapping[TopicPartition, OffsetAndMetadata | int] | None = None,
                     callback: Callable[[dict, BaseException | None], None] | None = None) -> None:
        """Commit without waiting; ``callback(offsets, error)`` runs in a later poll() or commit call."""
        coordinator = self._require_group("commit_async()")
        coordinator.invoke_completed_commit_callbacks()
        coordinator.commit_async(self._offsets_to_commit(offsets), callback, self._default_timeout_ms)

    def _offsets_to_commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata | int] | None
                           ) -> dict[TopicPartition, OffsetAndMetadata]:
        if offsets is None:
            return self._subscriptions.all_consumed()
        return {TopicPartition(*tp): value if isinstance(value, OffsetAndMetadata) else OffsetAndMetadata(value)
                for tp, value in offsets.items()}

    def group_metadata(self) -> ConsumerGroupMetadata:
        """This member's group id, generation, member id and group.instance.id, for a transactional producer's
        send_offsets_to_transaction (the coordinator then refuses the commit if a rebalance replaced the member)."""
        coordinator = self._require_group("group_metadata()")
        return ConsumerGroupMetadata(coordinator.group_id, coordinator.generation_id, coordinator.member_id,
                                     coordinator.group_instance_id)

    def committed(self, partitions: Iterable[TopicPartition], timeout: float | None = None
                  ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        coordinator = self._require_group("committed()")
        timeout_ms = self._default_timeout_ms if timeout is None else timeout * 1000
        return coordinator.fetch_committed([TopicPartition(*tp) for tp in partitions], timeout_ms)

    def offsets_for_times(self, timestamps: Mapping[TopicPartition, int], timeout: float | None = None
                          ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """For each partition the first offset whose timestamp is >= the given one (ms), or None."""
        for tp, timestamp in timestamps.items():
            if timestamp < 0:
                raise ValueError(f"the target time for {tp} is negative: {timestamp}")
        timeout_ms = self._default_timeout_ms if timeout is None else timeout * 1000
        return self._list_offsets({TopicPartition(*tp): ts for tp, ts in timestamps.items()}, timeout_ms)

    def beginning_offsets(self, partitions: Iterable[TopicPartition], timeout: float | None = None
                          ) -> dict[TopicPartition, int]:
        return self._edge_offsets(partitions, EARLIEST_TIMESTAMP, timeout)

    def end_offsets(self, partitions: Iterable[TopicPartition], timeout: float | None = None
                    ) -> dict[TopicPartition, int]:
        """The log end offsets (high watermarks; last stable offsets under read_committed)."""
        return self._edge_offsets(partitions, LATEST_TIMESTAMP, timeout)

    def _edge_offsets(self, partitions: Iterable[TopicPartition], target: int, timeout: float | None
                      ) -> dict[TopicPartition, int]:
        timeout_ms = self._default_timeout_ms if timeout is None else timeout * 1000
        found = self._list_offsets({TopicPartition(*tp): target for tp in partitions}, timeout_ms)
        return {tp: result.offset if result is not None else 0 for tp, result in found.items()}

    # --- metadata ----------------------------------------------------------------------------------------------------

    def partitions_for(self, topic: str, timeout: float | None = None) -> list[int]:
        """The topic's partitions; UnknownTopicOrPartitionError if it does not exist. The Metadata request lets the
        broker auto-create the topic when allow.auto.create.topics is set (the default), as Java's partitionsFor."""
        timeout_ms = self._default_timeout_ms if timeout is None else timeout * 1000
        cluster = self._loop.run(self._network.refresh_metadata([topic], timeout_ms=timeout_ms),
                                 timeout_ms / 1000 + 1)
        metadata = cluster.topic(topic)
        if metadata is None or metadata.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            raise UnknownTopicOrPartitionError(f"topic {topic!r} does not exist")
        if metadata.error_code != ErrorCode.NONE:
            raise response_error(metadata.error_code, f"topic {topic!r}")
        return sorted(metadata.partitions)

    def list_topics(self, timeout: float | None = None) -> dict[str, list[int]]:
        timeout_ms = self._default_timeout_ms if timeout is None else timeout * 1000
        cluster = self._loop.run(self._network.refresh_metadata(None, timeout_ms=timeout_ms), timeout_ms / 1000 + 1)
        return {name: sorted(topic.partitions) for name, topic in cluster.topics.items()
                if topic.error_code == ErrorCode.NONE}

    # --- closing -----------------------------------------------------------------------------------------------------

    def close(self, timeout: float = 30.0) -> None:
        """Commit (with auto-commit), leave the group and stop the network thread."""
        if self._closed:
            return
        self._closed = True
        try:
            if self._coordinator is not None:
                self._coordinator.close(timeout * 1000)
        finally:
            self._loop.call_soon(self._fetcher.stop)
            try:
                self._loop.run(self._network.close(), 5)
            except Exception:  # noqa: BLE001 - the loop goes away next anyway
                pass
            self._loop.close()

    def _require_group(self, what: str) -> ConsumerCoordinator:
        if self._coordinator is None:
            raise InvalidGroupIdError(f"{what} needs a group.id in the consumer configuration")
        return self._coordinator
