"""ProducerCore: what the synchronous Producer and the asyncio AIOProducer share, everything but how they wait.

It holds the configuration checks (idempotence by default, transactions), the network client, the accumulator, the
sender and the transaction manager, and does a send's work that never waits: serialize, size, pick the partition
and append to the accumulator. What may wait (metadata of a topic not seen yet; the sender's run; flush, close and
the transaction calls) is the owner's: the Producer blocks its caller while its network thread runs the sender, the
AIOProducer awaits on the caller's own event loop, which runs the sender too.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kfk.client.cluster import ClusterMetadata
from kfk.client.config import ClientConfig
from kfk.client.network_client import ExponentialBackoff, NetworkClient
from kfk.client.producer.accumulator import RECORD_FRAMING_BOUND, RecordAccumulator
from kfk.client.producer.future import Callback, FutureRecordMetadata, RunCallback
from kfk.client.producer.partitioner import BuiltInPartitioner, partition_for_key
from kfk.client.producer.sender import Sender
from kfk.client.producer.transaction_manager import TransactionManager
from kfk.common.clock import system_time_ms
from kfk.common.structs import TopicPartition
from kfk.errors import ErrorCode, InvalidConfigurationError, InvalidTxnStateError, KafkaError, RecordTooLargeError, \
    error_for_code
from kfk.records import RECORD_BATCH_OVERHEAD, CompressionType
from kfk.records.builder import record_size

__all__ = ["ProducerCore", "Serializer", "to_bytes"]

Serializer = Callable[[Any], "bytes | None"]

_NO_HEADERS: list = []
_AS_THEY_ARE = frozenset({bytes, type(None)})
_ACKS = {"all": -1, "-1": -1, "0": 0, "1": 1}
_COMPRESSION = {"none": CompressionType.NONE, "gzip": CompressionType.GZIP, "snappy": CompressionType.SNAPPY,
                "lz4": CompressionType.LZ4, "zstd": CompressionType.ZSTD}
# Topic errors after which waiting for metadata is pointless.
_FATAL_TOPIC_ERRORS = frozenset({ErrorCode.TOPIC_AUTHORIZATION_FAILED, ErrorCode.INVALID_TOPIC_EXCEPTION})


def to_bytes(value: Any) -> bytes | None:
    """The default serializer: bytes-like values as they are, str as UTF-8, None as null."""
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    raise TypeError(f"cannot send a {type(value).__name__}: pass bytes or str, or give the producer a serializer")


class ProducerCore:
    def __init__(self, config: ClientConfig, key_serializer: Serializer | None, value_serializer: Serializer | None,
                 future_type: type[FutureRecordMetadata] = FutureRecordMetadata) -> None:
        self.config = config
        self.transactional_id: str | None = config.transactional_id
        self.acks = _ACKS[config.acks]
        idempotence_explicit = config.enable_idempotence is not None
        conflicts = []
        if self.acks != -1:
            conflicts.append("acks must be all")
        if config.max_in_flight_requests_per_connection > 5:
            conflicts.append("max.in.flight.requests.per.connection must be at most 5")
        if config.retries == 0:
            conflicts.append("retries must be greater than 0")
        if self.transactional_id is not None:
            if config.enable_idempotence is False:
                raise InvalidConfigurationError("transactional.id needs enable.idempotence=true")
            if conflicts:
                raise InvalidConfigurationError(f"transactional.id needs idempotence: {'; '.join(conflicts)}")
            idempotence_explicit = True
        if config.enable_idempotence and conflicts:
            raise InvalidConfigurationError(f"enable.idempotence=true needs: {'; '.join(conflicts)}")
        self.idempotent = self.transactional_id is not None or (
            config.enable_idempotence if idempotence_explicit else not conflicts)
        self.key_serializer = key_serializer or to_bytes
        self.value_serializer = value_serializer or to_bytes
        self.max_block_ms = config.max_block_ms
        self.max_request_size = config.max_request_size
        compression_type = _COMPRESSION[config.compression_type]
        level = {CompressionType.GZIP: config.compression_gzip_level, CompressionType.LZ4: config.compression_lz4_level,
                 CompressionType.ZSTD: config.compression_zstd_level}.get(compression_type)
        if compression_type == CompressionType.GZIP and level == -1:
            level = None
        self.network = NetworkClient(config, allow_auto_topic_creation=True)
        self.accumulator = RecordAccumulator(
            batch_size=config.batch_size, buffer_memory=config.buffer_memory, linger_ms=config.linger_ms,
            compression_type=compression_type, compression_level=level,
            delivery_timeout_ms=config.delivery_timeout_ms, future_type=future_type)
        self.transaction_manager = TransactionManager(
            config.max_in_flight_requests_per_connection, transactional_id=self.transactional_id,
            transaction_timeout_ms=config.transaction_timeout_ms, retry_backoff_ms=config.retry_backoff_ms,
        ) if self.idempotent else None
        self.sender = Sender(
            self.network, self.accumulator, acks=self.acks, retries=config.retries,
            request_timeout_ms=config.request_timeout_ms, delivery_timeout_ms=config.delivery_timeout_ms,
            max_in_flight=config.max_in_flight_requests_per_connection, max_request_size=config.max_request_size,
            retry_backoff=ExponentialBackoff(config.retry_backoff_ms, config.retry_backoff_max_ms),
            transaction_manager=self.transaction_manager,
            idempotence_explicit=idempotence_explicit)
        self.partitioner = BuiltInPartitioner(config.batch_size)
        self.ignore_keys = config.partitioner_ignore_keys
        self._topic_partitions: dict[str, dict[int, TopicPartition]] = {}
        self.closed = False

    # --- checks ------------------------------------------------------------------------------------------------------

    def check_open(self) -> None:
        """Raise if no record may be sent now (closed, or no transaction ready for records). A producer that failed
        for good fails each record's future instead (the accumulator does), as Java's producer does."""
        if self.closed:
            raise RuntimeError("cannot send after the producer is closed")
        if self.transactional_id is not None:  # fail before waiting for metadata; maybe_add_partition checks again
            self.transaction_manager.fail_if_not_ready_for_send()  # type: ignore[union-attr]

    def needs_metadata(self, topic: str, partition: int | None) -> bool:
        """The topic (or the given partition of it) is not in the metadata yet: the owner waits for it."""
        metadata = self.network.cluster.topics.get(topic)
        return metadata is None or not metadata.partitions or (
            partition is not None and partition not in metadata.partitions)

    def metadata_ready(self, cluster: ClusterMetadata, topic: str, partition: int | None) -> bool:
        """Whether ``cluster`` lets records go to ``topic`` (and ``partition``); raises when waiting is pointless."""
        metadata = cluster.topics.get(topic)
        if metadata is None:
            return False
        if metadata.error_code in _FATAL_TOPIC_ERRORS:
            raise error_for_code(metadata.error_code)(f"cannot produce to topic {topic!r}")
        if metadata.error_code != ErrorCode.NONE or not metadata.partitions:
            return False
        if partition is None or partition in metadata.partitions:
            return True
        if partition >= len(metadata.partitions):
            raise KafkaError(f"partition {partition} of topic {topic} with partition count "
                             f"{len(metadata.partitions)} is not present in metadata")
        return False

    def transactions(self) -> TransactionManager:
        manager = self.transaction_manager
        if manager is None or self.transactional_id is None:
            raise InvalidTxnStateError("transactions need a transactional.id in the producer's configuration")
        return manager

    def _check_size(self, key_bytes: bytes | None, value_bytes: bytes | None, headers: list) -> int:
        """The record's size in a batch of its own; a cheap upper bound, exact only for records near the limit."""
        size = (RECORD_BATCH_OVERHEAD + RECORD_FRAMING_BOUND + (len(key_bytes) if key_bytes is not None else 0)
                + (len(value_bytes) if value_bytes is not None else 0))
        if headers or size > self.max_request_size:
            size = RECORD_BATCH_OVERHEAD + record_size(0, 0, key_bytes, value_bytes, headers)
            if size > self.max_request_size:
                raise RecordTooLargeError(f"the record is {size} bytes when serialized, larger than "
                                          f"max.request.size ({self.max_request_size})")
        return size

    # --- appending (the topic's metadata is known) ---------------------------------------------------------------

    def append(self, topic: str, value: Any, key: Any, partition: int | None, timestamp_ms: int | None,
               headers: Any, callback: Callback | None, max_block_ms: float) -> tuple[FutureRecordMetadata, bool]:
        """Queue one record; its future, and whether the sender should be woken (a new or full batch)."""
        cluster = self.network.cluster
        key_bytes = self.key_serializer(key)
        value_bytes = self.value_serializer(value)
        record_headers = _headers(headers) if headers else _NO_HEADERS
        if timestamp_ms is None:
            timestamp_ms = system_time_ms()
        size = self._check_size(key_bytes, value_bytes, record_headers)
        sticky = False
        if partition is None:
            num_partitions = len(cluster.topics[topic].partitions)
            if key_bytes is None or self.ignore_keys:
                sticky = True
                available = cluster.available_partitions_for(topic)
                partition = self.partitioner.partition(topic, available, num_partitions)
            else:
                partition = partition_for_key(key_bytes, num_partitions)
        topic_partition = self._topic_partition(topic, partition)
        if self.transactional_id is not None:
            self.transaction_manager.maybe_add_partition(topic_partition)  # type: ignore[union-attr]
        future, wake = self.accumulator.append(topic_partition, timestamp_ms, key_bytes, value_bytes, record_headers,
                                               max_block_ms, callback)
        if sticky:
            self.partitioner.record_appended(topic, partition, size - RECORD_BATCH_OVERHEAD, available,
                                             num_partitions)
        return future, wake

    def _topic_partition(self, topic: str, partition: int) -> TopicPartition:
        """The one TopicPartition of each partition sent to: making a NamedTuple per record cost more than the
        two lookups."""
        by_index = self._topic_partitions.get(topic)
        if by_index is None:
            by_index = self._topic_partitions[topic] = {}
        topic_partition = by_index.get(partition)
        if topic_partition is None:
            topic_partition = by_index[partition] = TopicPartition(topic, partition)
        return topic_partition

    def append_values(self, topic: str, values: Sequence[Any], keys: Sequence[Any] | None, partition: int | None,
                      timestamp_ms: int | None, callback: RunCallback | None, max_block_ms: float) -> bool:
        """Queue many records without headers, all with one timestamp (produce_batch); whether to wake the sender.
        Records with null keys (or keys ignored) all go to the topic's sticky partition of the moment."""
        cluster = self.network.cluster
        value_list = _serialize_all(self.value_serializer, values)
        key_list = None
        if keys is not None:
            if len(keys) != len(value_list):
                raise ValueError(f"{len(keys)} keys for {len(value_list)} values")
            key_list = _serialize_all(self.key_serializer, keys)
            if all(key is None for key in key_list):
                key_list = None
        if not value_list:
            return False
        longest_value = _longest(value_list)
        longest_key = _longest(key_list) if key_list is not None else 0
        if RECORD_BATCH_OVERHEAD + RECORD_FRAMING_BOUND + longest_key + longest_value > self.max_request_size:
            for index, value in enumerate(value_list):
                self._check_size(key_list[index] if key_list is not None else None, value, _NO_HEADERS)
        if timestamp_ms is None:
            timestamp_ms = system_time_ms()
        num_partitions = len(cluster.topics[topic].partitions)
        groups: dict[int, tuple[list | None, list]]
        sticky = partition is None and (key_list is None or self.ignore_keys)
        if partition is not None:
            groups = {partition: (key_list, value_list)}
        elif sticky:
            partition = self.partitioner.partition(topic, cluster.available_partitions_for(topic), num_partitions)
            groups = {partition: (key_list, value_list)}
        else:
            groups = {}
            for key, value in zip(key_list, value_list):  # type: ignore[arg-type]
                group_keys, group_values = groups.setdefault(
                    partition_for_key(key, num_partitions) if key is not None else
                    self.partitioner.partition(topic, cluster.available_partitions_for(topic), num_partitions),
                    ([], []))
                group_keys.append(key)  # type: ignore[union-attr]
                group_values.append(value)
        wake = False
        for target, (group_keys, group_values) in groups.items():
            topic_partition = self._topic_partition(topic, target)
            if self.transactional_id is not None:
                self.transaction_manager.maybe_add_partition(topic_partition)  # type: ignore[union-attr]
            wake = self.accumulator.append_values(topic_partition, timestamp_ms, group_keys, group_values,
                                                  max_block_ms, callback) or wake
        if sticky:
            size = _total_size(value_list) + RECORD_FRAMING_BOUND * len(value_list)
            self.partitioner.record_appended(topic, partition, size,  # type: ignore[arg-type]
                                             cluster.available_partitions_for(topic), num_partitions)
        return wake


def _serialize_all(serializer: Serializer, items: Sequence[Any]) -> list[bytes | None]:
    """``[serializer(item) for item in items]``; with the default serializer and only bytes and None, a copy of the
    list made at C speed (to_bytes would return each item as it is, at a Python call per record)."""
    if serializer is to_bytes and set(map(type, items)) <= _AS_THEY_ARE:
        return list(items)
    return list(map(serializer, items))


def _longest(values: list[bytes | None]) -> int:
    """The length of the longest value (0 for null), at C speed when none is null."""
    try:
        return max(map(len, values))
    except TypeError:
        return max((len(value) for value in values if value is not None), default=0)


def _total_size(values: list[bytes | None]) -> int:
    try:
        return sum(map(len, values))
    except TypeError:
        return sum(len(value) for value in values if value is not None)


def _headers(headers: Any) -> list[tuple[str, bytes | None]]:
    if not headers:
        return []
    items = headers.items() if isinstance(headers, Mapping) else headers
    result = []
    for name, value in items:
        if not isinstance(name, str):
            raise TypeError(f"header keys are str, not {type(name).__name__}")
        result.append((name, to_bytes(value)))
    return result
