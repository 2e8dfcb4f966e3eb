"""MetadataCache: a broker's current view of the cluster, fed by the metadata backend.

It is the backend's listener: every committed batch of metadata records becomes a new immutable MetadataImage,
and the components that act on metadata (the replica manager creating and deleting partition logs, the group
coordinator loading __consumer_offsets partitions) are called with the new image in registration order.
"""

from __future__ import annotations

from typing import Callable, Sequence

from kfk.metadata.image import MetadataImage
from kfk.protocol.message import Message

ImageListener = Callable[[MetadataImage, MetadataImage], None]


class MetadataCache:
    def __init__(self, image: MetadataImage | None = None) -> None:
        self.image = image or MetadataImage()
        self._listeners: list[ImageListener] = []

    def subscribe(self, listener: ImageListener) -> None:
        """Call `listener(previous, current)` after every change, and once now with the current image."""
        self._listeners.append(listener)
        listener(MetadataImage(), self.image)

    def handle_commit(self, records: Sequence[Message], last_offset: int) -> None:
        self.handle_snapshot(self.image.apply(records, last_offset))

    def handle_snapshot(self, image: MetadataImage) -> None:
        """A whole new image (a snapshot fetched from the KRaft leader): the listeners see the change as any."""
        previous = self.image
        self.image = image
        for listener in self._listeners:
            listener(previous, self.image)
