"""ShareConsumer: a member of a share group (KIP-932), Java's KafkaShareConsumer in Python, for any Kafka 4.1+.

    with ShareConsumer({"bootstrap.servers": "localhost:9092", "group.id": "workers"}) as consumer:
        consumer.subscribe(["jobs"])
        while True:
            for record in consumer.poll(1.0):
                handle(record)          # implicit mode: accepted at the next poll, commit or close

Members of a share group read the same partitions cooperatively: the coordinator assigns partitions (several
members may share one, ShareGroupHeartbeat), each partition leader hands each record to one member at a time
(ShareFetch returns the acquired offsets and their delivery counts), and the member acknowledges each record:
ACCEPT (done), RELEASE (give it to another member: delivered again, its delivery count one higher) or REJECT
(never deliver it again). With share.acknowledgement.mode=implicit (the default) every record a poll returned is
accepted at the next poll, commit_sync/commit_async or close; with explicit the application calls
acknowledge(record, type) for each, and poll refuses to go on while a record of the last poll is unacknowledged.

Acknowledgements ride on the next ShareFetch to the partition's leader; commit_sync/commit_async send them at once
with ShareAcknowledge. A share session per leader (epochs 0, 1, 2, ...) names the partitions fetched; close sends
the final epoch (-1, what the member still holds goes back to the others) and leaves the group (member epoch -1).
Heartbeats run on the client's network thread, so a member stays in the group while the application works.
An acknowledgement commit callback (Java's AcknowledgementCommitCallback) hears how each partition's
acknowledgements ended, on the application's thread, in the next poll, commit_sync or close. For asyncio code,
kfk.client.aio.AIOShareConsumer is the same member with its network side on the caller's event loop.
"""

from __future__ import annotations

import asyncio
import enum
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from typing import Any, NamedTuple

from kfk.client.config import CONSUMER_CONFIG_DEF, ClientConfig
from kfk.client.consumer.fetcher import CompletedFetch
from kfk.client.event_loop import ClientLoop, LoopRunner
from kfk.client.network_client import NetworkClient
from kfk.client.offsets import find_coordinator
from kfk.client.response_errors import response_error
from kfk.client.structs import ConsumerRecord
from kfk.common.structs import TopicPartition
from kfk.errors import ErrorCode, InvalidConfigurationError, KafkaError
from kfk.protocol.messages.share_acknowledge import ShareAcknowledgeRequest, ShareAcknowledgeResponse
from kfk.protocol.messages.share_fetch import ShareFetchRequest, ShareFetchResponse
from kfk.protocol.messages.share_group_heartbeat import ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse

__all__ = ["AcknowledgeType", "AcknowledgementCommitCallback", "ShareConsumer", "ShareConsumerRecord"]

ACKNOWLEDGEMENT_MODE = "share.acknowledgement.mode"
#: A share session's first and last epochs; a member leaves the group with this member epoch.
INITIAL_EPOCH, FINAL_EPOCH, LEAVE_GROUP_MEMBER_EPOCH = 0, -1, -1
#: ShareFetch/ShareAcknowledge's type for an acquired offset that holds no record (a control batch, compaction).
GAP = 0
#: How long commit_sync waits without a timeout (Java's default.api.timeout.ms).
DEFAULT_COMMIT_TIMEOUT_S = 60.0


class AcknowledgeType(enum.IntEnum):
    """Kafka's AcknowledgeType: the wire values of ShareFetch/ShareAcknowledge."""

    ACCEPT = 1
    RELEASE = 2
    REJECT = 3


class ShareConsumerRecord(NamedTuple):
    """A record a share consumer got: ConsumerRecord's fields and the delivery count (1 at the first delivery)."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int
    key: Any
    value: Any
    headers: list[tuple[str, bytes | None]]
    leader_epoch: int
    delivery_count: int

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


Deserializer = Callable[[bytes | None], Any]
#: Called with a partition's acknowledged offsets and how they ended (None: the broker took them).
AcknowledgementCommitCallback = Callable[[dict[TopicPartition, set[int]], "KafkaError | None"], None]


class ShareConsumer:
    """A share group member. ``config`` takes Kafka's consumer property names (group.id is required) and
    share.acknowledgement.mode (implicit or explicit)."""

    def __init__(self, config: Mapping[str, Any], *, key_deserializer: Deserializer | None = None,
                 value_deserializer: Deserializer | None = None, network_loop: LoopRunner | None = None) -> None:
        """``network_loop``: where the network side runs (default: a network thread of its own)."""
        properties = dict(config)
        self.acknowledgement_mode = str(properties.pop(ACKNOWLEDGEMENT_MODE, "implicit")).lower()
        if self.acknowledgement_mode not in ("implicit", "explicit"):
            raise InvalidConfigurationError(f"Invalid value {self.acknowledgement_mode} for configuration "
                                            f"{ACKNOWLEDGEMENT_MODE}: String must be one of: implicit, explicit")
        self.config = ClientConfig(CONSUMER_CONFIG_DEF, "consumer", properties)
        if not self.config.group_id:
            raise InvalidConfigurationError("group.id is required for a share consumer")
        self.group_id: str = self.config.group_id
        self.member_id = str(uuid.uuid4())
        self._key_deserializer, self._value_deserializer = key_deserializer, value_deserializer
        self._loop = network_loop or ClientLoop(f"kfk-share-consumer-network-thread | {self.config.client_id}")
        self._network = NetworkClient(self.config)
        self._subscription: list[str] = []
        self._member_epoch = 0
        self._assignment: set[TopicPartition] = set()
        self._heartbeat_task: asyncio.Task | None = None
        self._joined: asyncio.Event | None = None
        self._session_epochs: dict[int, int] = {}  # leader -> the epoch its next share request carries
        self._session_partitions: dict[int, set[TopicPartition]] = {}
        #: The records of the last poll not acknowledged yet, and what was acknowledged but not yet sent.
        self._delivered: dict[TopicPartition, dict[int, ShareConsumerRecord]] = {}
        self._acquired_gaps: dict[TopicPartition, set[int]] = {}
        self._pending: dict[TopicPartition, dict[int, int]] = {}
        self._closed = False
        self._acknowledgement_callback: AcknowledgementCommitCallback | None = None
        #: Acknowledgements answered on the network side, for the callback on the application's side.
        self._completed_acknowledgements: deque[tuple[dict[TopicPartition, set[int]], KafkaError | None]] = deque()

    def __enter__(self) -> ShareConsumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- membership --------------------------------------------------------------------------------------------------

    def subscribe(self, topics: Iterable[str]) -> None:
        """Join the share group (or change the subscription): the coordinator assigns partitions of these topics."""
        self._subscription = sorted(set(topics))
        self._loop.run(self._subscribe(), self.config.request_timeout_ms / 1000)

    def subscription(self) -> set[str]:
        return set(self._subscription)

    def assignment(self) -> set[TopicPartition]:
        return set(self._assignment)

    async def _subscribe(self) -> None:
        self._network.set_topics(self._subscription)
        if self._heartbeat_task is None:
            self._joined = asyncio.Event()
            self._heartbeat_task = asyncio.get_running_loop().create_task(self._heartbeats())

    async def _heartbeat(self, member_epoch: int) -> ShareGroupHeartbeatResponse:
        coordinator = await find_coordinator(self._network, self.group_id, timeout_ms=self.config.request_timeout_ms)
        response = await self._network.send(coordinator, ShareGroupHeartbeatRequest(
            group_id=self.group_id, member_id=self.member_id, member_epoch=member_epoch,
            subscribed_topic_names=list(self._subscription) if member_epoch == 0 else self._subscription,
            rack_id=self.config.client_rack or None))
        assert isinstance(response, ShareGroupHeartbeatResponse)
        return response

    async def _heartbeats(self) -> None:
        """Heartbeat at the interval the coordinator asks for; take each new assignment (member ids are the
        client's own: ShareGroupHeartbeat v1). An unknown or fenced member joins again at epoch 0."""
        assert self._joined is not None
        while not self._closed:
            interval_ms = float(self.config.retry_backoff_ms)
            try:
                response = await self._heartbeat(self._member_epoch)
            except (KafkaError, OSError):
                await asyncio.sleep(interval_ms / 1000)
                continue
            if response.error_code in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_MEMBER_EPOCH):
                self._member_epoch = 0
                continue
            if response.error_code == ErrorCode.NONE:
                self._member_epoch = response.member_epoch
                interval_ms = response.heartbeat_interval_ms
                if response.assignment is not None:
                    cluster = self._network.cluster
                    if any(cluster.topic_name(topic.topic_id) is None
                           for topic in response.assignment.topic_partitions):
                        cluster = await self._network.refresh_metadata()
                    self._assignment = {TopicPartition(name, partition)
                                        for topic in response.assignment.topic_partitions
                                        if (name := cluster.topic_name(topic.topic_id)) is not None
                                        for partition in topic.partitions}
                    self._joined.set()
            await asyncio.sleep(interval_ms / 1000)

    # --- poll and acknowledge ----------------------------------------------------------------------------------------

    def set_acknowledgement_commit_callback(self, callback: AcknowledgementCommitCallback | None) -> None:
        """Java's setAcknowledgementCommitCallback: ``callback(offsets, error)`` once per partition whose
        acknowledgements were answered (error None: the broker took them), called in poll, commit_sync or close."""
        self._acknowledgement_callback = callback

    def _acknowledgements_completed(self, batches: Mapping[TopicPartition, list],
                                    outcome: Mapping[TopicPartition, KafkaError | None]) -> None:
        """Network side: how the acknowledgement `batches` (first, last, types) ended, kept for the callback."""
        if self._acknowledgement_callback is None:
            return
        for tp, taken in batches.items():
            offsets = {offset for first, last, _ in taken for offset in range(first, last + 1)}
            self._completed_acknowledgements.append(({tp: offsets}, outcome.get(tp)))

    def _invoke_acknowledgement_callback(self) -> None:
        callback = self._acknowledgement_callback
        while self._completed_acknowledgements:
            offsets, error = self._completed_acknowledgements.popleft()
            if callback is not None:
                callback(offsets, error)

    def poll(self, timeout: float) -> list[ShareConsumerRecord]:
        """Records acquired for this member (up to max.poll.records), waiting up to ``timeout`` seconds for some.
        What the last poll returned is acknowledged first (implicit mode: accepted)."""
        self._settle_last_poll()
        self._invoke_acknowledgement_callback()
        records = self._loop.run(self._poll(timeout * 1000), timeout + self.config.request_timeout_ms / 1000)
        self._invoke_acknowledgement_callback()
        return records

    def acknowledge(self, record: ShareConsumerRecord, type: AcknowledgeType = AcknowledgeType.ACCEPT) -> None:
        """Acknowledge a record of the last poll (explicit mode); sent with the next poll or commit."""
        if self.acknowledgement_mode != "explicit":
            raise InvalidConfigurationError("acknowledge() needs share.acknowledgement.mode=explicit")
        delivered = self._delivered.get(record.topic_partition, {})
        if delivered.pop(record.offset, None) is None:
            raise ValueError(f"{record.topic_partition} offset {record.offset} is not a record of the last poll, "
                             f"or was acknowledged already")
        self._pending.setdefault(record.topic_partition, {})[record.offset] = int(type)

    def commit_sync(self, timeout: float | None = None) -> dict[TopicPartition, KafkaError | None]:
        """Send the acknowledgements now (ShareAcknowledge to each leader) and wait: the outcome per partition."""
        self._settle_last_poll(implicit_only=True)
        wait = timeout if timeout is not None else DEFAULT_COMMIT_TIMEOUT_S
        outcome = self._loop.run(self._acknowledge(INITIAL_EPOCH), wait)
        self._invoke_acknowledgement_callback()
        return outcome

    def commit_async(self) -> None:
        """Send the acknowledgements without waiting for the answers."""
        self._settle_last_poll(implicit_only=True)
        self._loop.submit(self._acknowledge(INITIAL_EPOCH))

    def _settle_last_poll(self, implicit_only: bool = False) -> None:
        """Implicit mode: accept what the last poll returned. Explicit: a poll with records of the last one not yet
        acknowledged is refused, as Java's."""
        for tp, records in self._delivered.items():
            if not records:
                continue
            if self.acknowledgement_mode == "implicit":
                pending = self._pending.setdefault(tp, {})
                pending.update(dict.fromkeys(records, int(AcknowledgeType.ACCEPT)))
                records.clear()
            elif not implicit_only:
                raise ValueError("All records must be acknowledged in explicit acknowledgement mode")
        for tp, gaps in self._acquired_gaps.items():
            self._pending.setdefault(tp, {}).update(dict.fromkeys(gaps, GAP))
            gaps.clear()

    def _take_acknowledgements(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, list]:
        """The pending acknowledgements of ``partitions`` as (first offset, last offset, [type]) batches."""
        taken: dict[TopicPartition, list] = {}
        for tp in partitions:
            pending = self._pending.pop(tp, None)
            if not pending:
                continue
            batches: list[list] = []
            for offset in sorted(pending):
                if batches and batches[-1][1] == offset - 1 and batches[-1][2] == pending[offset]:
                    batches[-1][1] = offset
                else:
                    batches.append([offset, offset, pending[offset]])
            taken[tp] = [(first, last, [ack_type]) for first, last, ack_type in batches]
        return taken

    def _next_epoch(self, leader: int) -> int:
        epoch = self._session_epochs.get(leader, INITIAL_EPOCH)
        self._session_epochs[leader] = epoch + 1
        return epoch

    async def _poll(self, timeout_ms: float) -> list[ShareConsumerRecord]:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_ms / 1000
        if self._joined is not None and not self._joined.is_set():
            try:
                await asyncio.wait_for(self._joined.wait(), max(deadline - loop.time(), 0.001))
            except asyncio.TimeoutError:
                return []
        while True:
            wait_ms = max(int((deadline - loop.time()) * 1000), 0)
            if not self._assignment and not self._pending:  # nothing assigned (yet): nothing to ask the leaders
                await asyncio.sleep(min(wait_ms, self.config.retry_backoff_ms) / 1000)
                if loop.time() >= deadline:
                    return []
                continue
            records = await self._fetch_once(min(wait_ms, self.config.fetch_max_wait_ms))
            if records or loop.time() >= deadline:
                return records

    async def _fetch_once(self, max_wait_ms: int) -> list[ShareConsumerRecord]:
        cluster = self._network.cluster
        if any(cluster.leader_for(tp) < 0 for tp in self._assignment):
            cluster = await self._network.refresh_metadata()
        by_leader: dict[int, set[TopicPartition]] = {}
        for tp in self._assignment:
            by_leader.setdefault(cluster.leader_for(tp), set()).add(tp)
        for leader, partitions in self._session_partitions.items():  # leaders no longer fetched from: ack only
            if leader not in by_leader and any(tp in self._pending for tp in partitions):
                by_leader[leader] = set()
        answers = await asyncio.gather(*(self._share_fetch(leader, partitions, max_wait_ms)
                                         for leader, partitions in by_leader.items() if leader >= 0),
                                       return_exceptions=True)
        records: list[ShareConsumerRecord] = []
        failed = False
        for answer in answers:
            if isinstance(answer, BaseException):
                if isinstance(answer, (KafkaError, OSError)):
                    failed = True
                    continue
                raise answer
            records += answer
        if failed and not records:  # e.g. SHARE_SESSION_LIMIT_REACHED: ask again after retry.backoff.ms, not at once
            await asyncio.sleep(self.config.retry_backoff_ms / 1000)
        return records

    async def _share_fetch(self, leader: int, partitions: set[TopicPartition], max_wait_ms: int
                           ) -> list[ShareConsumerRecord]:
        cluster = self._network.cluster
        known = self._session_partitions.get(leader, set())
        acknowledgements = self._take_acknowledgements(known | partitions)
        forgotten = known - partitions
        wanted = sorted(partitions | set(acknowledgements))
        by_topic: dict[str, list[TopicPartition]] = {}
        for tp in wanted:
            by_topic.setdefault(tp.topic, []).append(tp)
        Request = ShareFetchRequest
        request = Request(
            group_id=self.group_id, member_id=self.member_id, share_session_epoch=self._next_epoch(leader),
            max_wait_ms=max_wait_ms, min_bytes=self.config.fetch_min_bytes, max_bytes=self.config.fetch_max_bytes,
            max_records=self.config.max_poll_records, batch_size=self.config.max_poll_records,
            topics=[Request.FetchTopic(topic_id=cluster.topic_id(topic), partitions=[Request.FetchPartition(
                partition_index=tp.partition, acknowledgement_batches=[
                    Request.AcknowledgementBatch(first_offset=first, last_offset=last, acknowledge_types=types)
                    for first, last, types in acknowledgements.get(tp, [])]) for tp in tps])
                for topic, tps in by_topic.items()],
            forgotten_topics_data=[Request.ForgottenTopic(topic_id=cluster.topic_id(topic), partitions=[
                tp.partition for tp in forgotten if tp.topic == topic]) for topic in {tp.topic for tp in forgotten}])
        self._session_partitions[leader] = set(partitions)
        try:
            response = await self._network.send(leader, request)
        except BaseException as error:
            self._session_epochs.pop(leader, None)  # the session's state is unknown: open a new one
            failed = error if isinstance(error, KafkaError) else KafkaError(str(error))
            self._acknowledgements_completed(acknowledgements, dict.fromkeys(acknowledgements, failed))
            raise
        assert isinstance(response, ShareFetchResponse)
        if response.error_code != ErrorCode.NONE:
            self._session_epochs.pop(leader, None)
            error = response_error(response.error_code, f"ShareFetch to broker {leader}", response.error_message)
            self._acknowledgements_completed(acknowledgements, dict.fromkeys(acknowledgements, error))
            raise error
        records: list[ShareConsumerRecord] = []
        acknowledged: dict[TopicPartition, KafkaError | None] = {}
        for topic in response.responses:
            name = cluster.topic_name(topic.topic_id)
            if name is None:
                continue
            for partition in topic.partitions:
                tp = TopicPartition(name, partition.partition_index)
                if tp in acknowledgements:
                    acknowledged[tp] = None if partition.acknowledge_error_code == ErrorCode.NONE else response_error(
                        partition.acknowledge_error_code, str(tp), partition.acknowledge_error_message)
                if partition.error_code != ErrorCode.NONE:
                    if partition.error_code in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH):
                        self._network.request_metadata_update()
                    continue
                if partition.acquired_records:
                    records += self._acquired(tp, partition)
        self._acknowledgements_completed(acknowledgements, acknowledged)
        return records

    def _acquired(self, tp: TopicPartition, partition: ShareFetchResponse.PartitionData
                  ) -> list[ShareConsumerRecord]:
        """The records of the acquired ranges, each with its delivery count; an acquired offset without a record
        is acknowledged as a gap with the next acknowledgements."""
        counts = {offset: acquired.delivery_count for acquired in partition.acquired_records
                  for offset in range(acquired.first_offset, acquired.last_offset + 1)}
        fetch = CompletedFetch(tp, min(counts), ErrorCode.NONE, -1, -1, -1, partition.records or b"", None)
        decoded: list[ConsumerRecord] = fetch.take(1 << 30, self.config.check_crcs, False, self._key_deserializer,
                                                   self._value_deserializer)
        records = [ShareConsumerRecord(*record, counts[record.offset]) for record in decoded
                   if record.offset in counts]
        delivered = self._delivered.setdefault(tp, {})
        delivered.update((record.offset, record) for record in records)
        self._acquired_gaps.setdefault(tp, set()).update(set(counts) - {record.offset for record in records})
        return records

    async def _acknowledge(self, epoch_override: int) -> dict[TopicPartition, KafkaError | None]:
        """ShareAcknowledge of everything pending, to each partition's leader. ``epoch_override`` FINAL_EPOCH
        closes the sessions (sent to every leader with a session, acknowledgements or not)."""
        cluster = self._network.cluster
        by_leader: dict[int, list[TopicPartition]] = {}
        for tp in list(self._pending):
            by_leader.setdefault(cluster.leader_for(tp), []).append(tp)
        if epoch_override == FINAL_EPOCH:
            for leader in self._session_epochs:
                by_leader.setdefault(leader, [])
        outcome: dict[TopicPartition, KafkaError | None] = {}
        for leader, partitions in by_leader.items():
            if leader not in self._session_epochs:  # ShareAcknowledge cannot open a session: nothing to say
                continue
            acknowledgements = self._take_acknowledgements(partitions)
            epoch = FINAL_EPOCH if epoch_override == FINAL_EPOCH else self._next_epoch(leader)
            Request = ShareAcknowledgeRequest
            by_topic: dict[str, list[TopicPartition]] = {}
            for tp in acknowledgements:
                by_topic.setdefault(tp.topic, []).append(tp)
            request = Request(group_id=self.group_id, member_id=self.member_id, share_session_epoch=epoch, topics=[
                Request.AcknowledgeTopic(topic_id=cluster.topic_id(topic), partitions=[Request.AcknowledgePartition(
                    partition_index=tp.partition, acknowledgement_batches=[
                        Request.AcknowledgementBatch(first_offset=first, last_offset=last, acknowledge_types=types)
                        for first, last, types in acknowledgements[tp]]) for tp in tps])
                for topic, tps in by_topic.items()])
            try:
                response = await self._network.send(leader, request)
            except (KafkaError, OSError) as error:
                error = error if isinstance(error, KafkaError) else KafkaError(str(error))
                outcome.update(dict.fromkeys(acknowledgements, error))
                self._acknowledgements_completed(acknowledgements, outcome)
                continue
            assert isinstance(response, ShareAcknowledgeResponse)
            if response.error_code != ErrorCode.NONE:
                error = response_error(response.error_code, f"ShareAcknowledge to broker {leader}",
                                       response.error_message)
                outcome.update(dict.fromkeys(acknowledgements, error))
                self._acknowledgements_completed(acknowledgements, outcome)
                continue
            for topic in response.responses:
                name = cluster.topic_name(topic.topic_id)
                for partition in topic.partitions:
                    tp = TopicPartition(name or "", partition.partition_index)
                    outcome[tp] = None if partition.error_code == ErrorCode.NONE \
                        else response_error(partition.error_code, str(tp), partition.error_message)
            self._acknowledgements_completed(acknowledgements, outcome)
        return outcome

    # --- close -------------------------------------------------------------------------------------------------------

    def close(self, timeout: float = 30.0) -> None:
        """Acknowledge what is pending (implicit mode: accept the last poll's records), close the share sessions
        (what this member still holds goes back to the others) and leave the group."""
        if self._closed:
            return
        try:
            self._settle_last_poll(implicit_only=True)
            self._loop.run(self._close(), timeout)
            self._invoke_acknowledgement_callback()
        finally:
            self._closed = True
            self._loop.close()

    async def _close(self) -> None:
        if self._heartbeat_task is not None:
            self._heartbeat_task.cancel()
        try:
            await self._acknowledge(FINAL_EPOCH)
            if self._member_epoch > 0:
                await self._heartbeat(LEAVE_GROUP_MEMBER_EPOCH)
        except (KafkaError, OSError):
            pass  # leaving is best effort: the session timeout removes the member anyway
        await self._network.close()
