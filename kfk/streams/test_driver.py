"""TopologyTestDriver: a topology run without a broker (Kafka's TopologyTestDriver), for fast tests of DSL and
Processor API code.

Every topic has one partition, so each sub-topology runs as one task ("<id>_0"). ``pipe_input`` serializes a record
with the topology's serdes and processes it at once, depth first, as the task would; what sinks write is collected
per topic (repartition topics are fed straight back to the sub-topology that reads them), and stores are kept in
memory (their changelog records are collected too, under the changelog topic's name). As Kafka's driver, it
commits after every input record: the record cache (statestore.cache.max.bytes) is flushed then, so a cached store
forwards once per key that record updated, with the value the key had before the record as its old value.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any, NamedTuple

from kfk.client import ConsumerRecord
from kfk.streams.cache import ThreadCache
from kfk.streams.config import StreamsConfig
from kfk.streams.processor import TaskId
from kfk.streams.serdes import Serde
from kfk.streams.state import KeyValueStore
from kfk.streams.task import StreamTask
from kfk.streams.topology import Topology

__all__ = ["TopologyTestDriver", "TestRecord"]


class TestRecord(NamedTuple):
    """An output record, deserialized with the serdes the test names."""

    key: Any
    value: Any
    timestamp: int


class _Written:
    """A send's result, as a producer's future gives it (the driver's sends complete at once)."""

    def __init__(self, offset: int) -> None:
        self.offset = offset


class _CollectingProducer:
    def __init__(self, driver: TopologyTestDriver) -> None:
        self.driver = driver

    def partitions_for(self, topic: str) -> list[int]:
        return [0]

    def send(self, topic: str, value: bytes | None = None, key: bytes | None = None, *, partition: int | None = None,
             timestamp_ms: int | None = None, headers: Any = None) -> Future:
        future: Future = Future()
        future.set_result(_Written(len(self.driver.written[topic])))
        self.driver.written[topic].append((key, value, timestamp_ms or 0, headers or []))
        self.driver._route(topic, key, value, timestamp_ms or 0, headers or [])
        return future


class TopologyTestDriver:
    def __init__(self, topology: Topology, config: Mapping[str, Any]) -> None:
        properties = {"application.id": "test-driver", "bootstrap.servers": "unused:9092", **config}
        self.config = StreamsConfig(properties)
        self.topology = topology
        self.written: dict[str, list[tuple[bytes | None, bytes | None, int, list]]] = defaultdict(list)
        self._offsets: dict[str, int] = defaultdict(int)
        producer = _CollectingProducer(self)
        application_id = self.config.application_id

        def internal(topic: str) -> str:
            return f"{application_id}-{topic}" if topic in topology.repartition_topics else topic

        self.global_stores = {name: KeyValueStore(name, topology.store_builders[name].key_serde or self.config.key_serde,
                                                  topology.store_builders[name].value_serde or self.config.value_serde,
                                                  None, None)
                              for name in topology.global_stores()}
        self._global_store_of = {topic: self.global_stores[name]
                                 for name, topics in topology.global_stores().items() for topic in topics}
        cache_bytes = self.config.statestore_cache_max_bytes
        self.cache = ThreadCache(cache_bytes) if cache_bytes > 0 else None
        self._tasks = [StreamTask(TaskId(subtopology.id, 0), subtopology, topology, application_id=application_id,
                                  producer=producer, key_serde=self.config.key_serde,
                                  value_serde=self.config.value_serde, state_dir=Path("/nonexistent"),
                                  internal_topic=internal, in_memory=True, global_stores=self.global_stores,
                                  exception_handlers=self.config.exception_handlers(), cache=self.cache)
                       for subtopology in topology.sub_topologies()]
        self._task_of = {topic: task for task in self._tasks for topic in task.sources}

    def pipe_input(self, topic: str, key: Any, value: Any, timestamp: int = 0, *, key_serde: Serde | None = None,
                   value_serde: Serde | None = None, headers: Sequence[tuple[str, bytes | None]] = ()) -> None:
        """Process one record arriving on `topic` (serialized with the given serdes, else the defaults)."""
        key_bytes = (key_serde or self.config.key_serde).serialize_for(topic, key)
        value_bytes = (value_serde or self.config.value_serde).serialize_for(topic, value)
        self._route(topic, key_bytes, value_bytes, timestamp, list(headers))
        if self.cache is not None:  # the commit after the record: a flush may dirty another task's cache
            while [task for task in self._tasks if task.flush_cache()]:
                pass

    def _route(self, topic: str, key: bytes | None, value: bytes | None, timestamp: int, headers: list) -> None:
        if topic in self._global_store_of:  # the global thread's part: straight into the store
            if key is not None:
                self._global_store_of[topic].restore(key, value, timestamp)
            return
        task = self._task_of.get(topic)
        if task is None:
            return
        offset = self._offsets[topic]
        self._offsets[topic] += 1
        task.process(ConsumerRecord(topic, 0, offset, timestamp, 0, key, value, list(headers)))

    def read_output(self, topic: str, key_serde: Serde | None = None,
                    value_serde: Serde | None = None) -> list[TestRecord]:
        """Everything written to `topic` so far (and not read before), deserialized."""
        records, self.written[topic] = self.written[topic], []
        keys, values = key_serde or self.config.key_serde, value_serde or self.config.value_serde
        return [TestRecord(keys.deserialize(key), values.deserialize(value), timestamp)
                for key, value, timestamp, _ in records]

    def get_key_value_store(self, name: str) -> Any:
        for task in self._tasks:
            if name in task.stores:
                return task.stores[name]
        raise KeyError(f"no store {name}")

    def close(self) -> None:
        for task in self._tasks:
            task.close()

    def __enter__(self) -> TopologyTestDriver:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
