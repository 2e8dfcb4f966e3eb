"""A seeded simulation of one partition replicated on three brokers (DESIGN decision 9): real logs, the real
Partition (high watermark, ISR decisions), the follower's truncation rule (replica_fetcher.truncation_offset) and the
controller's election rule (partition_change), driven by random schedules of produces, follower fetches, time,
crashes and restarts, with the network in between reduced to direct calls.

Invariant checked after every step (Kafka's guarantee with unclean election off): every record acknowledged to an
acks=all producer is in the leader's log at the offset it was acknowledged at, for as long as there is a leader."""

from __future__ import annotations

import tempfile
import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from kfk.common.clock import ManualClock
from kfk.common.structs import TopicPartition
from kfk.config import LogConfig
from kfk.controller import partition_change
from kfk.errors import ErrorCode, KafkaError
from kfk.metadata.image import NO_LEADER, PartitionRegistration
from kfk.records import complete_entries_length, iter_batches
from kfk.replication.partition import Partition
from kfk.replication.replica_fetcher import truncation_offset
from kfk.storage.fetch_data_info import FetchIsolation
from kfk.storage.log import Log
from tests.storage.conftest import make_batch

LAG_MS = 2000
BROKERS = (1, 2, 3)
TOPIC_PARTITION = TopicPartition("sim", 0)


def log_values(log: Log) -> dict[int, bytes]:
    data = log.read(log.log_start_offset, 1 << 30, FetchIsolation.LOG_END).records.read_bytes()
    return {record.offset: record.value for batch in iter_batches(data) for record in batch.records()}


class Simulation:
    def __init__(self, directory: str, min_insync_replicas: int) -> None:
        self.clock = ManualClock()
        config = LogConfig.from_properties({"min.insync.replicas": min_insync_replicas})
        self.logs = {broker: Log.open(f"{directory}/{broker}/sim-0", config, now_ms=self.clock())
                     for broker in BROKERS}
        self.topic_id = uuid.uuid4()
        self.partitions: dict[int, Partition] = {}
        self.live = set(BROKERS)
        self.registration = PartitionRegistration(replicas=BROKERS, isr=BROKERS, leader=1, leader_epoch=0,
                                                  partition_epoch=0)
        self.truncating: set[int] = set()
        self.pending: list[tuple[int, int, dict[int, bytes]]] = []  # (leader epoch, end offset, values)
        self.committed: dict[int, bytes] = {}
        self.sequence = 0
        for broker in BROKERS:
            self._boot(broker)
        self._apply()

    def _boot(self, broker: int) -> None:
        self.partitions[broker] = Partition(TOPIC_PARTITION, self.topic_id, broker, self.logs[broker], LAG_MS)

    # -- the controller ----------------------------------------------------------------------------------------------

    def _apply(self) -> None:
        """Elect after broker changes, then tell every live broker its role."""
        change = partition_change.elect_after_broker_changes(self.registration, self.live, False)
        if change is not None:
            self._commit_change(change.record(self.topic_id, 0))
        for broker in self.live:
            partition = self.partitions[broker]
            if self.registration.leader == broker:
                partition.make_leader(self.registration, self.clock())
            elif partition.make_follower(self.registration):
                self.truncating.add(broker)

    def _commit_change(self, record) -> None:
        self.registration = self.registration.merge(record)

    def alter_isr(self, leader: Partition, isr: tuple[int, ...]) -> None:
        if leader.partition_epoch != self.registration.partition_epoch or not leader.is_leader:
            return  # stale: InvalidUpdateVersion
        self._commit_change(partition_change.PartitionChange(isr=isr).record(self.topic_id, 0))
        self._apply()

    # -- the brokers -------------------------------------------------------------------------------------------------

    def leader(self) -> Partition | None:
        leader_id = self.registration.leader
        return self.partitions[leader_id] if leader_id != NO_LEADER and leader_id in self.live else None

    def produce(self, count: int, acks: int) -> None:
        leader = self.leader()
        if leader is None:
            return
        values = [f"v{self.sequence + i}".encode() for i in range(count)]
        self.sequence += count
        try:
            leader.check_append_allowed(acks)
        except KafkaError:
            return
        appended = leader.append_to_leader_log(make_batch(0, values, leader_epoch=leader.leader_epoch),
                                               leader.leader_epoch, self.clock())
        leader.maybe_increment_high_watermark(self.clock())
        if acks == -1:
            offsets = range(appended.first_offset, appended.last_offset + 1)
            self.pending.append((leader.leader_epoch, appended.last_offset + 1, dict(zip(offsets, values))))

    def fetch(self, follower_id: int) -> None:
        leader = self.leader()
        if leader is None or follower_id not in self.live or follower_id == leader.local_broker_id:
            return
        follower = self.partitions[follower_id]
        if follower.leader_epoch != leader.leader_epoch:
            return  # its metadata lags (cannot happen here: roles are applied at once)
        if follower_id in self.truncating:
            latest = follower.log.latest_epoch()
            if latest is None:
                target = follower.log.high_watermark
            else:
                epoch, end = leader.log.end_offset_for_epoch(latest)
                target = truncation_offset(follower.log, latest, epoch, end)
            target = max(target, follower.log.high_watermark)
            if target < follower.log.log_end_offset:
                follower.log.truncate_to(target, self.clock())
            self.truncating.discard(follower_id)
        fetch_offset = follower.log.log_end_offset
        leader.update_follower_fetch_state(follower_id, fetch_offset, follower.log.log_start_offset, self.clock())
        data = leader.log.read(fetch_offset, 64 * 1024, FetchIsolation.LOG_END).records.read_bytes()
        complete = complete_entries_length(data)
        follower.append_as_follower(data[:complete], leader.log.high_watermark, leader.log.log_start_offset,
                                    self.clock())
        new_isr = leader.isr_after_expand(follower_id)
        if new_isr is not None:
            self.alter_isr(leader, new_isr)

    def tick(self, seconds: int) -> None:
        self.clock.advance(seconds * 1000)
        leader = self.leader()
        if leader is not None:
            new_isr = leader.isr_after_shrink(self.clock())
            if new_isr is not None:
                self.alter_isr(leader, new_isr)

    def crash(self, broker: int) -> None:
        if broker in self.live and len(self.live) > 1:
            self.live.discard(broker)
            self._apply()

    def restart(self, broker: int) -> None:
        if broker not in self.live:
            self.live.add(broker)
            self._boot(broker)  # the process state is new; the log on disk is what it was
            self._apply()

    # -- the producer's view -----------------------------------------------------------------------------------------

    def acknowledge(self) -> None:
        leader = self.leader()
        still_pending = []
        for epoch, end, values in self.pending:
            if leader is None or leader.leader_epoch != epoch:
                continue  # its leader is gone before acknowledging: the producer got an error (or a timeout)
            reached, error = leader.check_enough_replicas_reach_offset(end)
            if reached and error == ErrorCode.NONE:
                self.committed.update(values)
            elif not reached:
                still_pending.append((epoch, end, values))
        self.pending = still_pending

    def check(self) -> None:
        leader = self.leader()
        if leader is None:
            return
        values = log_values(leader.log)
        lost = {offset: value for offset, value in self.committed.items() if values.get(offset) != value}
        assert not lost, f"acknowledged records lost or changed on leader {leader.local_broker_id}: {lost}"
        # (A new leader's high watermark may lag the old one's until its followers fetch: Kafka's too.)


STEPS = st.lists(st.one_of(
    st.tuples(st.just("produce"), st.integers(1, 5), st.sampled_from([1, -1])),
    st.tuples(st.just("fetch"), st.sampled_from(BROKERS), st.just(0)),
    st.tuples(st.just("tick"), st.integers(1, 3), st.just(0)),
    st.tuples(st.just("crash"), st.sampled_from(BROKERS), st.just(0)),
    st.tuples(st.just("restart"), st.sampled_from(BROKERS), st.just(0)),
), max_size=80)


@settings(max_examples=500, deadline=None)
@given(STEPS, st.sampled_from([1, 2]))
def test_acknowledged_records_survive_every_schedule(steps, min_insync_replicas) -> None:
    with tempfile.TemporaryDirectory() as directory:
        simulation = Simulation(directory, min_insync_replicas)
        for kind, first, second in steps:
            if kind == "produce":
                simulation.produce(first, second)
            elif kind == "tick":
                simulation.tick(first)
            else:
                getattr(simulation, kind)(first)
            simulation.acknowledge()
            simulation.check()
        for log in simulation.logs.values():
            log.close()
