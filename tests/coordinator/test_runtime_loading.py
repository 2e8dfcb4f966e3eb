"""A coordinator partition's load waits for its log however long the replica manager takes to open it (a bulk
topic creation queues thousands of logs ahead of __consumer_offsets), and a cancelled load stops waiting."""

from __future__ import annotations

import asyncio

import pytest

from kfk.coordinator.runtime import LoadedRecord, load_partition
from kfk.storage.log import Log
from tests.storage.conftest import make_batch, small_config


def test_a_load_waits_for_a_log_that_opens_late(tmp_path) -> None:
    log = Log.open(str(tmp_path / "__consumer_offsets-0"), small_config(), now_ms=0)
    log.append_as_leader(make_batch(0, [b"a", b"b", b"c"], keys=[b"1", b"2", b"3"]), 0, 1_000)
    polls = []

    def log_of(partition: int):
        polls.append(partition)
        return log if len(polls) > 5_000 else None  # the old load gave up after 3,000 polls (30 s)

    replayed: list = []
    count = asyncio.run(load_partition("__consumer_offsets", 0, log_of, replayed.append, poll_interval_s=0))
    assert count == 3 and len(polls) == 5_001
    assert replayed == [LoadedRecord(b"1", b"a", offset=0), LoadedRecord(b"2", b"b", offset=1),
                        LoadedRecord(b"3", b"c", offset=2)]
    log.close()


def test_a_cancelled_load_stops_waiting() -> None:
    async def scenario() -> None:
        task = asyncio.get_running_loop().create_task(
            load_partition("__consumer_offsets", 0, lambda partition: None, lambda entry: None, poll_interval_s=0))
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(scenario())
