"""The quorum-state file: Kafka's QuorumStateData JSON, written atomically, read back in both data versions."""

from __future__ import annotations

import pytest

from kfk.backends.embedded.quorum_state import ElectionState, FileQuorumStateStore
from kfk.errors import KafkaStorageError


def test_write_then_read(tmp_path) -> None:
    store = FileQuorumStateStore(str(tmp_path))
    assert store.read() is None
    store.write(ElectionState(epoch=4, leader_id=1, voted_id=1, voters=(1,)))
    assert store.read() == ElectionState(4, 1, 1, (1,))
    assert not (tmp_path / "quorum-state.tmp").exists()


def test_a_kip_853_file_is_read(tmp_path) -> None:
    (tmp_path / "quorum-state").write_text(
        '{"leaderId":3,"leaderEpoch":12,"votedId":-1,"votedDirectoryId":"AAAAAAAAAAAAAAAAAAAAAA","data_version":1}')
    assert FileQuorumStateStore(str(tmp_path)).read() == ElectionState(12, 3, -1, ())


@pytest.mark.parametrize("text", ["", "{", "[]", '{"leaderId":1}', '{"leaderEpoch":1,"leaderId":1,"votedId":-1,'
                                                                  '"data_version":7}'])
def test_an_unreadable_file_is_a_storage_error(tmp_path, text: str) -> None:
    (tmp_path / "quorum-state").write_text(text)
    with pytest.raises(KafkaStorageError):
        FileQuorumStateStore(str(tmp_path)).read()
