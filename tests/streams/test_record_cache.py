"""The record cache (statestore.cache.max.bytes) on the TopologyTestDriver, which commits (flushes the cache) after
every input record as Kafka's does: a record's updates of one key go downstream once, with the key's value before
the record as the old value; a cache too small for a record's keys evicts, and flushes, as it goes; with 0 every
update goes downstream. Then the word count on a broker, where a commit flushes many records' updates. Each
expectation is computed here from the input."""

from __future__ import annotations

import struct
import time
from collections import Counter

import pytest

from kfk.client import Admin, NewTopic
from kfk.streams import (Change, KafkaStreams, Materialized, Processor, Record, Serdes, StoreBuilder, StreamsBuilder,
                         StreamsConfig, TimeWindows, Topology, Window)
from kfk.streams.cache import ThreadCache, cache_bytes_per_thread
from kfk.streams.state import SessionStore, WindowStore
from kfk.streams.test_driver import TopologyTestDriver
from tests.streams.conftest import create_input, read_to_end, unique_name
from tests.streams.topologies import wordcount

CONFIG = {"default.key.serde": "string", "default.value.serde": "string"}
LINES = ["a b a c a", "b b", "a", "d a d"]


class Spy(Processor):
    """Collects the KTable updates it is given: (key, new value, old value)."""

    def __init__(self, seen: list[tuple[str, int | None, int | None]]) -> None:
        self.seen = seen

    def process(self, record: Record) -> None:
        change: Change = record.value
        self.seen.append((record.key, change.new_value, change.old_value))


def _word_count(materialized: str | Materialized, seen: list) -> Topology:
    builder = StreamsBuilder()
    counts = (builder.stream("in").flat_map_values(str.split).group_by(lambda key, word: word).count(materialized))
    counts.to_stream().to("out", value_serde=Serdes.long())
    topology = builder.build()
    topology.add_processor("spy", lambda: Spy(seen), counts.name)
    return topology


def _updates_per_update(lines: list[str]) -> list[tuple[str, int, int | None]]:
    """Every update of the count (the cache off): (word, new count, old count)."""
    counts: Counter[str] = Counter()
    updates = []
    for line in lines:
        for word in line.split():
            counts[word] += 1
            updates.append((word, counts[word], counts[word] - 1 or None))
    return updates


def _updates_per_record(lines: list[str]) -> list[tuple[str, int, int | None]]:
    """One update per word of each line (the cache flushed after each record): its count after the line and before
    it, in the order of each word's last occurrence in the line."""
    counts: Counter[str] = Counter()
    updates = []
    for line in lines:
        before = dict(counts)
        words = line.split()
        counts.update(words)
        last = {word: index for index, word in enumerate(words)}
        for word in sorted(last, key=last.get):
            updates.append((word, counts[word], before.get(word)))
    return updates


def _run(topology: Topology, config: dict, lines: list[str] = LINES) -> list:
    with TopologyTestDriver(topology, {**CONFIG, **config}) as driver:
        for index, line in enumerate(lines):
            driver.pipe_input("in", f"k{index}", line, index)
        return driver.read_output("out", value_serde=Serdes.long())


def test_a_record_updating_a_key_many_times_forwards_it_once_with_its_old_value() -> None:
    seen: list = []
    output = _run(_word_count("counts", seen), {})
    expected = _updates_per_record(LINES)
    assert seen == expected
    assert [(record.key, record.value) for record in output] == [(word, new) for word, new, _ in expected]
    assert len(output) < sum(len(line.split()) for line in LINES)


def test_without_the_cache_every_update_is_forwarded() -> None:
    for config, materialized in (({"statestore.cache.max.bytes": 0}, "counts"),
                                 ({"cache.max.bytes.buffering": 0}, "counts"),  # the deprecated name
                                 ({}, Materialized.as_("counts").with_caching_disabled())):
        seen: list = []
        _run(_word_count(materialized, seen), config)
        assert seen == _updates_per_update(LINES), config


def test_a_cache_too_small_evicts_and_flushes_its_dirty_entries() -> None:
    """Entries of one-letter words cost 92 bytes here (key, timestamp and count, the repartition topic's name, and
    Kafka's overhead): a cache of 250 bytes holds two. Putting a third evicts the least recently used one; a dirty
    one is flushed with every other dirty entry of its store, the evicted one first."""
    seen: list = []
    _run(_word_count("counts", seen), {"statestore.cache.max.bytes": 250}, ["a b a c a"])
    # a, b, a (a is now the most recent), c: b is evicted and flushed, then a (2) and c (1); the record's end
    # flushes a (3)
    assert seen == [("b", 1, None), ("a", 2, None), ("c", 1, None), ("a", 3, 2)]


def test_windowed_counts_are_forwarded_once_per_window_and_record() -> None:
    builder = StreamsBuilder()
    seen: list = []
    counts = builder.stream("in").flat_map_values(str.split).group_by_key().windowed_by(
        TimeWindows.of_size_and_grace(10, 20)).count()
    counts.to_stream().map(lambda windowed, count: (f"{windowed.key}@{windowed.window.start}", count)).to(
        "out", value_serde=Serdes.long())
    topology = builder.build()
    topology.add_processor("spy", lambda: Spy(seen), counts.name)
    with TopologyTestDriver(topology, CONFIG) as driver:
        driver.pipe_input("in", "k", "x x x", 3)
        driver.pipe_input("in", "k", "x", 12)
        driver.pipe_input("in", "k", "x x", 5)
        assert [(record.key, record.value) for record in driver.read_output("out", value_serde=Serdes.long())] == [
            ("k@0", 3), ("k@10", 1), ("k@0", 5)]
    # a window's first update has no old value: the store had none before the flush
    assert [(key.window.start, new, old) for key, new, old in seen] == [(0, 3, None), (10, 1, None), (0, 5, 3)]


class PutThrice(Processor):
    def process(self, record: Record) -> None:
        store = self.context.get_state_store("letters")
        for suffix in "123":
            store.put(record.key, record.value + suffix, record.timestamp)


@pytest.mark.parametrize("caching", [False, True])
def test_a_processor_api_store_is_cached_only_with_caching_enabled(caching: bool) -> None:
    topology = Topology().add_source("source", "in").add_processor("put", PutThrice, "source")
    builder = StoreBuilder("letters")
    topology.add_state_store(builder.with_caching_enabled() if caching else builder, "put")
    with TopologyTestDriver(topology, CONFIG) as driver:
        driver.pipe_input("in", "k", "v", 1)
        changelog = driver.read_output("test-driver-letters-changelog")
        assert [record.value for record in changelog] == (["v3"] if caching else ["v1", "v2", "v3"])
        assert driver.get_key_value_store("letters").get("k") == "v3"


def test_the_cache_is_divided_between_the_stream_threads() -> None:
    config = StreamsConfig({"application.id": "a", "bootstrap.servers": "b:9092", "num.stream.threads": 3,
                            "statestore.cache.max.bytes": 3000, "cache.max.bytes.buffering": 5})
    assert config.statestore_cache_max_bytes == 3000  # the new name wins over the deprecated one
    assert cache_bytes_per_thread(config.statestore_cache_max_bytes, config.num_stream_threads) == 1000
    assert StreamsConfig({"application.id": "a", "bootstrap.servers": "b:9092"}).statestore_cache_max_bytes \
        == 10 * 1024 * 1024


def test_word_count_on_a_broker_sends_fewer_records_and_the_same_final_counts(streams_broker, tmp_path) -> None:
    """The word count on three partitions with Kafka's default cache (10 MiB) and commits every 500 ms: the output
    and the changelog carry fewer records than there are updates, and end, like the store, with each word's count
    computed here. A spy on the table sees each key's updates chained: each one's old value is the new value of the
    one before (None first)."""
    bootstrap = streams_broker.bootstrap_servers
    lines = [(f"k{index}", " ".join(f"w{(index * 3 + position) % 11}" for position in range(index % 6 + 1)))
             for index in range(400)]
    input_topic, output, application_id = unique_name("lines"), unique_name("counts"), unique_name("cached-wc")
    create_input(bootstrap, input_topic, 3, lines)
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(output, 3, 1)])
    expected = Counter(word for _, line in lines for word in line.split())
    seen: list = []
    topology = wordcount(input_topic, output)
    topology.add_processor("spy", lambda: Spy(seen), "KSTREAM-AGGREGATE-0000000003")
    streams = KafkaStreams(topology, {
        "application.id": application_id, "bootstrap.servers": bootstrap, "state.dir": str(tmp_path),
        "default.key.serde": "string", "default.value.serde": "string", "commit.interval.ms": 500})
    streams.start()
    try:
        deadline = time.monotonic() + 120
        while True:
            last = {record.key.decode(): int.from_bytes(record.value, "big")
                    for record in read_to_end(bootstrap, output)}
            if last == dict(expected):
                break
            assert time.monotonic() < deadline, f"{last} never reached {dict(expected)}"
            time.sleep(0.5)
        assert dict(streams.store("counts").all()) == dict(expected)
        assert 0 < streams.metrics()["hit-ratio-avg"] <= 1  # eleven words: most counts are read from the cache
    finally:
        assert streams.close()
    assert streams.error is None
    updates = sum(expected.values())
    assert len(read_to_end(bootstrap, output)) < updates
    changelog = read_to_end(bootstrap, f"{application_id}-counts-changelog")
    assert len(changelog) < updates
    assert {record.key.decode(): int.from_bytes(record.value, "big") for record in changelog} == dict(expected)
    by_key: dict[str, list] = {}
    for key, new, old in seen:
        by_key.setdefault(key, []).append((new, old))
    for key, changes in by_key.items():
        assert [old for _, old in changes] == [None] + [new for new, _ in changes[:-1]], key
        assert changes[-1][0] == expected[key]


class _Task:
    """What a cached store asks of its task: the record being processed (none here)."""

    source = current = None


def test_the_time_indexes_follow_every_write_to_the_local_store() -> None:
    """The index by window start (by session end for sessions) that emitting on window close reads holds what the
    local store holds: a cached write only once the cache flushes it (a deletion too), a restored batch, nothing
    after a wipe."""
    windows = WindowStore("windows", Serdes.string(), Serdes.long(), None, None)
    sessions = SessionStore("sessions", Serdes.string(), Serdes.long(), None, None, 100)
    thread_cache = ThreadCache(1 << 20)
    for store in (windows, sessions):
        store.enable_cache(thread_cache, f"0_0-{store.name}", _Task())
    assert windows.fetch_all(0, 100) == [] and sessions.fetch_all_sessions(0, 100) == []  # the indexes are built
    windows.put_window("a", 0, 1, 5)
    windows.put_window("b", 10, 2, 12)
    sessions.put_session("a", Window(0, 5), 2, 5)
    assert windows.fetch_all(0, 100) == [] and sessions.fetch_all_sessions(0, 100) == []  # in the cache only
    windows.cache.flush()
    sessions.cache.flush()
    assert windows.fetch_all(0, 100) == [("a", 0, 1, 5), ("b", 10, 2, 12)]
    assert sessions.fetch_all_sessions(0, 100) == [("a", Window(0, 5), 2)]
    windows.put_window("a", 0, None, 20)
    sessions.put_session("a", Window(0, 5), None, 20)
    sessions.put_session("a", Window(0, 9), 3, 9)
    windows.cache.flush()
    sessions.cache.flush()
    assert windows.fetch_all(0, 100) == [("b", 10, 2, 12)]
    assert sessions.fetch_all_sessions(0, 100) == [("a", Window(0, 9), 3)]
    key, value = Serdes.string().serialize, Serdes.long().serialize
    windows.restore_batch([(key("c") + struct.pack(">qi", 20, 0), value(4), 21),
                           (key("b") + struct.pack(">qi", 10, 0), None, 22)])
    sessions.restore_batch([(key("c") + struct.pack(">qq", 30, 25), value(5), 30),
                            (key("a") + struct.pack(">qq", 9, 0), None, 31)])
    assert windows.fetch_all(0, 100) == [("c", 20, 4, 21)]
    assert sessions.fetch_all_sessions(0, 100) == [("c", Window(25, 30), 5)]
    for store in (windows, sessions):
        store.wipe()
    assert windows.fetch_all(0, 100) == [] and sessions.fetch_all_sessions(0, 100) == []
