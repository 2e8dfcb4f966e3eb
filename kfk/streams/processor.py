"""The Processor API (Kafka's org.apache.kafka.streams.processor.api): records, processors and their context.

Every DSL operator is a Processor: the task calls ``process(record)`` for each record reaching the node, and the
processor passes results on with ``context.forward(record)`` (to every child, or to one named child). KTable
operators forward a Change (the new value, and the old one when a downstream operator asked for it) as the value.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

if TYPE_CHECKING:
    from kfk.streams.serdes import Serde
    from kfk.streams.state import KeyValueStore

__all__ = ["Change", "Processor", "ProcessorContext", "Record", "RecordMetadata", "TaskId"]

V = TypeVar("V")


@dataclass(frozen=True, order=True)
class TaskId:
    """A task: one sub-topology over one partition of its source topics. Printed as Kafka prints it, "0_1"."""

    subtopology: int
    partition: int

    def __str__(self) -> str:
        return f"{self.subtopology}_{self.partition}"

    @classmethod
    def parse(cls, text: str) -> TaskId:
        subtopology, _, partition = text.partition("_")
        return cls(int(subtopology), int(partition))


@dataclass(frozen=True, slots=True)
class Record:
    """A record flowing through the topology: key, value, timestamp (ms) and headers."""

    key: Any
    value: Any
    timestamp: int
    headers: tuple[tuple[str, bytes | None], ...] = ()

    # Built directly rather than with dataclasses.replace: these run several times per record.
    def with_key(self, key: Any) -> Record:
        return Record(key, self.value, self.timestamp, self.headers)

    def with_value(self, value: Any) -> Record:
        return Record(self.key, value, self.timestamp, self.headers)

    def with_timestamp(self, timestamp: int) -> Record:
        return Record(self.key, self.value, timestamp, self.headers)


@dataclass(frozen=True)
class RecordMetadata:
    """Where the record being processed was read from."""

    topic: str
    partition: int
    offset: int


@dataclass(frozen=True)
class Change(Generic[V]):
    """A KTable update: the key's new value and (when sendOldValues is on) its previous one."""

    new_value: V | None
    old_value: V | None = None


class ProcessorContext:
    """What a processor sees of its task: forward(), its state stores, the task id and the current record's
    metadata. One per processor node per task (the task's runtime implements it)."""

    task_id: TaskId
    application_id: str

    def forward(self, record: Record, child_name: str | None = None) -> None:
        raise NotImplementedError

    def get_state_store(self, name: str) -> KeyValueStore:
        raise NotImplementedError

    def record_metadata(self) -> RecordMetadata | None:
        raise NotImplementedError

    def key_serde(self) -> Serde:
        """default.key.serde (Kafka's ProcessorContext.keySerde())."""
        raise NotImplementedError

    def value_serde(self) -> Serde:
        """default.value.serde (Kafka's ProcessorContext.valueSerde())."""
        raise NotImplementedError


class Processor:
    """Override process(); init() receives the context before the first record, close() runs when the task closes."""

    context: ProcessorContext

    def init(self, context: ProcessorContext) -> None:
        self.context = context

    def process(self, record: Record) -> None:
        raise NotImplementedError

    def close(self) -> None:
        pass
