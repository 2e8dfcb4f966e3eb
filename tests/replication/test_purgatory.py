"""The purgatory core with a manual clock: watch, wake by key, expire by deadline, complete exactly once."""

from __future__ import annotations

import asyncio

from kfk.replication.purgatory import AsyncioExpirationTimer, DelayedOperation, DelayedOperationPurgatory


class Waiting(DelayedOperation):
    """Completes when `ready` is set; records how it completed."""

    def __init__(self, deadline_ms: int, ready: bool = False) -> None:
        super().__init__(deadline_ms)
        self.ready = ready
        self.completions = 0
        self.expirations = 0
        self.checks = 0

    def try_complete(self) -> bool:
        self.checks += 1
        return self.force_complete() if self.ready else False

    def on_complete(self) -> None:
        self.completions += 1

    def on_expiration(self) -> None:
        self.expirations += 1


def test_an_operation_whose_condition_holds_completes_without_being_watched() -> None:
    purgatory: DelayedOperationPurgatory[Waiting] = DelayedOperationPurgatory("test")
    operation = Waiting(100, ready=True)
    assert purgatory.try_complete_else_watch(operation, ["a"])
    assert operation.completions == 1
    assert purgatory.delayed == 0 and purgatory.watched("a") == 0


def test_a_watched_operation_completes_when_its_key_is_checked_and_the_condition_holds() -> None:
    purgatory: DelayedOperationPurgatory[Waiting] = DelayedOperationPurgatory("test")
    operation = Waiting(100)
    assert not purgatory.try_complete_else_watch(operation, ["a", "b"])
    assert purgatory.watched("a") == 1 and purgatory.watched("b") == 1
    assert purgatory.check_and_complete("a") == 0  # checked, condition not met yet
    operation.ready = True
    assert purgatory.check_and_complete("c") == 0  # another key does not touch it
    assert purgatory.check_and_complete("b") == 1
    assert operation.completions == 1 and operation.expirations == 0
    assert purgatory.check_and_complete("a") == 0  # completed once, through either key
    assert operation.completions == 1
    assert purgatory.watched("a") == 0


def test_expiry_completes_due_operations_once_and_returns_the_next_deadline() -> None:
    purgatory: DelayedOperationPurgatory[Waiting] = DelayedOperationPurgatory("test")
    early, late = Waiting(100), Waiting(250)
    purgatory.try_complete_else_watch(late, ["a"])
    purgatory.try_complete_else_watch(early, ["a"])
    assert purgatory.expire(99) == 100
    assert early.completions == 0
    assert purgatory.expire(100) == 250
    assert (early.completions, early.expirations, early.expired) == (1, 1, True)
    assert late.completions == 0
    late.ready = True
    assert purgatory.check_and_complete("a") == 1
    assert not late.expired
    assert purgatory.expire(1_000) is None  # the completed one is not expired again
    assert late.expirations == 0 and late.completions == 1


def test_the_timer_hook_is_told_only_about_a_new_earliest_deadline() -> None:
    armed: list[int] = []
    purgatory: DelayedOperationPurgatory[Waiting] = DelayedOperationPurgatory("test", armed.append)
    purgatory.try_complete_else_watch(Waiting(500), ["a"])
    purgatory.try_complete_else_watch(Waiting(700), ["a"])
    purgatory.try_complete_else_watch(Waiting(300), ["a"])
    assert armed == [500, 300]


def test_complete_all_answers_every_waiting_operation() -> None:
    purgatory: DelayedOperationPurgatory[Waiting] = DelayedOperationPurgatory("test")
    operations = [Waiting(100 + i) for i in range(5)]
    for operation in operations:
        purgatory.try_complete_else_watch(operation, [operation.deadline_ms % 2])
    purgatory.complete_all()
    assert [op.completions for op in operations] == [1] * 5
    assert purgatory.delayed == 0 and purgatory.watched(0) == 0


def test_completed_operations_are_purged_from_the_deadline_heap() -> None:
    purgatory: DelayedOperationPurgatory[Waiting] = DelayedOperationPurgatory("test")
    count = purgatory.PURGE_THRESHOLD * 3
    for index in range(count):
        operation = Waiting(10_000 + index)
        purgatory.try_complete_else_watch(operation, ["a"])
        operation.ready = True
        purgatory.check_and_complete("a")
    assert len(purgatory._deadlines) <= purgatory.PURGE_THRESHOLD + 1
    assert purgatory.delayed == 0


def test_the_asyncio_timer_expires_operations_at_their_deadline() -> None:
    async def scenario() -> tuple[int, int]:
        loop = asyncio.get_running_loop()
        start = loop.time()

        def now_ms() -> int:
            return 1_000 + int((loop.time() - start) * 1000)

        purgatory: DelayedOperationPurgatory[Waiting] = DelayedOperationPurgatory("test")
        timer = AsyncioExpirationTimer([purgatory], now_ms)
        purgatory._on_new_deadline = timer.arm
        short, long = Waiting(now_ms() + 30), Waiting(now_ms() + 60_000)
        purgatory.try_complete_else_watch(short, ["a"])
        purgatory.try_complete_else_watch(long, ["a"])
        await asyncio.sleep(0.2)
        timer.cancel()
        return short.expirations, long.completions

    assert asyncio.run(scenario()) == (1, 0)


class Failing(Waiting):
    def on_complete(self) -> None:
        self.completions += 1
        raise RuntimeError("boom")


def test_a_failing_completion_does_not_stop_the_others() -> None:
    purgatory: DelayedOperationPurgatory[Waiting] = DelayedOperationPurgatory("test")
    failing, fine = Failing(100), Waiting(100)
    purgatory.try_complete_else_watch(failing, ["a"])
    purgatory.try_complete_else_watch(fine, ["a"])
    assert purgatory.expire(100) is None
    assert (failing.completions, failing.completed, fine.completions) == (1, True, 1)
