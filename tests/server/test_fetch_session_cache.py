"""The fetch session cache (KIP-227): slots, eviction of idle and smaller sessions, followers' privilege, epochs."""

from __future__ import annotations

import uuid
from collections import OrderedDict
from random import Random

from kfk.common.clock import ManualClock
from kfk.common.constants import INT32_MAX
from kfk.errors import ErrorCode
from kfk.protocol.fetch_session import next_epoch
from kfk.server.fetch_session import EVICTION_MS, CachedPartition, FetchSessionCache


def partitions(count: int) -> OrderedDict:
    return OrderedDict((("t", index), CachedPartition("t", uuid.UUID(int=0), index, 0, 1024))
                       for index in range(count))


def test_sessions_fill_the_slots_then_fetches_go_sessionless() -> None:
    clock = ManualClock()
    cache = FetchSessionCache(2, clock, rng=Random(1))
    first = cache.create(False, False, partitions(3))
    second = cache.create(False, False, partitions(3))
    assert first and second and first.session_id != second.session_id and len(cache) == 2
    assert cache.create(False, False, partitions(3)) is None  # same size, neither idle: no slot
    assert cache.create(False, False, partitions(0)) is None  # nothing to remember
    assert FetchSessionCache(0, clock).create(True, False, partitions(5)) is None


def test_an_idle_session_gives_its_slot_least_recently_used_first() -> None:
    clock = ManualClock()
    cache = FetchSessionCache(2, clock)
    old = cache.create(False, False, partitions(9))
    used = cache.create(False, False, partitions(9))
    clock.advance(EVICTION_MS + 1)
    cache.touch(used)
    new = cache.create(False, False, partitions(1))
    assert new is not None and cache.get(old.session_id) is None and cache.get(used.session_id) is used
    assert cache.evictions == 1


def test_a_bigger_session_displaces_a_smaller_one_and_a_follower_any_consumer() -> None:
    clock = ManualClock()
    cache = FetchSessionCache(2, clock)
    small = cache.create(False, False, partitions(2))
    big = cache.create(False, False, partitions(50))
    medium = cache.create(False, False, partitions(10))
    assert medium is not None and cache.get(small.session_id) is None and cache.get(big.session_id) is big
    follower = cache.create(True, False, partitions(1))
    assert follower is not None and len(cache) == 2
    assert cache.get(big.session_id) is None or cache.get(medium.session_id) is None
    another_follower = cache.create(True, False, partitions(1))
    assert another_follower is not None  # the consumer session left is displaced
    assert cache.create(True, False, partitions(1)) is None  # followers do not displace followers of equal size


def test_epochs_wrap_to_one() -> None:
    assert next_epoch(1) == 2
    assert next_epoch(INT32_MAX) == 1


def test_must_respond_on_news_only() -> None:
    cached = CachedPartition("t", uuid.UUID(int=0), 0, 0, 1024)
    assert cached.must_respond(ErrorCode.NONE, 0, 10, 10, 0)  # first answer: always
    assert not cached.must_respond(ErrorCode.NONE, 0, 10, 10, 0)
    assert cached.must_respond(ErrorCode.NONE, 100, 10, 10, 0)  # records
    assert cached.must_respond(ErrorCode.NONE, 0, 11, 10, 0)  # high watermark moved
    assert cached.must_respond(ErrorCode.NONE, 0, 11, 11, 0)  # last stable offset moved
    assert cached.must_respond(ErrorCode.NONE, 0, 11, 11, 5)  # log start offset moved
    assert cached.must_respond(ErrorCode.NOT_LEADER_OR_FOLLOWER, 0, -1, -1, -1)  # errors, every time
    assert cached.must_respond(ErrorCode.NOT_LEADER_OR_FOLLOWER, 0, -1, -1, -1)
    assert not cached.must_respond(ErrorCode.NONE, 0, 11, 11, 5)
