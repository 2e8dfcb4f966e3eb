"""Several registry instances on one cluster: one primary writes, the others forward writes to it (reads are
answered by every instance from its own copy of _schemas). The primary is elected through the group coordinator:
every instance joins the consumer group ``schema-registry`` subscribed to the one-partition _schemas topic, and the
member the group assigns that partition to is the primary. The group's member descriptions (DescribeGroups) carry
each member's client.id, which is its advertised URL, so a secondary finds where to forward. A primary that dies
leaves the group when its session times out, and the group's next assignment makes another instance primary.

(Confluent's registry uses its own group protocol type, ``sr``, for the same election; kfk uses the consumer
protocol so that any Kafka client library's group support is enough.)
"""

from __future__ import annotations

import logging
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from typing import Any

from kfk.client import Admin, Consumer, TopicPartition
from kfk.errors import KafkaError
from kfk.registry.errors import FORWARDING_ERROR, RegistryError
from kfk.registry.kafka_store import KafkaStore

__all__ = ["PrimaryElection"]

log = logging.getLogger("kfk.registry.election")

SESSION_TIMEOUT_MS = 10_000  # how long a dead primary keeps its role before the group moves it
# how long a secondary keeps trying to reach a primary: past a dead primary's session, and a rebalance after it
FORWARD_TIMEOUT_S = 3 * SESSION_TIMEOUT_MS / 1000


class PrimaryElection:
    def __init__(self, client_config: Mapping[str, Any], group_id: str, advertised_url: str,
                 store: KafkaStore) -> None:
        self._config = dict(client_config)
        self.group_id = group_id
        self.advertised_url = advertised_url
        self.store = store
        self.is_primary = False
        self._primary_url: str | None = None
        self._stopping = threading.Event()
        self._elected = threading.Event()  # set once this instance knows a primary exists (itself or another)
        self._consumer = Consumer({**self._config, "group.id": group_id, "client.id": advertised_url,
                                   "enable.auto.commit": False, "session.timeout.ms": SESSION_TIMEOUT_MS,
                                   "heartbeat.interval.ms": SESSION_TIMEOUT_MS // 4})
        self._admin = Admin(self._config)
        self._thread = threading.Thread(target=self._run, name="kfk-registry-election", daemon=True)

    def start(self) -> None:
        self._consumer.subscribe([self.store.topic], listener=self)
        self._thread.start()

    # ConsumerRebalanceListener, called from poll() on the election thread
    def on_partitions_assigned(self, assigned: list[TopicPartition]) -> None:
        if assigned:
            self._consumer.pause(*assigned)  # the store's own reader follows the topic; this member only holds it
            self.store.sync()  # every record of the previous primary is applied before this one allocates ids
            self.is_primary = True
            log.info("this instance (%s) is the primary", self.advertised_url)
        self._primary_url = None
        self._elected.set()

    def on_partitions_revoked(self, revoked: list[TopicPartition]) -> None:
        if revoked:
            self.is_primary = False
        self._primary_url = None

    def on_partitions_lost(self, lost: list[TopicPartition]) -> None:
        self.on_partitions_revoked(lost)

    def _run(self) -> None:
        while not self._stopping.is_set():
            try:
                self._consumer.poll(0.5)
            except KafkaError as error:
                if not self._stopping.is_set():
                    log.warning("the registry's election: %s", error)

    def primary_url(self) -> str | None:
        """The primary's URL, as the group's assignment says (None while the group has none)."""
        if self.is_primary:
            return self.advertised_url
        if self._primary_url is None:
            try:
                description = self._admin.describe_consumer_groups([self.group_id])[self.group_id]
            except (KafkaError, KeyError) as error:
                log.warning("cannot describe the registry's group %s: %s", self.group_id, error)
                return None
            partition = TopicPartition(self.store.topic, 0)
            self._primary_url = next((member.client_id for member in description.members
                                      if partition in member.assignment), None)
        return self._primary_url

    def forward(self, method: str, path: str, body: bytes, headers: dict[str, str]) -> tuple[int, bytes] | None:
        """Send a write to the primary; None when this instance is the primary (it answers itself). While the
        group has no live primary (a dead one keeps its role until its session times out), keep asking."""
        deadline = time.monotonic() + FORWARD_TIMEOUT_S
        self._elected.wait(FORWARD_TIMEOUT_S)
        while True:
            if self.is_primary:
                return None
            url = self.primary_url()
            if url is not None and url != self.advertised_url:
                request = urllib.request.Request(url + path, data=body or None, method=method, headers=headers)
                try:
                    with urllib.request.urlopen(request, timeout=FORWARD_TIMEOUT_S) as response:
                        return response.status, response.read()
                except urllib.error.HTTPError as error:
                    return error.code, error.read()
                except OSError as error:
                    log.info("the primary %s does not answer (%s); asking the group again", url, error)
            self._primary_url = None
            if time.monotonic() >= deadline:
                raise RegistryError(500, FORWARDING_ERROR,
                                    "Error while forwarding the request to the primary: no primary answers")
            time.sleep(0.5)

    def close(self) -> None:
        self._stopping.set()
        self._thread.join(5)
        self._consumer.close()
        self._admin.close()
