"""Random sequences of transactional API calls, timeouts, marker failures and restarts keep the coordinator's
invariants (checked after every step): the log replays to the state in memory, epochs of a producer id never go
back, partitions are held exactly while a transaction is open, and once no transaction is open or prepared every
data partition is stable (every transactional batch has its marker)."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from kfk.coordinator.runtime import read_chunk
from kfk.coordinator.transaction.metadata import TransactionState
from kfk.coordinator.transaction.state_manager import TransactionStateManager
from kfk.errors import ErrorCode
from tests.coordinator.transaction.harness import Harness, tp

S = TransactionState
IDS = ("t1", "t2")
PARTITIONS = (tp("a", 0), tp("a", 1), tp("b", 0))
TIMEOUT_MS = 5_000


class TransactionMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.directory = Path(tempfile.mkdtemp(prefix="txcoord-"))
        self.h = Harness(self.directory, partitions=2, abort_timed_out_transactions_interval_ms=1_000)
        #: What each client believes it has: (producer id, epoch), or None before InitProducerId.
        self.clients: dict[str, tuple[int, int] | None] = dict.fromkeys(IDS)
        self.max_epoch: dict[int, int] = {}
        self.sequences: dict[tuple, int] = {}

    def teardown(self) -> None:
        self.h.close()
        shutil.rmtree(self.directory, ignore_errors=True)

    def _client(self, transactional_id: str) -> tuple[int, int]:
        return self.clients[transactional_id] or (-1, -1)

    @rule(transactional_id=st.sampled_from(IDS), recover=st.booleans())
    def init(self, transactional_id: str, recover: bool) -> None:
        producer_id, producer_epoch = self._client(transactional_id) if recover else (-1, -1)
        answer = self.h.init(transactional_id, TIMEOUT_MS, producer_id, producer_epoch)
        assert answer.error in (ErrorCode.NONE, ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.PRODUCER_FENCED)
        if answer.error == ErrorCode.NONE:
            self.clients[transactional_id] = (answer.producer_id, answer.producer_epoch)

    @rule(transactional_id=st.sampled_from(IDS), partitions=st.sets(st.sampled_from(PARTITIONS), min_size=1),
          tv=st.sampled_from([0, 2]), stale=st.booleans())
    def add(self, transactional_id: str, partitions, tv: int, stale: bool) -> None:
        producer_id, producer_epoch = self._client(transactional_id)
        error = self.h.add(transactional_id, producer_id, producer_epoch - stale, *partitions, tv=tv)
        if stale and producer_epoch > 0:
            assert error in (ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_PRODUCER_ID_MAPPING)
        if error == ErrorCode.NONE:
            assert self.h.metadata(transactional_id).topic_partitions >= partitions

    @rule(transactional_id=st.sampled_from(IDS), partition=st.sampled_from(PARTITIONS))
    def produce(self, transactional_id: str, partition) -> None:
        """A transactional batch where the coordinator says the producer may write (KIP-890's verification)."""
        producer_id, producer_epoch = self._client(transactional_id)
        verified = self.h.coordinator.verify_partitions(transactional_id, producer_id, producer_epoch, [partition])
        if verified[partition] != ErrorCode.NONE:
            return
        key = (partition, producer_id, producer_epoch)
        sequence = self.sequences.get(key, 0)
        self.h.leader.produce(partition, producer_id, producer_epoch, sequence, b"v")
        self.sequences[key] = sequence + 1

    @rule(transactional_id=st.sampled_from(IDS), commit=st.booleans(), tv=st.sampled_from([0, 2]))
    def end(self, transactional_id: str, commit: bool, tv: int) -> None:
        producer_id, producer_epoch = self._client(transactional_id)
        answer = self.h.end(transactional_id, producer_id, producer_epoch, commit, tv=tv)
        if answer.error == ErrorCode.NONE and tv == 2:
            self.clients[transactional_id] = (answer.producer_id, answer.producer_epoch)

    @rule(partition=st.sampled_from(PARTITIONS), error=st.sampled_from([
        ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.REQUEST_TIMED_OUT]))
    def leader_fails_next_marker(self, partition, error: ErrorCode) -> None:
        self.h.leader.errors.setdefault(partition, []).append(error)

    @rule(ms=st.integers(min_value=0, max_value=4_000))
    def advance(self, ms: int) -> None:
        self.h.advance(ms)

    @rule()
    def restart(self) -> None:
        self.h.restart()

    # -- invariants --------------------------------------------------------------------------------------------------

    @invariant()
    def transitions_pending_only_while_markers_are_written(self) -> None:
        for metadata in self.h.coordinator.state.active_transactions():
            if metadata.pending_state is not None:
                assert metadata.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT), metadata
                assert metadata.pending_state in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT), metadata
            if metadata.state in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
                assert not metadata.topic_partitions, metadata
            elif metadata.state is S.ONGOING:
                assert metadata.topic_partitions, metadata

    @invariant()
    def epochs_never_go_back(self) -> None:
        for metadata in self.h.coordinator.state.active_transactions():
            assert metadata.producer_epoch >= self.max_epoch.get(metadata.producer_id, -1), metadata
            self.max_epoch[metadata.producer_id] = metadata.producer_epoch
            assert 0 <= metadata.producer_epoch <= 32767

    @invariant()
    def the_log_replays_to_the_state_in_memory(self) -> None:
        replayed = TransactionStateManager(self.h.config)
        for partition, log in self.h.logs.items():
            replayed.begin_loading(partition, 0)
            records, _ = read_chunk(log, log.log_start_offset)
            for record in records:
                replayed.replay(partition, record.key, record.value)
            replayed.complete_loading(partition)
        def view(manager):
            return {m.transactional_id: (m.producer_id, m.producer_epoch, m.state, frozenset(m.topic_partitions),
                                         m.txn_start_timestamp) for m in manager.active_transactions()}
        assert view(replayed) == view(self.h.coordinator.state)

    @invariant()
    def data_is_stable_once_nothing_is_open(self) -> None:
        states = {m.state for m in self.h.coordinator.state.active_transactions()}
        if states & {S.ONGOING, S.PREPARE_COMMIT, S.PREPARE_ABORT}:
            return
        for partition, log in self.h.leader.logs.items():
            assert log.first_unstable_offset is None, partition


TransactionMachine.TestCase.settings = settings(max_examples=75, stateful_step_count=30, deadline=None)
test_transaction_coordinator_invariants = TransactionMachine.TestCase
