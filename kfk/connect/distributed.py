"""The distributed herder (Kafka's DistributedHerder): workers sharing `group.id` form a group of protocol type
``connect`` through the broker's group coordinator, keep connector configs, source offsets and statuses in three
compacted topics, and split the connectors and tasks between them.

The topics hold Kafka's record formats, so Java workers and tools read what kfk writes and the other way round:

- config.storage.topic (1 partition), string keys, JSON values (schemas disabled): ``connector-<name>`` →
  {"properties": {...}} (null: deleted), ``task-<name>-<id>`` → {"properties": {...}}, ``commit-<name>`` →
  {"tasks": N} (the task configs written before it become the connector's), ``target-state-<name>`` →
  {"state": "PAUSED", "state.v2": "STOPPED"} (``state`` is what pre-3.5 workers understand);
- offset.storage.topic (25 partitions): key ``["<connector>", {partition}]``, value {offset} (kfk.connect.offsets);
- status.storage.topic (5 partitions): ``status-connector-<name>`` and ``status-task-<name>-<id>`` →
  {"state", "trace", "worker_id", "generation", "version"}.

Rebalances are incremental cooperative (KIP-415, kfk.connect.assignors) unless connect.protocol=eager or a member
of the group offers only Kafka's eager ``default``: a worker keeps running what it has through a rebalance, stops
only what the leader revokes (then rejoins at once so that the leader can hand that out), and starts what it is
given. The owner of a connector asks it for task configs and, when they changed, writes them and their commit record
to the config topic (a Java follower hands them to the leader's internal REST endpoint instead; the records are the
same); the workers running that connector's tasks restart them with the new configs. A new or removed connector, or
new task configs, make every worker rejoin so that the leader places what is new and revokes what is gone. A worker
killed -9 stops heartbeating; after session.timeout.ms the coordinator drops it, the group rebalances and the leader
holds its work back for scheduled.rebalance.max.delay.ms, for it to come back, before the others take it over
(eager: at once).

REST reads are answered by any worker from the topics it has read; writes go to the leader (kfk.connect.rest
forwards them) and answer 409 while the group rebalances, as Kafka's workers do. Restarts go through Kafka's
restart-connector-<name> record ({"include-tasks", "only-failed"}); offsets (KIP-875) are read, altered and reset by
the standalone herder's code over the distributed views (the leader writes them to offset.storage.topic).

Exactly-once source (KIP-618, `exactly.once.source.support=enabled`): each source task produces through a
transactional producer (transactional.id ``<group.id>-<connector>-<task>``) and writes its source offsets to
offset.storage.topic in the same transaction, per poll (transaction.boundary=poll) or per interval; the offsets are
read back read_committed. A task taking over from a dead worker fences the dead one's producer when it initializes
its own, which aborts what that one left open. The ``sessioned`` protocol (Kafka's default) is ``compatible`` with
signed internal requests (kfk.connect.session_keys). Not implemented yet: the leader's fencing of a previous generation's tasks when a connector's task count shrinks
(Kafka's zombie fencing round: a task id no longer run keeps its producer unfenced), a connector's own
offsets.storage.topic, connector-defined transaction boundaries.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from kfk.client import Admin, Consumer, NewTopic, Producer, TopicPartition
from kfk.client.classic_group import ClassicGroupMember, JoinGroupResponse, MemberState
from kfk.client.config import CONSUMER_CONFIG_DEF, ClientConfig
from kfk.client.event_loop import ClientLoop
from kfk.client.network_client import ExponentialBackoff, NetworkClient, monotonic_ms
from kfk.client.structs import ConsumerRecord
from kfk.connect import plugins
from kfk.connect.config_def import ConfigDef, ConfigException, ConfigKey, at_least
from kfk.connect.assignors import IncrementalCooperativeAssignor, eager_assign
from kfk.connect.connect_protocol import (
    COMPATIBLE_PROTOCOL,
    CONNECT_PROTOCOL_TYPE,
    EAGER_PROTOCOL,
    PROTOCOL_VERSIONS,
    SESSIONED_PROTOCOL,
    Assignment,
    WorkerState,
    decode_assignment,
    decode_metadata,
    encode_assignment,
    encode_metadata,
)
from kfk.connect.errors import AlreadyExistsException, ConnectException, NotFoundException, RebalanceNeededException
from kfk.connect.herder import ConnectorState, StandaloneHerder, _Context, validated_config
from kfk.connect.offsets import OffsetStore
from kfk.connect.session_keys import SESSION_KEY_RECORD, SessionKey, verify_signature
from kfk.connect.worker_tasks import ExactlyOnce, TaskStatus
from kfk.errors import ErrorCode, UnknownTopicOrPartitionError

__all__ = ["DistributedHerder", "REBALANCE_MESSAGE"]

log = logging.getLogger("kfk.connect.distributed")

REBALANCE_MESSAGE = "Cannot complete request because of a conflicting operation (e.g. worker rebalance)"
#: Kafka's DistributedConfig defaults.
DEFAULTS = {"offset.storage.partitions": "25", "status.storage.partitions": "5", "config.storage.replication.factor":
            "3", "offset.storage.replication.factor": "3", "status.storage.replication.factor": "3"}
#: The group member's settings, typed and checked as Kafka's DistributedConfig does.
GROUP_CONFIG = ConfigDef([
    ConfigKey("session.timeout.ms", "INT", 10000),
    ConfigKey("heartbeat.interval.ms", "INT", 3000),
    ConfigKey("rebalance.timeout.ms", "INT", 60000),
    ConfigKey("scheduled.rebalance.max.delay.ms", "INT", 300000, validator=at_least(0)),
    ConfigKey("inter.worker.key.ttl.ms", "INT", 3600000, validator=at_least(0)),
])
REQUIRED = ("bootstrap.servers", "group.id", "config.storage.topic", "offset.storage.topic", "status.storage.topic")
#: exactly.once.source.support's values (KIP-618); "preparing" is the step of a rolling upgrade before "enabled".
EXACTLY_ONCE_SOURCE_SUPPORT = ("disabled", "preparing", "enabled")
#: How long a stopping worker waits for its tasks to stop and commit and for the group to see it leave: Kafka's
#: herder waits worker.sync.timeout.ms + task.shutdown.graceful.timeout.ms + 5 s for the connectors + 1 s, 14 s
#: with the defaults.
HERDER_STOP_TIMEOUT_S = 14


#: connect.protocol's values and the protocols a worker offers for each, preferred first (Kafka's
#: ConnectProtocolCompatibility).
OFFERED_PROTOCOLS = {"eager": (EAGER_PROTOCOL,), "compatible": (COMPATIBLE_PROTOCOL, EAGER_PROTOCOL),
                     "sessioned": (SESSIONED_PROTOCOL, COMPATIBLE_PROTOCOL, EAGER_PROTOCOL)}


def offered_protocols(worker_config: Mapping[str, str]) -> tuple[str, ...]:
    """The group protocols connect.protocol stands for (Kafka's default: sessioned), checked as Kafka checks it."""
    value = worker_config.get("connect.protocol", "sessioned")
    protocols = OFFERED_PROTOCOLS.get(value.strip().lower())
    if protocols is None:
        raise ConfigException(f"Invalid value {value} for configuration connect.protocol: String must be one of "
                              f"(case insensitive): {', '.join(OFFERED_PROTOCOLS)}")
    return protocols


def check_required(worker_config: Mapping[str, str]) -> None:
    """Kafka's message for the first required key that is missing."""
    missing = [key for key in REQUIRED if not worker_config.get(key)]
    if missing:
        raise ConfigException(f'Missing required configuration "{missing[0]}" which has no default value.')


def exactly_once_source_enabled(worker_config: Mapping[str, str]) -> bool:
    """exactly.once.source.support, checked as Kafka's DistributedConfig checks it (case insensitive)."""
    value = worker_config.get("exactly.once.source.support", "disabled")
    if value.strip().lower() not in EXACTLY_ONCE_SOURCE_SUPPORT:
        raise ConfigException(f"Invalid value {value} for configuration exactly.once.source.support: String must be "
                              f"one of (case insensitive): {', '.join(EXACTLY_ONCE_SOURCE_SUPPORT)}")
    return value.strip().lower() == "enabled"


def check_worker_config(worker_config: Mapping[str, str]) -> None:
    """What Kafka's DistributedConfig refuses, with its messages, checked before the worker contacts the cluster."""
    check_required(worker_config)
    exactly_once_source_enabled(worker_config)
    offered_protocols(worker_config)
    GROUP_CONFIG.parse(worker_config)


def client_properties(worker_config: Mapping[str, str]) -> dict[str, str]:
    return {key: value for key, value in worker_config.items()
            if key == "bootstrap.servers" or key.startswith(("security.", "sasl.", "ssl."))}


def create_internal_topics(worker_config: Mapping[str, str]) -> None:
    """Kafka's TopicAdmin at startup: the three topics, compacted, created unless they exist."""
    config = {**DEFAULTS, **worker_config}
    topics = [NewTopic(config["config.storage.topic"], 1, int(config["config.storage.replication.factor"]),
                       {"cleanup.policy": "compact"})]
    for kind in ("offset", "status"):
        topics.append(NewTopic(config[f"{kind}.storage.topic"], int(config[f"{kind}.storage.partitions"]),
                               int(config[f"{kind}.storage.replication.factor"]), {"cleanup.policy": "compact"}))
    with Admin(client_properties(worker_config)) as admin:
        for topic, error in admin.create_topics(topics).items():
            if error is not None and error.error_code != ErrorCode.TOPIC_ALREADY_EXISTS:
                raise ConnectException(f"Unable to create topic {topic}: {error}")


def wait_for_partitions(consumer: Consumer, topic: str, timeout: float = 60.0) -> list[TopicPartition]:
    """The topic's partitions, once its metadata has reached the broker the consumer asks (a topic created a moment
    ago may not be there yet)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            partitions = consumer.partitions_for(topic)
        except UnknownTopicOrPartitionError:
            partitions = []
        if partitions:
            return [TopicPartition(topic, partition) for partition in sorted(partitions)]
        if time.monotonic() > deadline:
            raise ConnectException(f"Topic {topic} has no partitions")
        time.sleep(0.2)


class TopicLog:
    """Kafka's KafkaBasedLog: every partition of a topic read from the beginning by a thread of its own, each record
    handed to ``on_record``; writes through a producer. read_to_end() returns once everything written to the topic
    before the call has been handed over, which is how a worker knows its view is current."""

    def __init__(self, client: Mapping[str, str], topic: str, on_record: Callable[[ConsumerRecord], None],
                 name: str, read_committed: bool = False) -> None:
        self.topic, self.on_record = topic, on_record
        self.producer = Producer({**client, "acks": "all", "client.id": f"{name}-producer"})
        self.consumer = Consumer({**client, "auto.offset.reset": "earliest", "enable.auto.commit": False,
                                  "allow.auto.create.topics": False, "client.id": f"{name}-consumer",
                                  "isolation.level": "read_committed" if read_committed else "read_uncommitted"})
        self.partitions = wait_for_partitions(self.consumer, topic)
        self.consumer.assign(self.partitions)
        self.consumer.seek_to_beginning(*self.partitions)
        self.position = 0  # records handed over so far (the config topic's "offset" workers compare)
        self._waiting: list[threading.Event] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"{name}-reader", daemon=True)
        self._thread.start()

    def _apply(self, records: Any) -> None:
        for record in records:
            try:
                self.on_record(record)
            except Exception:
                log.exception("%s: cannot apply the record at offset %d", self.topic, record.offset)
            self.position = record.offset + 1

    def _run(self) -> None:
        while not self._stopping.is_set():
            try:
                with self._lock:
                    waiting, self._waiting = self._waiting, []
                if waiting:
                    end = self.consumer.end_offsets(self.partitions)
                    while not self._stopping.is_set() and any(self.consumer.position(partition) < end[partition]
                                                              for partition in self.partitions):
                        self._apply(self.consumer.poll(0.2))
                    for event in waiting:
                        event.set()
                self._apply(self.consumer.poll(0.2))
            except Exception:
                if not self._stopping.is_set():
                    log.exception("%s: reading failed; retrying", self.topic)
                    time.sleep(0.5)

    def read_to_end(self, timeout: float = 60.0) -> None:
        event = threading.Event()
        with self._lock:
            self._waiting.append(event)
        if not event.wait(timeout):
            raise ConnectException(f"Timed out while reading to the end of {self.topic}")

    def send(self, key: bytes, value: bytes | None) -> None:
        self.producer.send(self.topic, value, key)

    def flush(self) -> None:
        self.producer.flush()

    def stop(self) -> None:
        self._stopping.set()
        self._thread.join(5)
        self.consumer.close()
        self.producer.close(5)


class TopicOffsetStore(OffsetStore):
    """Source offsets in offset.storage.topic (Kafka's KafkaOffsetBackingStore): every worker reads the whole topic;
    a commit is written and flushed before it counts."""

    def __init__(self, client: Mapping[str, str], topic: str, read_committed: bool = False) -> None:
        """`read_committed`: with exactly-once source tasks, whose offsets count once their transaction commits."""
        super().__init__(None)
        self.log = TopicLog(client, topic, self._on_record, "connect-offsets", read_committed)

    def _on_record(self, record: ConsumerRecord) -> None:
        if record.key is None:
            return
        with self._lock:
            if record.value is None:
                self._data.pop(record.key, None)
            else:
                self._data[record.key] = record.value

    def set_all(self, entries: Mapping[bytes, bytes | None]) -> None:
        super().set_all(entries)
        for key, value in entries.items():
            self.log.send(key, value)
        self.log.flush()


def _json(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


@dataclass
class ConfigSnapshot:
    """What the config topic says (Kafka's ClusterConfigState)."""
    connectors: dict[str, dict[str, str]] = field(default_factory=dict)
    tasks: dict[str, list[dict[str, str]]] = field(default_factory=dict)
    target_states: dict[str, str] = field(default_factory=dict)
    pending_tasks: dict[tuple[str, int], dict[str, str]] = field(default_factory=dict)


class WorkerGroupMember(ClassicGroupMember):
    """A worker in the group (Kafka's WorkerGroupMember + WorkerCoordinator): eager or incremental cooperative,
    whichever protocol the group settled on (kfk.connect.assignors)."""

    protocol_type = CONNECT_PROTOCOL_TYPE

    def __init__(self, herder: DistributedHerder, network: NetworkClient, loop: ClientLoop,
                 protocols: tuple[str, ...], max_delay_ms: int, **kwargs: Any) -> None:
        super().__init__(network, loop, **kwargs)
        self.herder = herder
        self.protocols = protocols
        #: The leader's memory of what it handed out (kept while this worker leads).
        self.assignor = IncrementalCooperativeAssignor(max_delay_ms)
        self.last_completed_generation = -1
        #: Which worker's REST URL runs each task, as this member last assigned them (when it leads).
        self.task_owners: dict[tuple[str, int], str] = {}

    def _join_protocols(self) -> list[tuple[str, bytes]]:
        offset = self.herder.config_offset()
        return [(protocol, encode_metadata(WorkerState(self.herder.url, offset,
                                                       self.herder.allocation(PROTOCOL_VERSIONS[protocol]),
                                                       PROTOCOL_VERSIONS[protocol])))
                for protocol in self.protocols]

    async def _perform_assignment(self, join: JoinGroupResponse) -> dict[str, bytes]:
        await asyncio.to_thread(self.herder.config_log.read_to_end)
        members = {member.member_id: decode_metadata(member.metadata) for member in join.members}
        version = PROTOCOL_VERSIONS[join.protocol_name]
        if version == 0:
            assignments = eager_assign(members, self.herder.task_counts())
        else:
            assignments = self.assignor.assign(members, self.herder.task_counts(), self.last_completed_generation,
                                               join.generation_id, int(monotonic_ms()))
        offset = self.herder.config_offset()
        owners: dict[tuple[str, int], str] = {}
        for member, assignment in assignments.items():
            assignment.leader, assignment.leader_url = join.member_id, members[join.member_id].url
            assignment.config_offset, assignment.version = offset, version
            allocation = members[member].allocation
            kept = [] if version == 0 or allocation is None else allocation.tasks
            for task in {*kept, *assignment.tasks} - set(assignment.revoked_tasks):
                owners[task] = members[member].url
        self.task_owners = owners
        log.info("group %s: leader of generation %d (%s) assigned %s", self.group_id, join.generation_id,
                 join.protocol_name, {member: _described(assignment) for member, assignment in assignments.items()})
        return {member: encode_assignment(assignment) for member, assignment in assignments.items()}

    def _on_join_prepare(self) -> None:
        """Eager: everything stops before the join. Cooperative: everything runs on, unless this member lost its
        place in the group (its work is someone else's by now)."""
        if self.protocol_name in (None, EAGER_PROTOCOL) or self.generation_id < 0:
            self.herder.revoke_all()

    def _on_join_complete(self, generation: int, member_id: str, protocol: str, assignment: bytes) -> None:
        self.last_completed_generation = generation
        self.herder.assignment_received(generation, decode_assignment(assignment), protocol != EAGER_PROTOCOL)


def _described(assignment: Assignment) -> str:
    text = f"connectors {assignment.connectors} tasks {assignment.tasks}"
    if assignment.revoked_connectors or assignment.revoked_tasks:
        text += f", revoked connectors {assignment.revoked_connectors} tasks {assignment.revoked_tasks}"
    return text + (f", delay {assignment.delay} ms" if assignment.delay else "")


class DistributedHerder(StandaloneHerder):
    def __init__(self, worker_config: Mapping[str, str], worker_id: str, url: str) -> None:
        check_required(worker_config)
        self.config = {**DEFAULTS, **worker_config}
        client = client_properties(worker_config)
        self.exactly_once_source = exactly_once_source_enabled(worker_config)
        protocols = offered_protocols(worker_config)
        group_config = GROUP_CONFIG.parse(worker_config)
        create_internal_topics(worker_config)
        super().__init__(worker_config, worker_id, TopicOffsetStore(client, self.config["offset.storage.topic"],
                                                                    read_committed=self.exactly_once_source))
        self.url = url
        self.snapshot = ConfigSnapshot()
        self.statuses: dict[str, dict[str, Any]] = {}
        #: Everything this worker runs (eager: as the leader gave it; cooperative: the sum of the rounds), None until
        #: it has joined or after it gave everything up.
        self.assignment: Assignment | None = None
        #: What the last round told it to start, for the herder thread to start.
        self._to_start: tuple[list[str], list[tuple[str, int]]] = ([], [])
        self._task_configs_changed: set[str] = set()
        self._rejoin_at: float | None = None
        #: The sessioned group's key for internal requests (the config topic's latest), and how long one lasts.
        self.session_key: SessionKey | None = None
        self._session_key_ttl_ms = group_config["inter.worker.key.ttl.ms"]
        self.generation = -1
        self._written_status: dict[str, tuple[str, str | None]] = {}
        self._wake = threading.Event()
        self._reconfigure: set[str] = set()
        self._target_changed: set[str] = set()
        self._restarts: dict[str, tuple[bool, bool]] = {}
        self._assignment_pending = False
        self._owned: set[str] = set()
        self.config_log = TopicLog(client, self.config["config.storage.topic"], self._on_config_record,
                                   "connect-configs")
        self.status_log = TopicLog(client, self.config["status.storage.topic"], self._on_status_record,
                                   "connect-statuses")
        self.offset_store.log.read_to_end()
        self.config_log.read_to_end()
        self.status_log.read_to_end()
        self._loop = ClientLoop(f"kfk-connect-group | {worker_id}")
        network_config = ClientConfig(CONSUMER_CONFIG_DEF, "consumer",
                                      {**client, "client.id": worker_config.get("client.id") or "connect-1"})
        self.member = WorkerGroupMember(
            self, NetworkClient(network_config), self._loop, protocols,
            group_config["scheduled.rebalance.max.delay.ms"], group_id=self.config["group.id"],
            group_instance_id=None, session_timeout_ms=group_config["session.timeout.ms"],
            rebalance_timeout_ms=group_config["rebalance.timeout.ms"],
            heartbeat_interval_ms=group_config["heartbeat.interval.ms"],
            retry_backoff=ExponentialBackoff(100, 1000))
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kfk-connect-herder", daemon=True)
        self._thread.start()

    def _exactly_once(self, connector: str, task_id: int, parsed: Mapping[str, Any]) -> ExactlyOnce | None:
        """With exactly.once.source.support=enabled: the task's transactional id (Kafka's
        <group.id>-<connector>-<task>) and where its transactions end."""
        if not self.exactly_once_source:
            return None
        state = self.connectors.get(connector)
        if parsed["exactly.once.support"] == "required" and state is not None and \
                state.connector.exactly_once_support(state.config) != "SUPPORTED":
            raise ConnectException(f"The connector {connector} has not indicated that it supports exactly-once "
                                   "delivery; reconfigure it with exactly.once.support=requested to run it anyway")
        if parsed["transaction.boundary"] == "connector":
            raise ConnectException("The connector does not support connector-defined transaction boundaries with "
                                   "the given configuration. Please reconfigure it to use a different transaction "
                                   "boundary definition.")
        offsets_topic = self.config["offset.storage.topic"]
        if parsed["offsets.storage.topic"] not in (None, "", offsets_topic):
            raise ConnectException("kfk's workers keep every connector's source offsets in the worker's "
                                   f"offset.storage.topic ({offsets_topic}): a connector's own offsets.storage.topic "
                                   "is not supported yet")
        interval_s = None
        if parsed["transaction.boundary"] == "interval":
            interval_ms = parsed["transaction.boundary.interval.ms"]
            interval_s = (interval_ms if interval_ms is not None else
                          int(self.config.get("offset.flush.interval.ms", "60000"))) / 1000
        return ExactlyOnce(f"{self.config['group.id']}-{connector}-{task_id}", offsets_topic, interval_s)

    # --- the config topic --------------------------------------------------------------------------------------------

    def config_offset(self) -> int:
        """Kafka's config state offset: the offset after the last config record read (-1 before any), which a Java
        member compares with the leader's for equality before it starts its assignment."""
        return self.config_log.position or -1

    def task_counts(self) -> dict[str, int]:
        with self.lock:
            return {name: len(self.snapshot.tasks.get(name, [])) for name in self.snapshot.connectors}

    def _on_config_record(self, record: ConsumerRecord) -> None:
        key = (record.key or b"").decode()
        value = json.loads(record.value) if record.value is not None else None
        snapshot = self.snapshot
        with self.lock:
            if key.startswith("connector-"):
                name = key[len("connector-"):]
                known = name in snapshot.connectors
                if value is None:
                    snapshot.connectors.pop(name, None)
                    snapshot.tasks.pop(name, None)
                    snapshot.target_states.pop(name, None)
                else:
                    snapshot.connectors[name] = value["properties"]
                    if known:
                        self._reconfigure.add(name)
                if known != (value is not None):
                    self.member.request_rejoin(f"connector {name} was {'created' if value else 'deleted'}")
            elif key.startswith("task-"):
                name, _, task = key[len("task-"):].rpartition("-")
                if value is not None:
                    snapshot.pending_tasks[(name, int(task))] = value["properties"]
            elif key.startswith("commit-"):
                name = key[len("commit-"):]
                count = value["tasks"] if value is not None else 0
                tasks = [snapshot.pending_tasks.pop((name, task), {}) for task in range(count)]
                if tasks != snapshot.tasks.get(name):
                    snapshot.tasks[name] = tasks
                    self._task_configs_changed.add(name)
                    self.member.request_rejoin(f"the task configs of {name} changed")
            elif key == SESSION_KEY_RECORD and value is not None:
                self.session_key = SessionKey.from_record(value)
            elif key.startswith("restart-connector-") and value is not None:
                self._restarts[key[len("restart-connector-"):]] = (bool(value.get("include-tasks")),
                                                                   bool(value.get("only-failed")))
            elif key.startswith("target-state-"):
                name = key[len("target-state-"):]
                if value is None:
                    snapshot.target_states.pop(name, None)
                else:
                    snapshot.target_states[name] = value.get("state.v2") or value["state"]
                self._target_changed.add(name)
        self._wake.set()

    def _on_status_record(self, record: ConsumerRecord) -> None:
        key = (record.key or b"").decode()
        with self.lock:
            if record.value is None:
                self.statuses.pop(key, None)
            else:
                self.statuses[key] = json.loads(record.value)

    def _write_config(self, records: list[tuple[str, Any]]) -> None:
        for key, value in records:
            self.config_log.send(key.encode(), None if value is None else _json(value))
        self.config_log.flush()
        self.config_log.read_to_end()

    # --- the group ---------------------------------------------------------------------------------------------------

    def _run(self) -> None:
        while not self._stopping.is_set():
            try:
                if self._rejoin_at is not None and time.monotonic() >= self._rejoin_at:
                    self._rejoin_at = None
                    self.member.request_rejoin("the delay the leader gave is over")
                if not self.member.ensure_active_group(monotonic_ms() + 500):
                    continue
                self._tick()
                self._rotate_session_key()
            except Exception:
                log.exception("worker %s: herder tick failed", self.worker_id)
                time.sleep(1)
            self._wake.wait(0.5)
            self._wake.clear()

    def _sessioned(self) -> bool:
        return self.member.protocol_name == SESSIONED_PROTOCOL

    def _rotate_session_key(self) -> None:
        """The leader of a sessioned group writes a new session key when there is none or it is
        inter.worker.key.ttl.ms old (Kafka's DistributedHerder). Not under self.lock: the write waits for the config
        reader."""
        assignment = self.assignment
        if not self._sessioned() or assignment is None or assignment.leader != self.member.member_id:
            return
        now_ms = int(time.time() * 1000)
        key = self.session_key
        if key is None or key.creation_timestamp_ms + self._session_key_ttl_ms <= now_ms:
            log.info("worker %s: writing a new session key for the group's internal requests", self.worker_id)
            self._write_config([(SESSION_KEY_RECORD, SessionKey.generate(now_ms).record())])

    def rebalancing(self) -> bool:
        return self.member.rejoin_needed or self.member.state != MemberState.STABLE or self.assignment is None

    def revoke_all(self) -> None:
        """Eager: everything this worker runs stops before it joins again."""
        with self.lock:
            for state in list(self.connectors.values()):
                task_ids = set(state.tasks) | set(state.failed_tasks)
                self._stop_connector(state)
                if state.name in self._owned:
                    self._write_status(f"status-connector-{state.name}", "UNASSIGNED", None, state.version)
                for task_id in task_ids:
                    self._write_status(f"status-task-{state.name}-{task_id}", "UNASSIGNED", None, state.version)
            self.connectors.clear()
            self._owned.clear()
            self._to_start = ([], [])
            self._written_status.clear()  # whatever this worker gets next, it announces
            self.assignment = None
            self.status_log.flush()

    def _leave_cleanly(self) -> None:
        try:
            self.revoke_all()
            self.member.leave("the worker is stopping", 10_000)
        except Exception:  # noqa: BLE001 - stopping regardless
            log.exception("worker %s: failed to stop cleanly", self.worker_id)

    def allocation(self, version: int) -> Assignment | None:
        """What this worker runs, as its join metadata carries it (protocol versions 1 and 2)."""
        with self.lock:
            current = self.assignment
            if version == 0 or current is None:
                return None
            return Assignment(current.error, current.leader, current.leader_url, current.config_offset,
                              list(current.connectors), list(current.tasks), version=version)

    def assignment_received(self, generation: int, assignment: Assignment, cooperative: bool) -> None:
        """On the herder thread, from the join round. Cooperative: what is revoked stops now (the worker then
        rejoins at once, so that the leader can hand it out), the rest runs on, and a delay schedules the next
        join."""
        with self.lock:
            self.generation = generation
            previous = self.assignment if cooperative else None
            if previous is None:
                connectors, tasks = list(assignment.connectors), list(assignment.tasks)
            else:
                self._revoke(assignment.revoked_connectors, assignment.revoked_tasks)
                connectors = [name for name in previous.connectors if name not in assignment.revoked_connectors]
                tasks = [task for task in previous.tasks if task not in assignment.revoked_tasks]
                connectors += [name for name in assignment.connectors if name not in connectors]
                tasks += [task for task in assignment.tasks if task not in tasks]
            self.assignment = Assignment(assignment.error, assignment.leader, assignment.leader_url,
                                         assignment.config_offset, connectors, tasks)
            # a round that revoked something is followed at once by another, before anything is started
            pending_connectors, pending_tasks = self._to_start if previous is not None else ([], [])
            self._to_start = (
                [name for name in pending_connectors if name not in assignment.revoked_connectors]
                + list(assignment.connectors),
                [task for task in pending_tasks if task not in assignment.revoked_tasks] + list(assignment.tasks))
            self._assignment_pending = True
        log.info("worker %s: generation %d assigned connectors %s and tasks %s (leader %s)", self.worker_id,
                 generation, assignment.connectors, assignment.tasks, assignment.leader_url)
        if assignment.revoked_connectors or assignment.revoked_tasks:
            log.info("worker %s: generation %d revoked connectors %s and tasks %s", self.worker_id, generation,
                     assignment.revoked_connectors, assignment.revoked_tasks)
            self.member.request_rejoin("connectors or tasks were revoked")
        if assignment.delay > 0:
            self._rejoin_at = time.monotonic() + assignment.delay / 1000

    def _revoke(self, connectors: list[str], tasks: list[tuple[str, int]]) -> None:
        """Stop what the leader took away (their new owners start them after the next round)."""
        for name in connectors:
            state = self.connectors.get(name)
            if state is None or name not in self._owned:
                continue
            if state.connector is not None and state.status.state not in ("STOPPED", "FAILED", "UNASSIGNED"):
                try:
                    state.connector.stop()
                except Exception:
                    log.exception("Connector %s failed to stop", name)
            self._owned.discard(name)
            state.status = TaskStatus()
            self._write_status(f"status-connector-{name}", "UNASSIGNED", None, state.version)
        for name, task_id in tasks:
            state = self.connectors.get(name)
            if state is None:
                continue
            task = state.tasks.pop(task_id, None)
            if task is not None:
                task.stop()
            if task is not None or state.failed_tasks.pop(task_id, None) is not None:
                self._write_status(f"status-task-{name}-{task_id}", "UNASSIGNED", None, state.version)
        for name in {*connectors, *(name for name, _ in tasks)}:
            state = self.connectors.get(name)
            if state is not None and name not in self._owned and not state.tasks and not state.failed_tasks:
                del self.connectors[name]
        self.status_log.flush()

    def _tick(self) -> None:
        with self.lock:
            if self._assignment_pending:
                self._assignment_pending = False
                self._apply_task_config_changes()
                self._start_assigned()
            reconfigure, self._reconfigure = self._reconfigure, set()
            targets, self._target_changed = self._target_changed, set()
            restarts, self._restarts = self._restarts, {}
            for name, (include_tasks, only_failed) in restarts.items():
                state = self.connectors.get(name)
                if state is not None and state.target_state != "STOPPED":
                    self._restart_here(state, include_tasks, only_failed)
            for name in reconfigure | targets:
                state = self.connectors.get(name)
                if state is None or state.connector is None or name not in self.snapshot.connectors:
                    continue
                target = self.snapshot.target_states.get(name, "STARTED")
                if name not in reconfigure and {state.target_state, target} <= {"STARTED", "PAUSED"}:
                    self._pause_or_resume(state, target)
                else:
                    self._restart_owned_connector(state)
            self._publish_statuses()

    def _restart_here(self, state: ConnectorState, include_tasks: bool, only_failed: bool) -> None:
        """A restart-connector record: every worker restarts its part (the connector where it runs, the tasks with
        include-tasks), only what FAILED with only-failed."""
        if state.name in self._owned and (not only_failed or state.status.state == "FAILED"):
            if state.connector is not None and state.status.state not in ("FAILED", "STOPPED", "UNASSIGNED"):
                try:
                    state.connector.stop()
                except Exception:
                    log.exception("Connector %s failed to stop", state.name)
            state.status = TaskStatus()
            self._start_owned_connector(state)
        if not include_tasks:
            return
        for task_id in sorted(set(state.tasks) | set(state.failed_tasks)):
            task = state.tasks.get(task_id)
            status = task.status if task is not None else state.failed_tasks[task_id]
            if only_failed and status.state != "FAILED":
                continue
            if task is not None:
                state.tasks.pop(task_id).stop()
            if task_id < len(state.task_configs):
                self._start_task(state, task_id, state.task_configs[task_id])

    def _pause_or_resume(self, state: ConnectorState, target: str) -> None:
        """PAUSED <-> STARTED: the connector and its tasks here stay where they are, idle or working."""
        state.target_state = target
        if state.name in self._owned and state.status.state in ("RUNNING", "PAUSED"):
            state.status.state = "RUNNING" if target == "STARTED" else "PAUSED"
        for task in state.tasks.values():
            (task.resume if target == "STARTED" else task.pause)()

    def _local_state(self, name: str) -> ConnectorState | None:
        config = self.snapshot.connectors.get(name)
        if config is None:
            return None
        state = self.connectors.get(name)
        if state is None:
            state = ConnectorState(name, dict(config), plugins.find_connector(config["connector.class"]).kind,
                                   target_state=self.snapshot.target_states.get(name, "STARTED"))
            state.task_configs = list(self.snapshot.tasks.get(name, []))
            self.connectors[name] = state
        return state

    def _apply_task_config_changes(self) -> None:
        """New task configs of a connector some of whose tasks run here (cooperative rounds keep them running):
        restart them with their new configs; a task id beyond the new count stops (the leader also revokes it)."""
        changed, self._task_configs_changed = self._task_configs_changed, set()
        for name in changed:
            state = self.connectors.get(name)
            if state is None:
                continue
            state.task_configs = list(self.snapshot.tasks.get(name, []))
            for task_id in sorted(set(state.tasks) | set(state.failed_tasks)):
                if task_id in state.tasks:
                    state.tasks.pop(task_id).stop()
                state.failed_tasks.pop(task_id, None)
                if task_id < len(state.task_configs) and (name, task_id) not in self._to_start[1]:
                    self._start_task(state, task_id, state.task_configs[task_id])

    def _start_assigned(self) -> None:
        """Start what the last round handed this worker."""
        connectors, tasks = self._to_start
        self._to_start = ([], [])
        for name in connectors:
            state = self._local_state(name)
            if state is not None:
                self._start_owned_connector(state)
        for name, task_id in tasks:
            state = self._local_state(name)
            if state is None or task_id >= len(state.task_configs) or task_id in state.tasks:
                continue
            if state.connector is None:
                try:
                    state.connector = plugins.find_connector(state.config["connector.class"]).instantiate()
                    state.version = state.connector.version()
                except Exception as error:
                    status = TaskStatus()
                    status.failed(error)
                    state.failed_tasks[task_id] = status
                    continue
            self.offset_store.log.read_to_end()
            self._start_task(state, task_id, state.task_configs[task_id])

    def _start_owned_connector(self, state: ConnectorState) -> None:
        """Start a connector this worker owns; new task configs go to the config topic (and a rebalance)."""
        self._owned.add(state.name)
        try:
            connector = plugins.find_connector(state.config["connector.class"]).instantiate()
            state.connector, state.version = connector, connector.version()
            if state.target_state == "STOPPED":
                state.status = TaskStatus("STOPPED")
                task_configs: list[dict[str, str]] = []
            else:
                connector.initialize(_Context(self, state.name))
                connector.start(state.config)
                state.status = TaskStatus("RUNNING" if state.target_state == "STARTED" else "PAUSED")
                task_configs = self._task_configs(state)
        except Exception as error:
            log.error("Connector %s failed to start", state.name, exc_info=error)
            state.status.failed(error)
            return
        threading.Thread(target=self._commit_task_configs, args=(state.name, task_configs), daemon=True).start()

    def _restart_owned_connector(self, state: ConnectorState) -> None:
        """The connector's config or target state changed: its owner restarts it (and its tasks here)."""
        tasks = {task_id: task.task_config for task_id, task in state.tasks.items()}
        self._stop_connector(state)
        state.config = dict(self.snapshot.connectors[state.name])
        state.target_state = self.snapshot.target_states.get(state.name, "STARTED")
        if state.name in self._owned:
            self._start_owned_connector(state)
        if state.target_state != "STOPPED":
            for task_id, task_config in tasks.items():
                self._start_task(state, task_id, task_config)

    def reconfigure_tasks(self, name: str) -> None:
        """The connector asked for new task configs (request_task_reconfiguration)."""
        with self.lock:
            state = self.connectors.get(name)
            if state is None or name not in self._owned or state.target_state == "STOPPED":
                return
            task_configs = self._task_configs(state)
        self._commit_task_configs(name, task_configs)

    def _commit_task_configs(self, name: str, task_configs: list[dict[str, str]]) -> None:
        """Write the tasks' configs and their commit record, unless the config topic has them already. Never under
        self.lock: the write waits for the config reader, which takes it."""
        if task_configs == self.snapshot.tasks.get(name, []):
            return
        records: list[tuple[str, Any]] = [(f"task-{name}-{task_id}", {"properties": config})
                                          for task_id, config in enumerate(task_configs)]
        self._write_config(records + [(f"commit-{name}", {"tasks": len(task_configs)})])

    # --- status ------------------------------------------------------------------------------------------------------

    def _write_status(self, key: str, state: str, trace: str | None, version: str | None) -> None:
        if self._written_status.get(key) == (state, trace):
            return
        self._written_status[key] = (state, trace)
        self.status_log.send(key.encode(), _json({"state": state, "trace": trace, "worker_id": self.worker_id,
                                                  "generation": self.generation, "version": version}))

    def _publish_statuses(self) -> None:
        """Kafka's status writes: each state change of what this worker runs, to the status topic."""
        for state in self.connectors.values():
            if state.name in self._owned:
                self._write_status(f"status-connector-{state.name}", state.status.state, state.status.trace,
                                   state.version)
            for task_id, task in state.tasks.items():
                self._write_status(f"status-task-{state.name}-{task_id}", task.status.state, task.status.trace,
                                   state.version)
            for task_id, status in state.failed_tasks.items():
                self._write_status(f"status-task-{state.name}-{task_id}", status.state, status.trace, state.version)
        self.status_log.flush()

    # --- REST: writes (on the leader) --------------------------------------------------------------------------------

    def write_leader_url(self) -> str | None:
        if self.rebalancing():
            raise RebalanceNeededException(REBALANCE_MESSAGE)
        assignment = self.assignment
        return None if assignment.leader == self.member.member_id else assignment.leader_url

    def _known(self, name: str) -> dict[str, str]:
        with self.lock:
            config = self.snapshot.connectors.get(name)
        if config is None:
            raise NotFoundException(f"Connector {name} not found")
        return config

    def put_connector_config(self, name: str, config: Mapping[str, str], allow_replace: bool
                             ) -> tuple[bool, dict[str, Any]]:
        created = name not in self.snapshot.connectors
        if not created and not allow_replace:
            raise AlreadyExistsException(f"Connector {name} already exists")
        config = validated_config(name, config)
        self._write_config([(f"connector-{name}", {"properties": config})])
        return created, self.connector_info(name)

    def patch_connector_config(self, name: str, patch: Mapping[str, str | None]) -> dict[str, Any]:
        config = dict(self._known(name))
        for key, value in patch.items():
            if value is None:
                config.pop(key, None)
            else:
                config[key] = str(value)
        return self.put_connector_config(name, config, allow_replace=True)[1]

    def delete_connector(self, name: str) -> None:
        self._known(name)
        self._write_config([(f"connector-{name}", None), (f"target-state-{name}", None)])

    def _set_target(self, name: str, target: str) -> None:
        self._known(name)
        self._write_config([(f"target-state-{name}", {"state": "PAUSED" if target == "STOPPED" else target,
                                                      "state.v2": target})])

    def pause(self, name: str) -> None:
        self._set_target(name, "PAUSED")

    def resume(self, name: str) -> None:
        self._set_target(name, "STARTED")

    def stop_connector(self, name: str) -> None:
        self._set_target(name, "STOPPED")
        self._write_config([(f"commit-{name}", {"tasks": 0})])

    def restart_connector(self, name: str, include_tasks: bool, only_failed: bool) -> dict[str, Any] | None:
        """Kafka's restart through the group: the leader writes restart-connector-<name> and answers with what will
        restart (202), or 204 for a plain connector restart."""
        status = self.connector_status(name)
        if not only_failed or status["connector"]["state"] == "FAILED":
            status["connector"]["state"] = "RESTARTING"
        for task in status["tasks"] if include_tasks else ():
            if not only_failed or task["state"] == "FAILED":
                task["state"] = "RESTARTING"
        self._write_config([(f"restart-connector-{name}", {"include-tasks": include_tasks,
                                                           "only-failed": only_failed})])
        return status if (include_tasks or only_failed) else None

    def put_task_configs(self, name: str, task_configs: list[dict[str, Any]], headers: Mapping[str, str],
                         body: bytes) -> None:
        """A follower (a Java worker: kfk's write the config topic themselves) hands over its connector's task
        configs, signed with the session key in a sessioned group; the leader writes them and their commit
        record."""
        if self._sessioned():
            verify_signature(self.session_key, headers, body)
        self._known(name)
        self._commit_task_configs(name, [{key: str(value) for key, value in config.items()}
                                         for config in task_configs])

    def restart_task(self, name: str, task_id: int, may_forward: bool = True) -> str | None:
        """Kafka's restart of one task: the worker that runs it restarts it; another answers with the leader's URL,
        the leader with the URL of the task's worker (from its last assignment)."""
        if self.rebalancing():
            raise RebalanceNeededException(REBALANCE_MESSAGE)
        with self.lock:
            state = self._get(name)
            if not 0 <= task_id < len(state.task_configs):
                raise NotFoundException(f"Task {name}-{task_id} not found")
            assignment = self.assignment
            local = self.connectors.get(name)
            if (name, task_id) in assignment.tasks and local is not None:
                self._restart_task_here(local, task_id)
                self._written_status.pop(f"status-task-{name}-{task_id}", None)  # RUNNING again, as Kafka writes
                return None
        if not may_forward:  # a forwarded request: the assignment moved meanwhile
            raise RebalanceNeededException(REBALANCE_MESSAGE)
        if assignment.leader != self.member.member_id:
            return assignment.leader_url
        owner = self.member.task_owners.get((name, task_id))
        if owner is None:
            raise NotFoundException(f"Task {name}-{task_id} is not assigned to any worker yet")
        return owner

    # --- REST: reads (any worker) ------------------------------------------------------------------------------------

    def connector_names(self) -> list[str]:
        with self.lock:
            return sorted(self.snapshot.connectors)

    def _get(self, name: str) -> ConnectorState:
        """A view of the connector as the config topic has it (the standalone herder's offset and topic views)."""
        config = self._known(name)
        state = ConnectorState(name, dict(config), plugins.find_connector(config["connector.class"]).kind,
                               target_state=self.snapshot.target_states.get(name, "STARTED"))
        state.task_configs = list(self.snapshot.tasks.get(name, []))
        return state

    def connector_info(self, name: str) -> dict[str, Any]:
        state = self._get(name)
        return {"name": name, "config": state.config,
                "tasks": [{"connector": name, "task": task_id} for task_id in range(len(state.task_configs))],
                "type": state.kind}

    def connector_config(self, name: str) -> dict[str, str]:
        return dict(self._known(name))

    def task_configs(self, name: str) -> list[dict[str, Any]]:
        state = self._get(name)
        return [{"id": {"connector": name, "task": task_id}, "config": {**state.config, **config}}
                for task_id, config in enumerate(state.task_configs)]

    def _status_body(self, key: str) -> dict[str, Any]:
        stored = self.statuses.get(key)
        if stored is None:
            return {"state": "UNASSIGNED", "worker_id": self.worker_id, "version": None}
        body = {"state": stored["state"], "worker_id": stored["worker_id"], "version": stored.get("version")}
        if stored.get("trace") is not None:
            body["trace"] = stored["trace"]
        return body

    def connector_status(self, name: str) -> dict[str, Any]:
        if name not in self.snapshot.connectors:
            raise NotFoundException(f"No status found for connector {name}")
        state = self._get(name)
        return {"name": name, "connector": self._status_body(f"status-connector-{name}"),
                "tasks": [{"id": task_id, **self._status_body(f"status-task-{name}-{task_id}")}
                          for task_id in range(len(state.task_configs))],
                "type": state.kind}

    def task_status(self, name: str, task_id: int) -> dict[str, Any]:
        state = self._get(name)
        if not 0 <= task_id < len(state.task_configs):
            raise NotFoundException(f"No status found for task {name}-{task_id}")
        return {"id": task_id, **self._status_body(f"status-task-{name}-{task_id}")}

    def stop(self) -> None:
        """Leave the group cleanly (stop tasks, commit their offsets, LeaveGroup), waiting for that at most
        HERDER_STOP_TIMEOUT_S as Kafka's herder does (with the cluster gone, each write would wait out its own
        timeout), then close the clients."""
        self._stopping.set()
        self._wake.set()
        self._thread.join(10)
        leaving = threading.Thread(target=self._leave_cleanly, name="kfk-connect-herder-stop", daemon=True)
        leaving.start()
        leaving.join(HERDER_STOP_TIMEOUT_S)
        if leaving.is_alive():
            log.warning("worker %s: stopping its tasks and leaving the group did not finish within %d s (is the "
                        "Kafka cluster reachable?); stopping without it", self.worker_id, HERDER_STOP_TIMEOUT_S)
        self._loop.close()
        for topic_log in (self.config_log, self.status_log, self.offset_store.log):
            topic_log.stop()
