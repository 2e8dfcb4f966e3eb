"""AIOAdmin: the Admin for asyncio code. Every Admin call, awaited (``await admin.create_topics([...])``).

It is the Admin itself with its requests run on the caller's event loop: each call's coroutine (with the Admin's
retries until the deadline) is returned to be awaited instead of being run to completion on a network thread.
find_hanging_transactions, which chains several calls with work between them, stays the sync Admin's.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, TypeVar

from kfk.client.admin import Admin
from kfk.client.config import ADMIN_CONFIG_DEF, ClientConfig
from kfk.client.network_client import NetworkClient
from kfk.common.constants import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP
from kfk.common.structs import TopicPartition

__all__ = ["AIOAdmin"]

T = TypeVar("T")


class AIOAdmin(Admin):
    """An asyncio admin client: ``config`` takes Kafka's property names, keyword arguments the same in snake_case;
    every method of Admin returns an awaitable."""

    def __init__(self, config: Mapping[str, Any] | None = None, **overrides: Any) -> None:  # noqa: D107
        self.config = ClientConfig(ADMIN_CONFIG_DEF, "admin", config, **overrides)
        self._timeout_ms = self.config.default_api_timeout_ms
        self._network = NetworkClient(self.config)
        self._closed = False

    async def __aenter__(self) -> AIOAdmin:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def start(self) -> None:
        """Nothing to start (connections open on the first call); there for aiokafka's shape."""

    async def close(self) -> None:  # type: ignore[override]
        if not self._closed:
            self._closed = True
            await self._network.close()

    def _run(self, make: Callable[[float], Awaitable[T]],  # type: ignore[override]
             timeout_ms: float | None) -> Awaitable[T]:
        return self._retrying(make, self._timeout_ms if timeout_ms is None else timeout_ms)

    async def beginning_offsets(self, partitions: Iterable[TopicPartition],  # type: ignore[override]
                                timeout_ms: float | None = None) -> dict[TopicPartition, int]:
        found = await self.list_offsets(dict.fromkeys(partitions, EARLIEST_TIMESTAMP), timeout_ms=timeout_ms)
        return {tp: value.offset if value is not None else 0 for tp, value in found.items()}

    async def end_offsets(self, partitions: Iterable[TopicPartition],  # type: ignore[override]
                          timeout_ms: float | None = None) -> dict[TopicPartition, int]:
        found = await self.list_offsets(dict.fromkeys(partitions, LATEST_TIMESTAMP), timeout_ms=timeout_ms)
        return {tp: value.offset if value is not None else 0 for tp, value in found.items()}

    def find_hanging_transactions(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("find_hanging_transactions is the sync Admin's (kfk.client.Admin)")

    def __enter__(self) -> Any:
        raise TypeError("AIOAdmin is an async context manager: use `async with`")
