"""A share partition's durable state (Kafka's ShareGroupOffset and PersisterStateBatch): the share-partition start
offset and the state batches past it, and how a write's batches combine with what is stored.

A state batch is a run of offsets with one delivery state (0 available, 2 acknowledged, 4 archived; never acquired:
a lock does not survive its leader) and one delivery count. A write carries only the batches that changed: they
replace what the stored batches said of their offsets, the rest stays, and nothing below the start offset is kept.
"""

from __future__ import annotations

import dataclasses
from typing import Iterable, NamedTuple

#: Kafka's PartitionFactory.UNINITIALIZED_START_OFFSET and DEFAULT_STATE_EPOCH: a share partition with no stored
#: state (its leader starts it at share.auto.offset.reset).
UNINITIALIZED_START_OFFSET = -1
DEFAULT_STATE_EPOCH = 0


class StateBatch(NamedTuple):
    first_offset: int
    last_offset: int
    delivery_state: int
    delivery_count: int


@dataclasses.dataclass(slots=True)
class ShareGroupOffset:
    """The stored state of one share partition (group, topic id, partition)."""

    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    state_batches: list[StateBatch]
    create_timestamp: int = 0
    write_timestamp: int = 0
    delivery_complete_count: int = -1


def combine(current: Iterable[StateBatch], updates: Iterable[StateBatch], start_offset: int) -> list[StateBatch]:
    """`current` overlaid with `updates` (which win where they overlap), cut below `start_offset`, in offset order,
    adjacent batches of the same state and count merged."""
    pieces: list[StateBatch] = []
    updates = sorted(updates)
    for batch in current:
        remaining = [batch]
        for update in updates:
            split: list[StateBatch] = []
            for piece in remaining:
                if update.last_offset < piece.first_offset or update.first_offset > piece.last_offset:
                    split.append(piece)
                    continue
                if piece.first_offset < update.first_offset:
                    split.append(piece._replace(last_offset=update.first_offset - 1))
                if piece.last_offset > update.last_offset:
                    split.append(piece._replace(first_offset=update.last_offset + 1))
            remaining = split
        pieces.extend(remaining)
    pieces.extend(updates)
    combined: list[StateBatch] = []
    for batch in sorted(pieces):
        if batch.last_offset < start_offset:
            continue
        if batch.first_offset < start_offset:
            batch = batch._replace(first_offset=start_offset)
        previous = combined[-1] if combined else None
        if previous is not None and previous.last_offset + 1 == batch.first_offset \
                and previous[2:] == batch[2:]:
            combined[-1] = previous._replace(last_offset=batch.last_offset)
        else:
            combined.append(batch)
    return combined
