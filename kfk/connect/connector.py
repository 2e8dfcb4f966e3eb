"""The plugin API for connectors and tasks (org.apache.kafka.connect.connector, .source, .sink) in Python.

A Connector is configured once per connector and splits the work into task configs; the worker runs one Task per
config. Source tasks `poll()` SourceRecords (each with the source partition and offset it came from; the worker
stores the offsets, and hands the latest back through `context.offset_storage_reader` after a restart). Sink tasks
are `put()` SinkRecords and `flush()`ed before the worker commits the consumer's offsets (`pre_commit` may narrow
what is committed). Method names are Kafka's, in snake case.
"""

from __future__ import annotations

from typing import Any, Mapping

from kfk.common.structs import OffsetAndMetadata, TopicPartition
from kfk.connect.config_def import ConfigDef
from kfk.connect.records import SinkRecord, SourceRecord


class OffsetStorageReader:
    """What a source task or connector reads its stored offsets through (Kafka's OffsetStorageReader)."""

    def offset(self, partition: Mapping[str, Any]) -> dict[str, Any] | None:
        return self.offsets([partition]).get(frozen_partition(partition))

    def offsets(self, partitions: list[Mapping[str, Any]]) -> dict[Any, dict[str, Any] | None]:
        """Offsets by partition, keyed by `frozen_partition(partition)` (dicts are not hashable)."""
        raise NotImplementedError


def frozen_partition(value: Any) -> Any:
    """A source partition (a JSON-like map) as a hashable value, to key offsets by. Called for every record a
    source task sends, so a plain dict of scalars takes a short way (isinstance against typing's Mapping and a
    generator cost more than the rest: 0.9 µs instead of 3.4 for MirrorMaker's three-key partitions)."""
    if type(value) is dict:
        return tuple(sorted([(key, item if type(item) in _SCALARS else frozen_partition(item))
                             for key, item in value.items()]))
    if type(value) in _SCALARS:
        return value
    if isinstance(value, Mapping):
        return tuple(sorted((key, frozen_partition(item)) for key, item in value.items()))
    if isinstance(value, list):
        return tuple(frozen_partition(item) for item in value)
    return value


#: The JSON scalar types a source partition's values usually are.
_SCALARS = frozenset({str, int, float, bool, type(None)})


class ConnectorContext:
    """Given to a connector: ask the worker for new task configs, or fail the connector."""

    def request_task_reconfiguration(self) -> None:
        raise NotImplementedError

    def raise_error(self, error: Exception) -> None:
        raise NotImplementedError


class SourceConnectorContext(ConnectorContext):
    offset_storage_reader: OffsetStorageReader


class SinkConnectorContext(ConnectorContext):
    pass


class Connector:
    """A connector (Kafka's Connector): configuration and task splitting, no data."""

    context: ConnectorContext

    def initialize(self, context: ConnectorContext) -> None:
        self.context = context

    def version(self) -> str:
        from kfk import __version__
        return __version__

    def start(self, props: Mapping[str, str]) -> None:
        raise NotImplementedError

    def task_class(self) -> type[Task]:
        raise NotImplementedError

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def config(self) -> ConfigDef:
        raise NotImplementedError

    def validate(self, props: Mapping[str, str]) -> dict[str, tuple[Any, list[str]]]:
        """Each of the connector's keys with its errors (Kafka's Connector.validate)."""
        return self.config().validate_all(props)


class SourceConnector(Connector):
    context: SourceConnectorContext

    def exactly_once_support(self, props: Mapping[str, str]) -> str | None:
        """"SUPPORTED", "UNSUPPORTED" or None (unknown), as Kafka's ExactlyOnceSupport (KIP-618)."""
        return None

    def alter_offsets(self, config: Mapping[str, str],
                      offsets: Mapping[Any, Mapping[str, Any] | None]) -> bool:
        """Check (and apply, for externally managed offsets) an offsets change of KIP-875: raise to refuse it;
        return True if the connector handles it (Kafka's default: False, the framework's offsets only)."""
        return False


class SinkConnector(Connector):
    context: SinkConnectorContext

    def alter_offsets(self, config: Mapping[str, str], offsets: Mapping[TopicPartition, int | None]) -> bool:
        return False


class Task:
    def version(self) -> str:
        from kfk import __version__
        return __version__

    def start(self, props: Mapping[str, str]) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError


class SourceTaskContext:
    def __init__(self, config: Mapping[str, str], offset_storage_reader: OffsetStorageReader) -> None:
        self.config = dict(config)
        self.offset_storage_reader = offset_storage_reader


class SourceTask(Task):
    """poll() returns the next records (or None/[] when there are none yet); commit() is called after the worker
    stored the offsets of what was produced; commit_record() after each record is acknowledged by Kafka."""

    context: SourceTaskContext

    def initialize(self, context: SourceTaskContext) -> None:
        self.context = context

    def poll(self) -> list[SourceRecord] | None:
        raise NotImplementedError

    def commit(self) -> None:
        pass

    def commit_record(self, record: SourceRecord, metadata: Any) -> None:
        pass


class SinkTaskContext:
    """What a sink task may ask of the worker: rewind (`offset`), `pause`/`resume` partitions, request a commit."""

    def __init__(self, config: Mapping[str, str]) -> None:
        self.config = dict(config)
        self.offsets_to_reset: dict[TopicPartition, int] = {}
        self.paused_partitions: set[TopicPartition] = set()
        self.resumed_partitions: set[TopicPartition] = set()
        self.commit_requested = False
        self.assignment_set: set[TopicPartition] = set()

    def offset(self, offsets: Mapping[TopicPartition, int]) -> None:
        self.offsets_to_reset.update(offsets)

    def assignment(self) -> set[TopicPartition]:
        return set(self.assignment_set)

    def pause(self, *partitions: TopicPartition) -> None:
        self.paused_partitions.update(partitions)

    def resume(self, *partitions: TopicPartition) -> None:
        self.resumed_partitions.update(partitions)

    def request_commit(self) -> None:
        self.commit_requested = True


class SinkTask(Task):
    context: SinkTaskContext

    def initialize(self, context: SinkTaskContext) -> None:
        self.context = context

    def put(self, records: list[SinkRecord]) -> None:
        raise NotImplementedError

    def flush(self, current_offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> None:
        pass

    def pre_commit(self, current_offsets: Mapping[TopicPartition, OffsetAndMetadata]
                   ) -> Mapping[TopicPartition, OffsetAndMetadata]:
        """The offsets safe to commit: by default flush everything and commit all that was put (Kafka's)."""
        self.flush(current_offsets)
        return current_offsets

    def open(self, partitions: list[TopicPartition]) -> None:
        pass

    def close(self, partitions: list[TopicPartition]) -> None:
        pass
