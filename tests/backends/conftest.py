"""Helpers for the backend tests: a manual clock, a recording listener, and asyncio without a plugin."""

from __future__ import annotations

import asyncio
from typing import Awaitable, Sequence, TypeVar

import pytest

from kfk.common.clock import ManualClock
from kfk.metadata.image import MetadataImage
from kfk.protocol.message import Message

T = TypeVar("T")


class RecordingListener:
    def __init__(self) -> None:
        self.batches: list[tuple[list[Message], int]] = []
        #: The images handed whole (a snapshot fetched from the leader).
        self.snapshots: list[MetadataImage] = []

    def handle_commit(self, records: Sequence[Message], last_offset: int) -> None:
        self.batches.append((list(records), last_offset))

    def handle_snapshot(self, image: MetadataImage) -> None:
        self.snapshots.append(image)

    @property
    def records(self) -> list[Message]:
        return [record for records, _ in self.batches for record in records]


def run(awaitable: Awaitable[T]) -> T:
    return asyncio.run(awaitable)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()
