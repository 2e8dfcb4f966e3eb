"""KIP-890 part 1 in storage: a transactional batch that would open a transaction on the partition needs the guard
its verification with the coordinator started with; a marker that lands while the verification is out drops the
guard, so a late batch cannot open a transaction that no coordinator knows (Kafka's VerificationGuard)."""

from __future__ import annotations

import pytest

from kfk.errors import InvalidTxnStateError
from kfk.storage.log import ONGOING_TRANSACTION, Log, VerificationGuard
from kfk.storage.producer_state import AppendOrigin
from tests.storage.conftest import make_batch, make_marker, small_config

PRODUCER_ID, EPOCH = 7, 0


def transactional(log: Log, sequence: int, value: bytes) -> bytes:
    return make_batch(log.log_end_offset, [value], producer_id=PRODUCER_ID, producer_epoch=EPOCH,
                      base_sequence=sequence, transactional=True)


def test_a_verified_batch_opens_the_transaction_and_later_batches_need_no_verification(log_dir) -> None:
    log = Log.open(log_dir, small_config(), now_ms=0)
    guard = log.start_transaction_verification(PRODUCER_ID, EPOCH)
    assert guard is not ONGOING_TRANSACTION
    log.append_as_leader(transactional(log, 0, b"first"), 0, 0, verification_guard=guard)
    assert log.start_transaction_verification(PRODUCER_ID, EPOCH) is ONGOING_TRANSACTION
    log.append_as_leader(transactional(log, 1, b"second"), 0, 0, verification_guard=ONGOING_TRANSACTION)
    assert log.first_unstable_offset == 0  # the transaction is open


def test_a_marker_during_verification_makes_the_late_batch_fail(log_dir) -> None:
    log = Log.open(log_dir, small_config(), now_ms=0)
    first = log.start_transaction_verification(PRODUCER_ID, EPOCH)
    log.append_as_leader(transactional(log, 0, b"in the transaction"), 0, 0, verification_guard=first)
    # A retry of a later batch asks again while the transaction is still open...
    late = log.start_transaction_verification(PRODUCER_ID, EPOCH)
    assert late is ONGOING_TRANSACTION
    # ...and the coordinator's ABORT lands before that batch is appended.
    log.append_as_leader(make_marker(log.log_end_offset, PRODUCER_ID, EPOCH, commit=False), 0, 0,
                         AppendOrigin.COORDINATOR)
    end = log.log_end_offset
    with pytest.raises(InvalidTxnStateError):
        log.append_as_leader(transactional(log, 1, b"late"), 0, 0, verification_guard=late)
    assert log.log_end_offset == end
    log.update_high_watermark(end)
    assert log.last_stable_offset == end  # no open transaction holds the stable offset back


def test_a_superseded_or_foreign_guard_is_refused(log_dir) -> None:
    log = Log.open(log_dir, small_config(), now_ms=0)
    old = log.start_transaction_verification(PRODUCER_ID, EPOCH)
    new = log.start_transaction_verification(PRODUCER_ID, EPOCH)
    with pytest.raises(InvalidTxnStateError):
        log.append_as_leader(transactional(log, 0, b"x"), 0, 0, verification_guard=old)
    with pytest.raises(InvalidTxnStateError):
        log.append_as_leader(transactional(log, 0, b"x"), 0, 0, verification_guard=VerificationGuard())
    log.append_as_leader(transactional(log, 0, b"x"), 0, 0, verification_guard=new)


def test_without_a_guard_nothing_is_checked(log_dir) -> None:
    """transaction.partition.verification.enable=false: the append presents no guard, as before KIP-890."""
    log = Log.open(log_dir, small_config(), now_ms=0)
    log.append_as_leader(transactional(log, 0, b"unverified"), 0, 0)
    assert log.log_end_offset == 1
