"""Wire sentinels and integer limits: the magic numbers requests, responses and files carry, named once.

Kafka spreads these over ListOffsetsRequest, RecordBatch, Node and friends; here they are one module because the
client, the broker and storage all read and write the same values.
"""

from __future__ import annotations

INT32_MIN = -(2**31)
INT32_MAX = 2**31 - 1
INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1

# ListOffsets target timestamps (Kafka's ListOffsetsRequest constants).
LATEST_TIMESTAMP = -1
"""The log end offset (the high watermark, or the last stable offset under read_committed)."""
EARLIEST_TIMESTAMP = -2
"""The log start offset."""
MAX_TIMESTAMP = -3
"""The offset of the record with the largest timestamp (KIP-734, ListOffsets v7+)."""
EARLIEST_LOCAL_TIMESTAMP = -4
"""The first offset still on local disk (KIP-1005; the same as EARLIEST_TIMESTAMP without tiered storage)."""
LATEST_TIERED_TIMESTAMP = -5
"""The last offset in tiered storage (KIP-1005; none without tiered storage)."""
EARLIEST_PENDING_UPLOAD_TIMESTAMP = -6
"""The first offset not yet copied to tiered storage (KIP-1023, ListOffsets v11+; none without tiered storage)."""

UNKNOWN_OFFSET = -1
"""An offset nobody knows: no committed position, no answer for a partition."""
UNKNOWN_LEADER_EPOCH = -1
"""A leader epoch that is not known (KIP-320): the receiver skips its epoch checks."""
NO_NODE = -1
"""A leader id, coordinator id or voter id that names no broker (no leader elected, or none known)."""
