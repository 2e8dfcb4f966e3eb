"""AIOShareConsumer: a share group member (KIP-932) for asyncio code.

    async with AIOShareConsumer({"bootstrap.servers": "localhost:9092", "group.id": "workers"},
                                topics=["jobs"]) as consumer:
        while True:
            for record in await consumer.poll(1.0):
                await handle(record)        # implicit mode: accepted at the next poll, commit or close

It is kfk.client.ShareConsumer (its share sessions, acknowledgements and heartbeats) with its network side on the
caller's event loop (kfk.client.event_loop.CallerLoop) instead of a network thread: every call that waits is a
coroutine of that loop, and the heartbeats run as a task beside the caller's.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from typing import Any

from kfk.client.event_loop import CallerLoop
from kfk.client.share_consumer import (
    INITIAL_EPOCH,
    AcknowledgeType,
    AcknowledgementCommitCallback,
    Deserializer,
    ShareConsumer,
    ShareConsumerRecord,
)
from kfk.common.structs import TopicPartition
from kfk.errors import KafkaError

__all__ = ["AIOShareConsumer"]


class AIOShareConsumer:
    """An asyncio share consumer. ``config`` takes the ShareConsumer's properties; ``topics`` are subscribed to at
    start()."""

    def __init__(self, config: Mapping[str, Any], *, topics: Iterable[str] = (),
                 key_deserializer: Deserializer | None = None, value_deserializer: Deserializer | None = None) -> None:
        self._config = config
        self._deserializers = (key_deserializer, value_deserializer)
        self._topics = list(topics)
        self._consumer: ShareConsumer | None = None

    async def __aenter__(self) -> AIOShareConsumer:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def start(self) -> None:
        """Start the network side on the running loop (and subscribe to the ``topics`` given)."""
        if self._consumer is not None:
            return
        key_deserializer, value_deserializer = self._deserializers
        self._consumer = ShareConsumer(self._config, key_deserializer=key_deserializer,
                                       value_deserializer=value_deserializer,
                                       network_loop=CallerLoop(asyncio.get_running_loop()))
        if self._topics:
            await self.subscribe(self._topics)

    @property
    def _started(self) -> ShareConsumer:
        if self._consumer is None:
            raise RuntimeError("the share consumer is not started: await start() first")
        return self._consumer

    async def subscribe(self, topics: Iterable[str]) -> None:
        consumer = self._started
        consumer._subscription = sorted(set(topics))
        await consumer._subscribe()

    def subscription(self) -> set[str]:
        return self._started.subscription()

    def assignment(self) -> set[TopicPartition]:
        return self._started.assignment()

    def set_acknowledgement_commit_callback(self, callback: AcknowledgementCommitCallback | None) -> None:
        self._started.set_acknowledgement_commit_callback(callback)

    async def poll(self, timeout: float) -> list[ShareConsumerRecord]:
        """Records acquired for this member, waiting up to ``timeout`` seconds for some; the last poll's are
        acknowledged first (implicit mode: accepted)."""
        consumer = self._started
        consumer._settle_last_poll()
        consumer._invoke_acknowledgement_callback()
        records = await consumer._poll(timeout * 1000)
        consumer._invoke_acknowledgement_callback()
        return records

    def acknowledge(self, record: ShareConsumerRecord, type: AcknowledgeType = AcknowledgeType.ACCEPT) -> None:
        self._started.acknowledge(record, type)

    async def commit(self) -> dict[TopicPartition, KafkaError | None]:
        """Send the acknowledgements now and wait for the answers (ShareConsumer.commit_sync)."""
        consumer = self._started
        consumer._settle_last_poll(implicit_only=True)
        outcome = await consumer._acknowledge(INITIAL_EPOCH)
        consumer._invoke_acknowledgement_callback()
        return outcome

    async def close(self) -> None:
        """Acknowledge what is pending, close the share sessions and leave the group."""
        consumer = self._consumer
        if consumer is None or consumer._closed:
            return
        try:
            consumer._settle_last_poll(implicit_only=True)
            await consumer._close()
            consumer._invoke_acknowledgement_callback()
        finally:
            consumer._closed = True
