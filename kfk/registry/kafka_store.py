"""The registry's database: the compacted, single-partition ``_schemas`` topic, read by a thread from the beginning
and written through (as Confluent's KafkaStore does). A write is produced and then waited for until this instance's
reader has applied it, so that a request's answer reflects the state every other instance will reach, and a
restarted instance rebuilds exactly that state by reading the topic to its end before it serves.

Talks to the cluster only through kfk's client library (Admin, Producer, Consumer), so it runs on any Kafka.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from kfk.client import Admin, Consumer, NewTopic, Producer, TopicPartition
from kfk.errors import KafkaError, TopicExistsError
from kfk.registry.errors import OPERATION_TIMEOUT, STORE_ERROR, RegistryError
from kfk.registry.state import NOOP_KEY, RegistryState, encode

__all__ = ["KafkaStore", "SCHEMAS_TOPIC"]

log = logging.getLogger("kfk.registry.store")

SCHEMAS_TOPIC = "_schemas"  # Confluent's kafkastore.topic default
# Confluent's kafkastore.topic.replication.factor default; fewer when the cluster has fewer brokers.
DEFAULT_REPLICATION_FACTOR = 3


class KafkaStore:
    def __init__(self, client_config: Mapping[str, Any], topic: str = SCHEMAS_TOPIC, timeout_ms: int = 60_000) -> None:
        self.topic = topic
        self.state = RegistryState()
        self.timeout_ms = timeout_ms
        self._config = dict(client_config)
        self._partition = TopicPartition(topic, 0)
        self._applied = threading.Condition()
        self._next_offset = 0  # the offset after the last record applied
        self._reader_error: BaseException | None = None
        self._stopping = threading.Event()
        self.listeners: list[Callable[[dict, dict | None], None]] = []
        self._producer: Producer | None = None
        self._consumer: Consumer | None = None
        self._thread: threading.Thread | None = None
        self._admin: Admin | None = None

    def start(self) -> None:
        """Create the topic if it is missing, then read it to its end."""
        self._admin = Admin(self._config)
        self._create_topic(self._admin)
        self._producer = Producer({**self._config, "acks": "all", "linger.ms": 0})
        self._consumer = Consumer({**self._config, "enable.auto.commit": False, "auto.offset.reset": "earliest"})
        self._consumer.assign([self._partition])
        self._consumer.seek_to_beginning(self._partition)
        end = self._consumer.end_offsets([self._partition])[self._partition]
        self._thread = threading.Thread(target=self._read, name="kfk-registry-store-reader", daemon=True)
        self._thread.start()
        self._wait_for(end)

    def _create_topic(self, admin: Admin) -> None:
        brokers = len(admin.describe_cluster().brokers)
        topic = NewTopic(self.topic, 1, min(DEFAULT_REPLICATION_FACTOR, max(brokers, 1)),
                         {"cleanup.policy": "compact"})
        error = admin.create_topics([topic]).get(self.topic)
        if error is not None and not isinstance(error, TopicExistsError):
            raise error
        description = admin.describe_topics([self.topic])[self.topic]
        if len(description.partitions) != 1:
            raise KafkaError(f"the registry's topic {self.topic} has {len(description.partitions)} partitions; it "
                             "must have exactly one (the order of its records is the order of the registry's writes)")

    def _read(self) -> None:
        assert self._consumer is not None
        try:
            while not self._stopping.is_set():
                records = self._consumer.poll(0.5)
                if not records:
                    position = self._consumer.position(self._partition)
                    self._advance(position)
                    continue
                for record in records.as_list():
                    try:
                        key = json.loads(record.key) if record.key else None
                        value = json.loads(record.value) if record.value is not None else None
                    except ValueError:
                        log.warning("skipping a record of %s at offset %d that is not JSON", self.topic, record.offset)
                        key = None
                    if isinstance(key, dict):
                        with self._applied:
                            self.state.apply(key, value)
                        for listener in self.listeners:
                            listener(key, value)
                    self._advance(record.offset + 1)
        except BaseException as error:  # the registry cannot serve a state it no longer follows
            if not self._stopping.is_set():
                log.error("the registry stopped reading %s: %s", self.topic, error)
                with self._applied:
                    self._reader_error = error
                    self._applied.notify_all()

    def _advance(self, offset: int) -> None:
        with self._applied:
            if offset > self._next_offset:
                self._next_offset = offset
                self._applied.notify_all()

    def _wait_for(self, offset: int) -> None:
        """Until every record before ``offset`` is applied."""
        deadline = time.monotonic() + self.timeout_ms / 1000
        with self._applied:
            while self._next_offset < offset:
                if self._reader_error is not None:
                    raise RegistryError(500, STORE_ERROR, f"Error while reading the {self.topic} topic: "
                                        f"{self._reader_error}")
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise RegistryError(500, OPERATION_TIMEOUT, f"Timed out reading the {self.topic} topic to "
                                        f"offset {offset}")
                self._applied.wait(remaining)

    def lock(self) -> threading.Condition:
        """Held while reading the state, so that a reader never sees a record half applied."""
        return self._applied

    def write(self, key: dict, value: dict | None) -> None:
        """Produce one record and wait until it is applied here."""
        self.write_all([(key, value)])

    def write_all(self, records: list[tuple[dict, dict | None]]) -> None:
        assert self._producer is not None
        try:
            futures = [self._producer.send(self.topic, encode(value), encode(key), partition=0)
                       for key, value in records]
            last = max(future.result(self.timeout_ms / 1000).offset for future in futures)
        except KafkaError as error:
            raise RegistryError(500, STORE_ERROR, f"Error while writing to the {self.topic} topic: {error}") from None
        self._wait_for(last + 1)

    def catch_up(self) -> None:
        """Apply every record the topic holds now (a secondary, after forwarding a write, so that its next answer
        to the same client includes that write)."""
        assert self._admin is not None
        try:
            end = self._admin.end_offsets([self._partition])[self._partition]
        except KafkaError as error:
            raise RegistryError(500, STORE_ERROR, f"Error while reading the {self.topic} topic: {error}") from None
        self._wait_for(end)

    def sync(self) -> None:
        """Catch up with every record written to the topic so far (by any instance): a NOOP record's offset is a
        point after all of them."""
        self.write(NOOP_KEY, None)

    def close(self) -> None:
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(5)
        for client in (self._producer, self._consumer, self._admin):
            if client is not None:
                client.close()
