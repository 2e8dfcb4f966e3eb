"""Helpers for the storage tests: batches built with kfk.records, and reading a whole log back."""

from __future__ import annotations

import os
from collections.abc import Sequence

import pytest

from kfk.config import LogConfig
from kfk.records import MemoryRecordsBuilder, Record, iter_batches
from kfk.storage.fetch_data_info import FetchIsolation
from kfk.storage.log import Log


def make_batch(base_offset: int, values: Sequence[bytes | None], *, keys: Sequence[bytes | None] | None = None,
               timestamp: int = 1_000, leader_epoch: int = 0, producer_id: int = -1, producer_epoch: int = -1,
               base_sequence: int = -1, transactional: bool = False) -> bytes:
    builder = MemoryRecordsBuilder(base_offset=base_offset, partition_leader_epoch=leader_epoch,
                                   producer_id=producer_id, producer_epoch=producer_epoch,
                                   base_sequence=base_sequence, is_transactional=transactional)
    for index, value in enumerate(values):
        key = keys[index] if keys is not None else None
        builder.append(timestamp + index, key, value)
    return builder.close()


def make_marker(base_offset: int, producer_id: int, producer_epoch: int, commit: bool, *,
                coordinator_epoch: int = 0, timestamp: int = 1_000, leader_epoch: int = 0) -> bytes:
    """A COMMIT/ABORT control batch (key: version 0 + type; value: version 0 + coordinator epoch)."""
    builder = MemoryRecordsBuilder(base_offset=base_offset, partition_leader_epoch=leader_epoch,
                                   producer_id=producer_id, producer_epoch=producer_epoch, is_transactional=True,
                                   is_control_batch=True)
    key = (0).to_bytes(2, "big") + (1 if commit else 0).to_bytes(2, "big")
    value = (0).to_bytes(2, "big") + coordinator_epoch.to_bytes(4, "big")
    builder.append(timestamp, key, value)
    return builder.close()


def read_all(log: Log, isolation: FetchIsolation = FetchIsolation.LOG_END, start: int | None = None,
             include_control: bool = False) -> list[Record]:
    """Every record from `start` (default: the log start) to the isolation bound, reading segment by segment."""
    records: list[Record] = []
    offset = log.log_start_offset if start is None else start
    while True:
        info = log.read(offset, 1 << 30, isolation)
        data = info.records.read_bytes()
        if not data:
            return records
        last = offset - 1
        for batch in iter_batches(data):
            if include_control or not batch.is_control:
                records.extend(record for record in batch.records() if record.offset >= offset)
            last = batch.last_offset
        offset = last + 1


def small_config(overrides: dict[str, object] | None = None) -> LogConfig:
    """Small segments (4 KiB) and dense indexes so that tests roll and index often. No bound on future timestamps:
    the tests append records of fixed timestamps with a clock that starts at 0."""
    properties: dict[str, object] = {"internal.segment.bytes": 4096, "index.interval.bytes": 256,
                                     "file.delete.delay.ms": 0, "message.timestamp.after.max.ms": 2**63 - 1}
    properties.update(overrides or {})
    return LogConfig.from_properties(properties)


@pytest.fixture
def log_dir(tmp_path) -> str:
    return os.path.join(str(tmp_path), "topic-0")
