"""KRaft snapshots: the metadata image at one offset of `__cluster_metadata`, in Kafka's `.checkpoint` format.

A snapshot `__cluster_metadata-0/<end offset, 20 digits>-<epoch, 10 digits>.checkpoint` holds the records that
rebuild the image of every record below `end offset`; `epoch` is the Raft epoch of the last record it covers. It
lets a node start without replaying the whole log, lets the log be trimmed behind it, and is what a Raft leader
sends a follower whose fetch offset is below its log start (FetchSnapshot).

The API, for the backend and for Raft:
- `SnapshotId`, `snapshot_path`, `list_snapshots`, `delete_snapshots_before`: naming and housekeeping
  (snapshot_file.py);
- `write_snapshot(directory, snapshot_id, records, ...)`: writes one atomically (writer.py);
- `read_snapshot(path)` -> `Snapshot`, `latest_valid_snapshot(directory)`: reads and checks one; the newest that
  reads, corrupt ones skipped with a warning (reader.py);
- `read_snapshot_chunk(path, position, max_bytes)`: raw bytes of a snapshot file, what FetchSnapshot sends;
- `image_records(image)`: the records that rebuild a MetadataImage (image_records.py);
- `SnapshotStore(directory)`: the snapshots as the Raft replica serves and fetches them (store.py).
"""

from kfk.backends.embedded.snapshots.image_records import image_records
from kfk.backends.embedded.snapshots.reader import Snapshot, latest_valid_snapshot, read_snapshot, read_snapshot_chunk
from kfk.backends.embedded.snapshots.snapshot_file import (
    SnapshotId,
    delete_snapshots_before,
    list_snapshots,
    snapshot_path,
)
from kfk.backends.embedded.snapshots.store import SnapshotStore
from kfk.backends.embedded.snapshots.writer import write_snapshot

__all__ = ["Snapshot", "SnapshotId", "SnapshotStore", "delete_snapshots_before", "image_records",
           "latest_valid_snapshot", "list_snapshots", "read_snapshot", "read_snapshot_chunk", "snapshot_path",
           "write_snapshot"]
