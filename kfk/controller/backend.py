"""MetadataBackend: what a metadata store must do for kfk's controller and brokers.

The controller logic (kfk/controller/) decides *what* changes: it turns admin requests into Kafka's metadata records
(TopicRecord, PartitionRecord, ConfigRecord...). A backend decides *where* they live and *who* may write them:
- the embedded backend (backends/embedded/) keeps them in a local __cluster_metadata log, KRaft-style;
- the ZooKeeper backend (backends/zookeeper/) maps them onto Kafka's znodes.
Both implement this protocol, and one contract test suite runs against each.

Epochs fence the stale: `append` takes the controller epoch the caller won; a backend rejects an append from an
epoch that is no longer current with NotControllerError, so a deposed controller can never overwrite its successor.
"""

from __future__ import annotations

from typing import Protocol, Sequence

from kfk.metadata.image import MetadataImage
from kfk.protocol.message import Message


class MetadataListener(Protocol):
    def handle_commit(self, records: Sequence[Message], last_offset: int) -> None:
        """Committed records, in log order; `last_offset` is the metadata offset of the last one."""

    def handle_snapshot(self, image: MetadataImage) -> None:
        """The whole image, replacing the listener's: KRaft loaded a snapshot fetched from the quorum's leader
        because the records between the listener's image and it are no longer in the leader's log."""


class MetadataBackend(Protocol):
    @property
    def cluster_id(self) -> str: ...

    async def start(self) -> None:
        """Open the store and replay everything committed so far to the registered listeners."""

    async def stop(self) -> None: ...

    def add_listener(self, listener: MetadataListener) -> None:
        """Receive every committed batch of records, from the start of the log, in order."""

    async def elect_controller(self, node_id: int) -> int | None:
        """Try to become the active controller; the new controller epoch if this node won, else None."""

    def active_controller(self) -> tuple[int, int] | None:
        """(controller id, controller epoch) of the active controller, if one is known."""

    async def append(self, records: Sequence[Message], controller_epoch: int) -> int:
        """Durably commit records written by the controller of `controller_epoch`; returns the last offset.
        Listeners have seen the records when this returns. Raises NotControllerError for a stale epoch.

        The records of one call are atomic: committed and delivered to listeners together, or not at all (the
        embedded backend writes them as one batch; a ZooKeeper backend needs one multi-op). Offsets only grow:
        the offsets a backend reports are its own (log offsets, ZooKeeper zxids), but they order all commits."""
