"""SnapshotStore on real files: a leader's snapshot read in chunks and fetched into another folder as a `.part` file,
checked whole before it takes its final name; one that does not read is dropped; a missing snapshot is None."""

from __future__ import annotations

import os

from kfk.backends.embedded.raft.log import OffsetAndEpoch
from kfk.backends.embedded.snapshots import SnapshotId, SnapshotStore, image_records, snapshot_path, write_snapshot
from kfk.backends.embedded.snapshots.snapshot_file import delete_partial_snapshots
from kfk.metadata.image import MetadataImage
from tests.backends.test_snapshots import CLUSTER_ID, every_kind_of_state

SNAPSHOT = SnapshotId(120, 3)


def leader_store(tmp_path) -> tuple[SnapshotStore, MetadataImage]:
    directory = tmp_path / "leader"
    directory.mkdir()
    image = every_kind_of_state()
    write_snapshot(str(directory), SNAPSHOT, image_records(image), last_contained_log_timestamp=7, now_ms=8)
    store = SnapshotStore(str(directory))
    store.added(SNAPSHOT)
    return store, image


def fetch_all(leader: SnapshotStore, follower: SnapshotStore, chunk_bytes: int) -> int:
    """Copy the leader's snapshot chunk by chunk, as FetchSnapshot does; the number of chunks."""
    snapshot_id = leader.latest_snapshot_id
    follower.begin_fetch(snapshot_id)
    chunks = 0
    while True:
        chunk, size = leader.read_chunk(snapshot_id, follower.fetched_size, chunk_bytes)
        follower.append_fetched(chunk)
        chunks += 1
        if follower.fetched_size == size:
            return chunks


def test_a_snapshot_fetched_in_chunks_is_checked_renamed_and_handed_over(tmp_path) -> None:
    leader, image = leader_store(tmp_path)
    directory = tmp_path / "follower"
    directory.mkdir()
    older = SnapshotId(40, 2)
    write_snapshot(str(directory), older, [], last_contained_log_timestamp=1, now_ms=1)
    follower = SnapshotStore(str(directory))
    size = os.path.getsize(snapshot_path(leader.directory, SNAPSHOT))
    assert fetch_all(leader, follower, chunk_bytes=100) == -(-size // 100) > 3
    name = os.path.basename(snapshot_path(str(directory), SNAPSHOT))
    assert sorted(os.listdir(directory)) == sorted([os.path.basename(snapshot_path(str(directory), older)),
                                                    name + ".part"])
    assert follower.complete_fetch()
    assert os.listdir(directory) == [name]  # the older snapshot went too
    assert follower.latest_snapshot_id == OffsetAndEpoch(120, 3) and follower.latest == SNAPSHOT
    installed = follower.take_installed()
    assert installed.snapshot_id == SNAPSHOT and installed.last_contained_log_timestamp == 7
    assert MetadataImage(cluster_id=CLUSTER_ID).apply(installed.records, SNAPSHOT.end_offset - 1) == \
        image.apply([], SNAPSHOT.end_offset - 1)
    assert follower.take_installed() is None


def test_a_fetched_snapshot_that_does_not_read_is_dropped(tmp_path) -> None:
    leader, _ = leader_store(tmp_path)
    directory = tmp_path / "follower"
    directory.mkdir()
    follower = SnapshotStore(str(directory))
    follower.begin_fetch(leader.latest_snapshot_id)
    chunk, size = leader.read_chunk(leader.latest_snapshot_id, 0, 1 << 20)
    follower.append_fetched(chunk[:-1] + bytes([chunk[-1] ^ 0xFF]))  # the footer's batch fails its CRC
    assert follower.fetched_size == size
    assert not follower.complete_fetch()
    assert os.listdir(directory) == [] and follower.latest is None and follower.take_installed() is None


def test_a_missing_snapshot_is_none_and_an_aborted_or_crashed_fetch_leaves_nothing(tmp_path) -> None:
    leader, _ = leader_store(tmp_path)
    assert leader.read_chunk(OffsetAndEpoch(119, 3), 0, 100) is None
    follower = SnapshotStore(str(tmp_path))
    follower.begin_fetch(OffsetAndEpoch(*SNAPSHOT))
    follower.append_fetched(b"partial")
    follower.abort_fetch()
    assert not [name for name in os.listdir(tmp_path) if name.endswith(".part")]
    follower.begin_fetch(OffsetAndEpoch(*SNAPSHOT))
    follower.append_fetched(b"partial")
    delete_partial_snapshots(str(tmp_path))  # what the next start does after a crash mid-fetch
    assert not [name for name in os.listdir(tmp_path) if name.endswith(".part")]
