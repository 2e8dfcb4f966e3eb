"""Standby replicas (num.standby.replicas): an instance's standby tasks and the thread that keeps them up to date.

The group leader's assignor (kfk.streams.metadata.StreamsAssignor) gives each stateful task standbys on other
instances. Each stream thread hands the standby tasks it received to its instance's StandbyUpdater, which holds them
for the whole instance (as Kafka Streams' state updater does): a standby must let go of its store directory before
an active task of the same id opens it, whichever thread of the instance that active task lands on. The updater
reads the standbys' changelog partitions with a consumer of its own and applies every record to the stores; it
writes their checkpoints every commit.interval.ms and when a standby is closed, so that the active task that
replaces it restores only the changelog's tail.

Warm-up replicas (kfk.streams.assignment) are standbys too. Once every warm-up of the instance is within
acceptable.recovery.lag of its changelogs' high watermarks, the updater asks for a probing rebalance at once rather
than waiting for probing.rebalance.interval.ms, so that the tasks move as soon as they can without a long restore.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING

from kfk.client import Consumer
from kfk.common.structs import TopicPartition
from kfk.errors import OffsetOutOfRangeError
from kfk.streams.processor import TaskId
from kfk.streams.task import StandbyTask

if TYPE_CHECKING:
    from kfk.streams.kafka_streams import KafkaStreams

__all__ = ["StandbyUpdater"]

log = logging.getLogger("kfk.streams")


class StandbyUpdater(threading.Thread):
    """The instance's standby tasks and their changelog reader. Stream threads call assign() and release() from
    their rebalance callbacks; everything that touches the tasks holds the lock."""

    def __init__(self, streams: KafkaStreams) -> None:
        config = streams.config
        super().__init__(name=f"{config.client_id}-StandbyUpdater", daemon=True)
        self.streams = streams
        self.running = True
        self.consumer = Consumer(config.restore_consumer_config(
            f"{config.client_id}-{streams.process_id}-StandbyUpdater-restore-consumer"))
        self._lock = threading.Lock()
        self.tasks: dict[TaskId, StandbyTask] = {}
        #: Each stream thread's standby tasks, as its latest assignment gave them, and which of them are warm-ups.
        self._wanted: dict[str, set[TaskId]] = {}
        self._warmups: dict[str, set[TaskId]] = {}
        #: The warm-ups this instance asked a probing rebalance for already: a warm-up the leader gives again
        #: (the active task moved on meanwhile) waits for the leader's periodic probing rebalance, so that a busy
        #: task cannot make the group rebalance over and over.
        self._probed: set[TaskId] = set()
        self._reassign = True
        #: Changelog records applied (Kafka's standby update-total).
        self.updated_records = 0

    def assign(self, thread_name: str, task_ids: set[TaskId], active: set[TaskId],
               warmups: frozenset[TaskId] = frozenset()) -> None:
        """A stream thread's new standby tasks (``warmups`` among them): open the new ones, close the ones no thread
        wants any more. A task active in this instance is never kept as a standby too."""
        streams = self.streams
        with self._lock:
            self._wanted[thread_name] = set(task_ids) - active
            self._warmups[thread_name] = set(warmups) - active
            self._probed &= set().union(*self._warmups.values())
            wanted = set().union(*self._wanted.values())
            for task_id in [task_id for task_id in self.tasks if task_id not in wanted]:
                self.tasks.pop(task_id).close()
            subtopologies = {subtopology.id: subtopology for subtopology in streams.topology.sub_topologies()}
            for task_id in sorted(wanted - set(self.tasks)):
                self.tasks[task_id] = StandbyTask(
                    task_id, subtopologies[task_id.subtopology], streams.topology,
                    application_id=streams.config.application_id, key_serde=streams.config.key_serde,
                    value_serde=streams.config.value_serde, state_dir=streams.state_dir)
            self._reassign = True

    def release(self, task_id: TaskId) -> None:
        """Close the standby of ``task_id`` (writing its checkpoint) before an active task opens its stores."""
        with self._lock:
            for task_ids in [*self._wanted.values(), *self._warmups.values()]:
                task_ids.discard(task_id)
            task = self.tasks.pop(task_id, None)
            if task is not None:
                task.close()
                self._reassign = True

    def offset_sums(self) -> dict[TaskId, int]:
        """Each standby's changelog positions, summed (the lag the instance reports in its subscription)."""
        with self._lock:
            return {task_id: sum(position or 0 for position in task.positions.values())
                    for task_id, task in self.tasks.items()}

    def stores_named(self, name: str) -> list:
        """The standbys' copies of store ``name`` (interactive queries of stale stores)."""
        with self._lock:
            return [task.stores[name] for task in self.tasks.values() if name in task.stores]

    def run(self) -> None:
        last_checkpoint = time.monotonic()
        interval_s = self.streams.config.commit_interval_ms / 1000
        try:
            while self.running:
                with self._lock:
                    if self._reassign:
                        self._assign_consumer()
                    idle = not self.tasks
                if idle:
                    time.sleep(0.1)
                    continue
                try:
                    records = self.consumer.poll(0.1)
                except OffsetOutOfRangeError as error:  # the changelog's start moved past a position: read from it
                    log.info("standby changelog offsets out of range, reading from their start: %s", error)
                    self.consumer.seek_to_beginning(*self.consumer.assignment())
                    continue
                with self._lock:
                    if not self._reassign:  # else the tasks changed while polling: read again from the positions
                        task_of = {partition: task for task in self.tasks.values() for partition in task.store_of}
                        for partition, batch in records.by_partition().items():
                            task_of[partition].apply(partition, batch)
                        self.updated_records += len(records)
                        self._probe_if_warmed_up()
                    if time.monotonic() - last_checkpoint >= interval_s:
                        for task in self.tasks.values():
                            task.write_checkpoint()
                        last_checkpoint = time.monotonic()
        except BaseException as error:  # noqa: BLE001 - the standbys are lost, the active tasks carry on
            log.error("the standby updater failed; standby replicas are no longer kept up to date", exc_info=error)
        finally:
            with self._lock:
                for task in self.tasks.values():
                    task.close()
                self.tasks.clear()
            self.consumer.close()

    def _probe_if_warmed_up(self) -> None:
        """Ask for a probing rebalance once every warm-up is caught up, as the leader counts it: the lags of a
        task's changelog partitions summed (under the lock)."""
        warmups = [self.tasks[task_id] for task_ids in self._warmups.values() for task_id in task_ids
                   if task_id in self.tasks]
        if not warmups or all(task.id in self._probed for task in warmups):
            return
        acceptable = self.streams.config.acceptable_recovery_lag
        for task in warmups:
            lag = 0
            for partition, position in task.positions.items():
                highwater = self.consumer.highwater(partition)
                if highwater is None:  # not fetched yet
                    return
                lag += highwater - (position or 0)
            if lag > acceptable:
                return
        self._probed.update(task.id for task in warmups)
        self.streams.request_probing_rebalance(
            f"the warm-up replicas {', '.join(sorted(str(task.id) for task in warmups))} have caught up")

    def _assign_consumer(self) -> None:
        """Read every standby's changelog partitions from where each standby is (under the lock)."""
        positions: dict[TopicPartition, int | None] = {
            partition: position for task in self.tasks.values() for partition, position in task.positions.items()}
        self.consumer.assign(list(positions))
        for partition, position in positions.items():
            if position is None:
                self.consumer.seek_to_beginning(partition)
            else:
                self.consumer.seek(partition, position)
        self._reassign = False
