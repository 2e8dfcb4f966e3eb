"""The DSL's operators on the TopologyTestDriver (no broker): each checked against its output computed here."""

from __future__ import annotations

import pytest

from kfk.streams import (BufferConfig, EmitStrategy, JoinWindows, Processor, Record, Serdes, SessionWindows,
                         SlidingWindows, StoreBuilder, StreamsBuilder, Suppressed, TimeWindows, Topology)
from kfk.streams.foreign_key_join import murmur3_hash128, serialize_response
from kfk.streams.test_driver import TopologyTestDriver
from tests.streams.test_apache_kafka_streams_oracle import WINDOWED_INPUT
from tests.streams.topologies import emit, foreign_key_joins, foreign_key_joins_named

CONFIG = {"default.key.serde": "string", "default.value.serde": "string"}


def test_stateless_operators() -> None:
    builder = StreamsBuilder()
    seen: list[tuple[str, str]] = []
    source = builder.stream("in")
    pairs = source.flat_map(lambda key, value: [(word, key) for word in value.split()])
    pairs.foreach(lambda key, value: seen.append((key, value)))
    pairs.filter_not(lambda key, value: key.startswith("x")).merge(source.map_values(str.upper)).to(
        lambda key, value, record: "short" if len(value) < 3 else "long")
    with TopologyTestDriver(builder.build(), CONFIG) as driver:
        driver.pipe_input("in", "k1", "ab xy cd", 10)
        driver.pipe_input("in", "k2", "e", 11)
        assert seen == [("ab", "k1"), ("xy", "k1"), ("cd", "k1"), ("e", "k2")]
        assert driver.read_output("short") == [("ab", "k1", 10), ("cd", "k1", 10), ("e", "k2", 11),
                                               ("k2", "E", 11)]
        assert driver.read_output("long") == [("k1", "AB XY CD", 10)]


def test_table_operators_and_repartitioned_aggregation() -> None:
    builder = StreamsBuilder()
    totals = (builder.stream("in").select_key(lambda key, value: value[0])
              .group_by_key().aggregate(lambda: 0, lambda key, value, total: total + len(value), "totals",
                                        value_serde=Serdes.long()))
    totals.filter(lambda key, total: total % 2 == 0).map_values(lambda total: total * 10).to_stream().to(
        "even", value_serde=Serdes.long())
    with TopologyTestDriver(builder.build(), CONFIG) as driver:
        for value, timestamp in (("aa", 5), ("a", 3), ("b", 9), ("abc", 4)):
            driver.pipe_input("in", None, value, timestamp)
        # a: 2 (even), 3 (odd: a tombstone, it was even), 6 (even); b: 1 (odd, never even: nothing)
        assert driver.read_output("even", value_serde=Serdes.long()) == [("a", 20, 5), ("a", None, 5),
                                                                        ("a", 60, 5)]
        assert dict(driver.get_key_value_store("totals").all()) == {"a": 6, "b": 1}
        assert len(driver.read_output("test-driver-totals-changelog")) == 4


def test_tumbling_window_reduce_drops_records_after_the_window_closes() -> None:
    builder = StreamsBuilder()
    (builder.stream("in").group_by_key().windowed_by(TimeWindows.of_size_with_no_grace(10))
     .reduce(lambda joined, value: joined + value).to_stream()
     .map(lambda windowed, value: (f"{windowed.key}@{windowed.window.start}", value)).to("out"))
    with TopologyTestDriver(builder.build(), CONFIG) as driver:
        for value, timestamp in (("a", 1), ("b", 12), ("c", 9), ("d", 19), ("e", 20), ("f", 15)):
            driver.pipe_input("in", "k", value, timestamp)
        # c (9) comes when stream time is 12: [0, 10) has closed; f (15) when it is 20: [10, 20) has closed
        assert [(key, value) for key, value, _ in driver.read_output("out")] == [
            ("k@0", "a"), ("k@10", "b"), ("k@10", "bd"), ("k@20", "e")]


def _final_counts() -> Topology:
    builder = StreamsBuilder()
    (builder.stream("in").group_by_key().windowed_by(TimeWindows.of_size_and_grace(10, 5)).count("counts")
     .suppress(Suppressed.until_window_closes(BufferConfig.unbounded()).with_name("final"))
     .to_stream().map(lambda windowed, count: (f"{windowed.key}@{windowed.window.start}", count))
     .to("out", value_serde=Serdes.long()))
    return builder.build()


def test_suppress_emits_each_window_once_when_it_closes_and_its_buffer_restores() -> None:
    """until_window_closes: a window's count is emitted once, when stream time reaches its end + grace (15 for
    [0, 10)); a second driver whose stores are restored from the first one's changelogs goes on where it
    stopped."""
    inputs = [("a", 1), ("b", 3), ("a", 12), ("a", 8), ("b", 14), ("a", 16), ("b", 21), ("a", 30), ("b", 4)]
    with TopologyTestDriver(_final_counts(), CONFIG) as driver:
        for key, timestamp in inputs:
            driver.pipe_input("in", key, "x", timestamp)
        # [0, 10) closes at 15 (a@16): a 2 (1, 8), b 1 (3); [10, 20) at 25 (a@30): a 2, b 1; b@4 is too late
        expected = [("a@0", 2, 8), ("b@0", 1, 3), ("a@10", 2, 16), ("b@10", 1, 14)]
        assert driver.read_output("out", value_serde=Serdes.long()) == expected
    with TopologyTestDriver(_final_counts(), CONFIG) as first:
        for key, timestamp in inputs[:5]:
            first.pipe_input("in", key, "x", timestamp)
        assert first.read_output("out", value_serde=Serdes.long()) == []
        changelogs = {store: list(first.written[f"test-driver-{store}-changelog"]) for store in ("counts",
                                                                                                 "final-store")}
        assert changelogs["final-store"][0][3] == [("v", b"\x03")]  # Kafka's buffer changelog format version
    with TopologyTestDriver(_final_counts(), CONFIG) as second:
        for store, records in changelogs.items():
            for key, value, timestamp, _ in records:
                second.get_key_value_store(store).restore(key, value, timestamp)
        for key, timestamp in inputs[5:]:
            second.pipe_input("in", key, "x", timestamp)
        assert second.read_output("out", value_serde=Serdes.long()) == expected


@pytest.mark.parametrize("cache_bytes", [0, 10 * 1024 * 1024])
def test_emit_on_window_close_forwards_each_window_once_when_it_closes(cache_bytes: int) -> None:
    """EmitStrategy.on_window_close() on a tumbling count (10 ms, 5 ms grace): no update is forwarded; after each
    record, every window closed by then (end + grace at most stream time) comes once, with its final count and
    timestamp, earliest start first and then by key; as Kafka's time-ordered store, it holds no window that started
    more than size + grace (15 ms) before the latest window start it was given. Computed here record by record,
    the same with the record cache on (the aggregation's store is not cached) as off."""
    builder = StreamsBuilder()
    (builder.stream("in").group_by_key().windowed_by(TimeWindows.of_size_and_grace(10, 5))
     .emit_strategy(EmitStrategy.on_window_close()).count()
     .to_stream().map(lambda windowed, count: (f"{windowed.key}@{windowed.window.start}", count))
     .to("out", value_serde=Serdes.long()))
    # b@4 comes too late for [0, 10) (closed at 15); a@47 leaps past the close of [20, 30) (35) and more than 15 ms
    # past its start: its windows are gone, never emitted
    inputs = [("a", 1), ("b", 3), ("a", 12), ("a", 8), ("b", 14), ("a", 16), ("b", 4), ("b", 21), ("b", 25),
              ("c", 31), ("d", 33), ("a", 22), ("a", 47), ("b", 50)]
    stream_time, latest_start, windows, emitted = -1, -1, {}, set()
    with TopologyTestDriver(builder.build(), {**CONFIG, "statestore.cache.max.bytes": cache_bytes}) as driver:
        for key, timestamp in inputs:
            driver.pipe_input("in", key, "x", timestamp)
            stream_time = max(stream_time, timestamp)
            start = timestamp - timestamp % 10
            if start + 10 > stream_time - 5:
                count, latest = windows.get((start, key), (0, timestamp))
                windows[start, key] = (count + 1, max(latest, timestamp))
                latest_start = max(latest_start, start)
            expected = []
            for (start, window_key), (count, latest) in sorted(windows.items()):
                if start + 15 <= stream_time and start >= latest_start - 15 and (start, window_key) not in emitted:
                    emitted.add((start, window_key))
                    expected.append((f"{window_key}@{start}", count, latest))
            assert driver.read_output("out", value_serde=Serdes.long()) == expected, (key, timestamp)
    assert emitted == {(0, "a"), (0, "b"), (10, "a"), (10, "b"), (30, "c"), (30, "d")}


def test_aggregations_emitting_on_window_close_are_not_cached() -> None:
    """The time, sliding and session aggregations emitting on window close keep their stores out of the record
    cache (Kafka's sliding and session ones do, kfk.streams' time one too), the one emitting on update keeps its
    store cached: with the cache on, the on-close outputs are record for record those without it."""
    topology = emit("in", "out")
    assert sorted(builder.caching for builder in topology.store_builders.values()) == [False, False, False, True]
    outputs = []
    for cache_bytes in (0, 10 * 1024 * 1024):
        with TopologyTestDriver(emit("in", "out"), {**CONFIG, "statestore.cache.max.bytes": cache_bytes}) as driver:
            for key, line, timestamp in WINDOWED_INPUT:
                driver.pipe_input("in", key, line, timestamp)
            outputs.append((driver.read_output("out-totals", value_serde=Serdes.long()),
                            driver.read_output("out-outer", value_serde=Serdes.bytes())))
    uncached, cached = outputs
    assert uncached[0] and uncached[1]
    assert cached == uncached


@pytest.mark.parametrize("cache_bytes", [0, 10 * 1024 * 1024])
def test_session_reduce_merges_the_sessions_a_record_bridges(cache_bytes: int) -> None:
    builder = StreamsBuilder()
    (builder.stream("in").group_by_key().windowed_by(SessionWindows.of_inactivity_gap_and_grace(5, 20))
     .reduce(lambda joined, value: joined + value, "sessions").to_stream()
     .map(lambda windowed, value: (f"{windowed.key}@{windowed.window.start}-{windowed.window.end}", value))
     .to("out"))
    with TopologyTestDriver(builder.build(), {**CONFIG, "statestore.cache.max.bytes": cache_bytes}) as driver:
        for value, timestamp in (("a", 10), ("b", 20), ("c", 15), ("d", 40), ("e", 12), ("f", 3)):
            driver.pipe_input("in", "k", value, timestamp)
        # c (15) bridges [10] and [20]; d (40) starts a session; e (12) is late but [10, 20] has not closed
        # (40 - 20 grace - 5 gap = 15); f (3) would make a session [3, 3], closed: dropped. e replaces [10, 20]
        # with itself: without the cache a tombstone and the new value go out, with it (flushed after the
        # record, as the driver commits) only the new value
        replaced = [("k@10-20", None, 20)] if cache_bytes == 0 else []
        assert driver.read_output("out") == [
            ("k@10-10", "a", 10), ("k@20-20", "b", 20), ("k@10-10", None, 10), ("k@20-20", None, 20),
            ("k@10-20", "abc", 20), ("k@40-40", "d", 40), *replaced, ("k@10-20", "abce", 20)]


def test_stream_left_join_emits_the_unjoined_after_the_window_and_global_join_looks_up_any_key() -> None:
    builder = StreamsBuilder()
    left, right = builder.stream("left"), builder.stream("right")
    left.left_join(right, lambda a, b: f"{a}+{b}", JoinWindows.of_time_difference_and_grace(5, 0)).to("joined")
    countries = builder.global_table("countries")
    left.join(countries, lambda key, value: value.split("@")[1], lambda value, country: f"{value} in {country}").to(
        "located")
    with TopologyTestDriver(builder.build(), CONFIG) as driver:
        driver.pipe_input("countries", "fr", "France", 0)
        driver.pipe_input("left", "k", "a@fr", 10)
        driver.pipe_input("right", "k", "b", 12)  # joins a (2 ms apart)
        driver.pipe_input("left", "k", "c@fr", 30)  # nothing to join yet: held until 30 + 5
        driver.pipe_input("left", "j", "d@de", 40)  # stream time 40: c's window has closed
        assert driver.read_output("joined") == [("k", "a@fr+b", 12), ("k", "c@fr+None", 30)]
        # the global table is keyed by country: any record finds any key (no co-partitioning); "de" has none
        assert driver.read_output("located") == [("k", "a@fr in France", 10), ("k", "c@fr in France", 30)]


def test_processor_api_with_a_state_store() -> None:
    """A Processor of one's own beside the DSL: it keeps the last value per key in a store it is connected to and
    forwards the previous one."""

    class Previous(Processor):
        def process(self, record: Record) -> None:
            store = self.context.get_state_store("last")
            previous = store.get(record.key)
            store.put(record.key, record.value, record.timestamp)
            self.context.forward(record.with_value(f"{previous}->{record.value}"))

    topology = (Topology().add_source("source", "in").add_processor("previous", Previous, "source")
                .add_state_store(StoreBuilder("last"), "previous").add_sink("sink", "out", "previous"))
    assert str(topology.describe()) == (
        "Topologies:\n   Sub-topology: 0\n"
        "    Source: source (topics: [in])\n      --> previous\n"
        "    Processor: previous (stores: [last])\n      --> sink\n      <-- source\n"
        "    Sink: sink (topic: out)\n      <-- previous\n\n")
    with TopologyTestDriver(topology, CONFIG) as driver:
        for value in ("a", "b", "c"):
            driver.pipe_input("in", "k", value, 1)
        assert [value for _, value, _ in driver.read_output("out")] == ["None->a", "a->b", "b->c"]
        assert driver.read_output("test-driver-last-changelog") == [("k", "a", 1), ("k", "b", 1), ("k", "c", 1)]


def test_foreign_key_join_drops_answers_for_replaced_values() -> None:
    """An answer on the response topic carries the hash of the order value its subscription was sent for: one for
    a value since replaced is stale and dropped, one for the current value is joined (the answers are the bytes
    Kafka writes there)."""
    with TopologyTestDriver(foreign_key_joins("in", "out"), CONFIG) as driver:
        driver.pipe_input("in-customers", "c1", "alice", 1)
        driver.pipe_input("in-orders", "o1", "c1:apple", 2)
        assert driver.read_output("out") == [("o1", "c1:apple+alice", 2)]
        response = "test-driver-KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-0000000015-topic"
        for value, timestamp in (("c1:pear", 3), ("c1:apple", 4)):
            driver.pipe_input(response, b"o1", serialize_response(murmur3_hash128(value.encode()), b"eve"),
                              timestamp, key_serde=Serdes.bytes(), value_serde=Serdes.bytes())
        assert driver.read_output("out") == [("o1", "c1:apple+eve", 4)]


def test_a_named_materialized_foreign_key_join_keeps_its_result_in_its_store() -> None:
    """TableJoined.as_(name) names the join's topics and stores from the name; a materialized join's result is
    kept in its store (a tombstone deletes it) and logged to that store's changelog."""
    with TopologyTestDriver(foreign_key_joins_named("in", "out"), CONFIG) as driver:
        driver.pipe_input("in-customers", "c1", "alice", 1)
        driver.pipe_input("in-orders", "o1", "c1:apple", 2)
        driver.pipe_input("in-orders", "o2", "c2:fig", 3)
        assert driver.read_output("out-totals") == [("o1", "c1:apple+alice", 2), ("o2", "c2:fig+null", 3)]
        joined, unnamed = driver.get_key_value_store("fk-joined"), driver.get_key_value_store("fk-unnamed-joined")
        assert dict(joined.all()) == {"o1": "c1:apple+alice", "o2": "c2:fig+null"}
        assert dict(unnamed.all()) == {"o1": "alice/c1:apple"}
        driver.pipe_input("in-orders", "o1", None, 4)
        assert dict(joined.all()) == {"o2": "c2:fig+null"}
        assert dict(unnamed.all()) == {}
        assert [(key, value) for key, value, _, _ in driver.written["test-driver-fk-joined-changelog"]] == [
            (b"o1", b"c1:apple+alice"), (b"o2", b"c2:fig+null"), (b"o1", None)]
        assert driver.written["test-driver-left-fk-subscription-registration-topic"]


@pytest.mark.parametrize(("difference", "grace"), [(-1, 0), (5, -1)])
def test_sliding_windows_reject_negative_durations(difference: int, grace: int) -> None:
    with pytest.raises(ValueError, match="must not be negative"):
        SlidingWindows.of_time_difference_and_grace(difference, grace)
