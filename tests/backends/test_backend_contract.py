"""The MetadataBackend contract (kfk/controller/backend.py), written once for every backend (DESIGN.md decision 10).

Each test opens backends through `open_backend`, which reopens the same store on every call: a second call is the
same node after a restart (for ZooKeeper: the same chroot of a real ZooKeeper server, from a new session; for the
embedded backend in a quorum of three voters: node 1, with the whole quorum restarted).

What a restart replays is the committed state, not necessarily the same batches: the embedded log replays its
batches, ZooKeeper holds the state itself and replays it as one batch. Either way the listeners end with the same
image, at an offset no lower than the last one appended.
"""

from __future__ import annotations

import uuid
from typing import Callable

import pytest

from kfk.backends.embedded import EmbeddedMetadataBackend
from kfk.controller.backend import MetadataBackend
from kfk.errors import NotControllerError
from kfk.metadata.cache import MetadataCache
from kfk.metadata.image import MetadataImage
from kfk.protocol.metadata_records import schema_class
from tests.backends.conftest import RecordingListener, run
from tests.backends.in_process_quorum import ThreeVoterQuorum

TopicRecord = schema_class("TopicRecord")
PartitionRecord = schema_class("PartitionRecord")
CLUSTER_ID = "MkU3OEVBNTcwNTJENDM2Qg"

OpenBackend = Callable[[], MetadataBackend]


@pytest.fixture(params=["embedded", "embedded-3-voters", pytest.param("zookeeper", marks=pytest.mark.zookeeper)])
def open_backend(request, tmp_path, clock) -> OpenBackend:
    if request.param == "embedded":
        return lambda: EmbeddedMetadataBackend(str(tmp_path), 1, CLUSTER_ID, time_ms=clock)
    if request.param == "embedded-3-voters":  # node 1 of a quorum of three (tests/backends/in_process_quorum.py)
        return lambda: ThreeVoterQuorum(tmp_path, CLUSTER_ID)
    if request.param == "zookeeper":
        from kfk.backends.zookeeper import ZooKeeperMetadataBackend

        connect = request.getfixturevalue("zookeeper_connect")
        return lambda: ZooKeeperMetadataBackend(connect, 1, CLUSTER_ID, session_timeout_ms=4000, time_ms=clock)
    raise AssertionError(request.param)


def topic(name: str) -> list:
    topic_id = uuid.uuid4()
    return [TopicRecord(name=name, topic_id=topic_id),
            PartitionRecord(partition_id=0, topic_id=topic_id, replicas=[1], isr=[1], leader=1, leader_epoch=0,
                            partition_epoch=0)]


def test_appends_reach_listeners_in_order_and_are_replayed_after_a_restart(open_backend: OpenBackend) -> None:
    async def first_run() -> list[int]:
        backend = open_backend()
        assert backend.cluster_id == CLUSTER_ID
        listener = RecordingListener()
        backend.add_listener(listener)
        await backend.start()
        epoch = await backend.elect_controller(1)
        offsets = [await backend.append(topic(name), epoch) for name in ("a", "b", "c")]
        assert [offset for _, offset in listener.batches] == offsets == sorted(set(offsets))
        assert [r.name for r in listener.records if r.NAME == "TopicRecord"] == ["a", "b", "c"]
        await backend.stop()
        return offsets

    offsets = run(first_run())

    async def second_run() -> MetadataImage:
        backend = open_backend()
        cache = MetadataCache(MetadataImage(cluster_id=CLUSTER_ID))
        listener = RecordingListener()
        backend.add_listener(cache)
        backend.add_listener(listener)
        await backend.start()
        replayed = [offset for _, offset in listener.batches]
        assert replayed == sorted(set(replayed)) and replayed[-1] >= offsets[-1]
        await backend.stop()
        return cache.image

    image = run(second_run())
    assert sorted(image.topics_by_name) == ["a", "b", "c"] and image.offset >= offsets[-1]
    assert all(topic.partitions[0].replicas == (1,) for topic in image.topics_by_name.values())


def test_only_the_current_epochs_controller_may_append(open_backend: OpenBackend) -> None:
    async def scenario() -> None:
        backend = open_backend()
        await backend.start()
        assert backend.active_controller() is None
        with pytest.raises(NotControllerError):
            await backend.append(topic("before-election"), 0)
        epoch = await backend.elect_controller(1)
        assert backend.active_controller() == (1, epoch)
        newer = await backend.elect_controller(1)
        assert newer > epoch
        with pytest.raises(NotControllerError):
            await backend.append(topic("stale"), epoch)
        await backend.append(topic("current"), newer)
        await backend.stop()

        backend = open_backend()
        listener = RecordingListener()
        backend.add_listener(listener)
        await backend.start()
        assert [r.name for r in listener.records if r.NAME == "TopicRecord"] == ["current"]
        restarted = await backend.elect_controller(1)
        assert restarted > newer
        with pytest.raises(NotControllerError):
            await backend.append(topic("stale after restart"), newer)
        await backend.stop()

    run(scenario())


def test_a_node_that_is_not_a_voter_does_not_win(open_backend: OpenBackend) -> None:
    async def scenario() -> None:
        backend = open_backend()
        await backend.start()
        assert await backend.elect_controller(2) is None
        assert backend.active_controller() is None
        await backend.stop()

    run(scenario())


def test_scram_credentials_are_stored_and_replayed(open_backend: OpenBackend) -> None:
    """UserScramCredentialRecord / RemoveUserScramCredentialRecord survive a restart in every backend (ZooKeeper
    keeps them in /config/users/<user>, Kafka's format)."""
    UserScramCredentialRecord = schema_class("UserScramCredentialRecord")
    RemoveUserScramCredentialRecord = schema_class("RemoveUserScramCredentialRecord")

    def credential(name: str, mechanism: int, iterations: int):
        return UserScramCredentialRecord(name=name, mechanism=mechanism, salt=b"salt-" + name.encode(),
                                         stored_key=b"s" * 32, server_key=b"k" * 32, iterations=iterations)

    async def write() -> None:
        backend = open_backend()
        cache = MetadataCache(MetadataImage(cluster_id=CLUSTER_ID))
        backend.add_listener(cache)
        await backend.start()
        epoch = await backend.elect_controller(1)
        await backend.append([credential("alice", 1, 4096), credential("alice", 2, 8192),
                              credential("CN=bob,O=x y", 1, 4096)], epoch)
        await backend.append([RemoveUserScramCredentialRecord(name="alice", mechanism=1)], epoch)
        assert sorted(cache.image.scram_credentials) == [("CN=bob,O=x y", 1), ("alice", 2)]
        await backend.stop()

    async def reopen() -> MetadataImage:
        backend = open_backend()
        cache = MetadataCache(MetadataImage(cluster_id=CLUSTER_ID))
        backend.add_listener(cache)
        await backend.start()
        await backend.stop()
        return cache.image

    run(write())
    image = run(reopen())
    assert sorted(image.scram_credentials) == [("CN=bob,O=x y", 1), ("alice", 2)]
    alice = image.scram_credentials[("alice", 2)]
    assert (alice.salt, alice.stored_key, alice.server_key, alice.iterations) == (b"salt-alice", b"s" * 32,
                                                                                  b"k" * 32, 8192)
