"""A TransactionCoordinator driven by a manual clock over real logs: one Log per __transaction_state partition (the
coordinator's writes are appended to it, and a restart reloads from it), and a partition leader holding real data
logs that answers WriteTxnMarkers by appending the markers, as a broker's handler does."""

from __future__ import annotations

import itertools
from pathlib import Path

from kfk.common.clock import ManualClock
from kfk.common.internal_topics import TRANSACTION_STATE_TOPIC_NAME
from kfk.common.structs import TopicPartition
from kfk.config import LogConfig
from kfk.coordinator.runtime import read_chunk
from kfk.coordinator.transaction.config import TransactionCoordinatorConfig
from kfk.coordinator.transaction.coordinator import (
    ProducerIdResult,
    TransactionCoordinator,
)
from kfk.coordinator.transaction.markers import MarkerRequest
from kfk.coordinator.transaction.metadata import TransactionMetadata
from kfk.coordinator.transaction.record_serde import (
    deserialize_record,
)
from kfk.errors import ErrorCode, KafkaError
from kfk.protocol.messages.write_txn_markers import (
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)
from kfk.records import MemoryRecordsBuilder
from kfk.records.control import (
    ControlRecordType,
    EndTransactionMarker,
    build_end_transaction_marker_batch,
)
from kfk.storage.log import Log
from kfk.storage.producer_state import AppendOrigin

LEADER = 1
FIRST_PRODUCER_ID = 1000


def tp(topic: str, partition: int = 0) -> TopicPartition:
    return TopicPartition(topic, partition)


class Answers(list):
    def __call__(self, answer) -> None:
        self.append(answer)

    @property
    def only(self):
        assert len(self) == 1, self
        return self[0]


def append_records(log: Log, records: list[tuple[bytes, bytes | None]], now_ms: int) -> None:
    builder = MemoryRecordsBuilder(base_offset=log.log_end_offset)
    for key, value in records:
        builder.append(now_ms, key, value)
    log.append_as_leader(builder.close(), 0, now_ms, AppendOrigin.COORDINATOR)
    log.update_high_watermark(log.log_end_offset)


class PartitionLeader:
    """The data partitions' leader: real logs; WriteTxnMarkers appends each marker. `errors` are answered instead
    of appending (each taken once), as a leader that moved or lacks in-sync replicas would answer."""

    def __init__(self, directory: Path, clock: ManualClock) -> None:
        self.directory = directory
        self.clock = clock
        self.logs: dict[TopicPartition, Log] = {}
        self.errors: dict[TopicPartition, list[ErrorCode]] = {}
        self.requests: list[WriteTxnMarkersRequest] = []

    def log(self, topic_partition: TopicPartition) -> Log:
        if topic_partition not in self.logs:
            self.logs[topic_partition] = Log.open(
                str(self.directory / f"{topic_partition.topic}-{topic_partition.partition}"), LogConfig(),
                now_ms=self.clock())
        return self.logs[topic_partition]

    def produce(self, topic_partition: TopicPartition, producer_id: int, producer_epoch: int, base_sequence: int,
                *values: bytes) -> None:
        """A transactional producer's batch."""
        log = self.log(topic_partition)
        builder = MemoryRecordsBuilder(base_offset=log.log_end_offset, producer_id=producer_id,
                                       producer_epoch=producer_epoch, base_sequence=base_sequence,
                                       is_transactional=True)
        for value in values:
            builder.append(self.clock(), None, value)
        log.append_as_leader(builder.close(), 0, self.clock())
        log.update_high_watermark(log.log_end_offset)

    def write_txn_markers(self, request: WriteTxnMarkersRequest) -> WriteTxnMarkersResponse:
        self.requests.append(request)
        results = []
        for marker in request.markers:
            topics = []
            for topic in marker.topics:
                partitions = []
                for index in topic.partition_indexes:
                    topic_partition = tp(topic.name, index)
                    pending = self.errors.get(topic_partition)
                    if pending:
                        error = pending.pop(0)
                    else:
                        error = ErrorCode.NONE
                        log = self.log(topic_partition)
                        record_type = ControlRecordType.COMMIT if marker.transaction_result else ControlRecordType.ABORT
                        log.append_as_leader(build_end_transaction_marker_batch(
                            base_offset=log.log_end_offset, timestamp=self.clock(), partition_leader_epoch=0,
                            producer_id=marker.producer_id, producer_epoch=marker.producer_epoch,
                            marker=EndTransactionMarker(record_type, marker.coordinator_epoch)),
                            0, self.clock(), AppendOrigin.COORDINATOR)
                        log.update_high_watermark(log.log_end_offset)
                    partitions.append(WriteTxnMarkersResponse.WritableTxnMarkerPartitionResult(
                        partition_index=index, error_code=error))
                topics.append(WriteTxnMarkersResponse.WritableTxnMarkerTopicResult(name=topic.name,
                                                                                    partitions=partitions))
            results.append(WriteTxnMarkersResponse.WritableTxnMarkerResult(producer_id=marker.producer_id,
                                                                           topics=topics))
        return WriteTxnMarkersResponse(markers=results)

    def close(self) -> None:
        for log in self.logs.values():
            log.close()


class Harness:
    def __init__(self, directory: Path, *, partitions: int = 3, **config) -> None:
        self.directory = directory
        self.clock = ManualClock()
        self.config = TransactionCoordinatorConfig(transaction_state_log_num_partitions=partitions, **config)
        self.producer_ids = itertools.count(FIRST_PRODUCER_ID)
        #: Raised by the producer id generator instead of an id (e.g. the controller is unreachable).
        self.producer_id_error: KafkaError | None = None
        #: Partition leaders by partition (default LEADER); None: the partition does not exist.
        self.leaders: dict[TopicPartition, int | None] = {}
        self.leader = PartitionLeader(directory / "data", self.clock)
        #: What the __transaction_state appends answer (NONE: appended to the log and committed).
        self.write_error = ErrorCode.NONE
        #: False: writes wait in `held` until `release`.
        self.auto_write = True
        #: False: marker requests wait in `held_markers` (the leaders do not answer).
        self.auto_markers = True
        self.held: list = []
        self.held_markers: list[MarkerRequest] = []
        self.coordinator_epoch = 0
        self.logs: dict[int, Log] = {}
        self._open_logs()
        self.coordinator = self._new_coordinator()
        self.load_all()

    def _open_logs(self) -> None:
        for partition in range(self.config.transaction_state_log_num_partitions):
            self.logs[partition] = Log.open(str(self.directory / f"{TRANSACTION_STATE_TOPIC_NAME}-{partition}"),
                                            LogConfig(), now_ms=self.clock())

    def _new_coordinator(self) -> TransactionCoordinator:
        return TransactionCoordinator(self.config, self._generate_producer_id, self._leader_of)

    def _generate_producer_id(self) -> int:
        if self.producer_id_error is not None:
            raise self.producer_id_error
        return next(self.producer_ids)

    def _leader_of(self, topic: str, partition: int) -> int | None:
        return self.leaders.get(tp(topic, partition), LEADER)

    @property
    def now(self) -> int:
        return self.clock()

    # -- loading -----------------------------------------------------------------------------------------------------

    def load(self, partition: int) -> None:
        """Become the partition's coordinator: replay its log as the service does (read_chunk), then serve."""
        self.coordinator.begin_loading(partition, self.coordinator_epoch)
        log = self.logs[partition]
        offset = log.log_start_offset
        while offset < log.log_end_offset:
            records, offset = read_chunk(log, offset)
            for record in records:
                self.coordinator.replay(partition, record.key, record.value)
        self.coordinator.complete_loading(partition, self.now)
        self.flush()

    def load_all(self) -> None:
        for partition in self.logs:
            self.load(partition)

    def restart(self) -> None:
        """A new coordinator (new term) over the same logs, reopened from disk."""
        for log in self.logs.values():
            log.close()
        self._open_logs()
        self.held.clear()
        self.held_markers.clear()
        self.coordinator_epoch += 1
        self.coordinator = self._new_coordinator()
        self.load_all()

    def records(self, partition: int) -> list:
        log = self.logs[partition]
        records, _ = read_chunk(log, log.log_start_offset)
        return [deserialize_record(record.key, record.value) for record in records]

    def metadata(self, transactional_id: str) -> TransactionMetadata | None:
        return self.coordinator.state.get(transactional_id)[1]

    def log_of(self, transactional_id: str) -> Log:
        return self.logs[self.coordinator.partition_for(transactional_id)]

    # -- driving -----------------------------------------------------------------------------------------------------

    def flush(self) -> None:
        """What the service does after each call: append the writes, send the markers, until nothing is left."""
        while True:
            writes = self.coordinator.take_writes()
            markers = self.coordinator.take_marker_requests(self.now)
            if not self.auto_write:
                self.held += writes
                writes = []
            if not self.auto_markers:
                self.held_markers += markers
                markers = []
            if not writes and not markers:
                return
            for write in writes:
                self._complete_write(write, self.write_error)
            for sent in markers:
                self.coordinator.complete_markers(sent, self.leader.write_txn_markers(sent.request), self.now)

    def _complete_write(self, write, error: ErrorCode) -> None:
        if error == ErrorCode.NONE:
            append_records(self.logs[write.partition], write.records, self.now)
        self.coordinator.complete_write(write, error, self.now)

    def release(self, error: ErrorCode = ErrorCode.NONE) -> None:
        """Complete the held writes (appended and committed, or failed with `error`)."""
        held, self.held = self.held, []
        for write in held:
            self._complete_write(write, error)
        self.flush()

    def answer_markers(self, response: WriteTxnMarkersResponse | None = None) -> None:
        """Answer the held marker requests from the leader (or all with `response`, e.g. None: send failed)."""
        held, self.held_markers = self.held_markers, []
        for sent in held:
            answer = self.leader.write_txn_markers(sent.request) if response is None else response
            self.coordinator.complete_markers(sent, answer, self.now)
        self.flush()

    def fail_markers(self) -> None:
        """The held marker requests could not be sent."""
        held, self.held_markers = self.held_markers, []
        for sent in held:
            self.coordinator.complete_markers(sent, None, self.now)
        self.flush()

    def advance(self, ms: int) -> None:
        """Move the clock, firing every deadline on the way in order."""
        target = self.now + ms
        while True:
            deadline = self.coordinator.next_deadline_ms()
            if deadline is None or deadline > target:
                break
            self.clock.now = max(self.now, deadline)
            self.coordinator.poll(self.now)
            self.flush()
        self.clock.now = target
        self.coordinator.poll(self.now)
        self.flush()

    # -- requests ----------------------------------------------------------------------------------------------------

    def init(self, transactional_id: str | None, timeout_ms: int = 60_000, producer_id: int = -1,
             producer_epoch: int = -1) -> ProducerIdResult:
        answers = Answers()
        self.coordinator.init_producer_id(transactional_id, timeout_ms, producer_id, producer_epoch, self.now,
                                          answers)
        self.flush()
        return answers.only if answers else None

    def add(self, transactional_id: str, producer_id: int, producer_epoch: int, *partitions: TopicPartition,
            tv: int = 0) -> ErrorCode | None:
        answers = Answers()
        self.coordinator.add_partitions(transactional_id, producer_id, producer_epoch, partitions, tv, self.now,
                                        answers)
        self.flush()
        return answers.only if answers else None

    def add_offsets(self, transactional_id: str, producer_id: int, producer_epoch: int, group_id: str) -> ErrorCode:
        answers = Answers()
        self.coordinator.add_offsets(transactional_id, producer_id, producer_epoch, group_id, self.now, answers)
        self.flush()
        return answers.only

    def end(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool,
            tv: int = 0) -> ProducerIdResult | None:
        answers = Answers()
        self.coordinator.end_txn(transactional_id, producer_id, producer_epoch, commit, tv, self.now, answers)
        self.flush()
        return answers.only if answers else None

    def close(self) -> None:
        for log in self.logs.values():
            log.close()
        self.leader.close()
