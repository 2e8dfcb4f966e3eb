"""kfk.streams beside Apache Kafka Streams 4.4.0 (the oracle, tests/streams/java/StreamsOracle.java): the same
topologies give the same describe() text, and run on the same input topic of a kfk broker they write the same
records (per key, in order where the order is determined), the same changelogs and the same internal topics."""

from __future__ import annotations

import shutil
import time
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor

import pytest
from typer.testing import CliRunner

from kfk.cli import app
from kfk.client import Admin, ConfigResource, ConfigResourceType, NewTopic, Producer
from kfk.client.producer import partition_for_key
from kfk.common.structs import TopicPartition
from kfk.errors import RecordTooLargeError
from kfk.streams import KafkaStreams, Serdes, State
from kfk.streams.errors import ErrorHandlerContext, LogAndContinueProcessingExceptionHandler, Result, StreamsException
from kfk.streams.test_driver import TopologyTestDriver
from kfk.testing.apache_kafka import run_java
from tests.streams.conftest import create_input, read_to_end, read_topic, unique_name
from tests.streams.topologies import TOPOLOGIES

LINES = ["the quick brown fox", "jumps over the lazy dog", "a xylophone and the fox", "", "to be or not to be",
         "the end", "ab", "brown dog barks", "x", "quick quick quick"]
INPUT = [(f"key{index % 4}", line) for index, line in enumerate(LINES)]
#: The windowed topology's input, on one partition (one stream time), out of order: (key, line, timestamp). The
#: records at 1002 and 1013 are late but within the hopping windows' 2 ms grace; the one at 1003 after 1010 is
#: too late for every window it belongs to; the tumbling windows have no grace at all.
WINDOWED_INPUT = [("a", "a1", 1000), ("b", "b1", 1001), ("a", "a2", 1005), ("a", "a3", 1002), ("b", "b2", 1010),
                  ("a", "a4", 1003), ("a", "a5", 1009), ("b", "b3", 1013), ("a", "a6", 1016), ("b", "b4", 1013),
                  ("a", "a7", 1014)]

#: The sliding windows' input, on one partition: (key, line, timestamp). Key c's records come before the time
#: difference (Kafka puts them all in the window [0, difference]); a3 and b2 are late but within the count's 3 ms
#: grace (the reduce has none), a6 is too late for every window it belongs to, a8 comes after a7, inside its
#: right window.
SLIDING_INPUT = [("c", "c1", 1), ("c", "c2", 3), ("a", "a1", 1000), ("b", "b1", 1001), ("a", "a2", 1003),
                 ("a", "a3", 1002), ("a", "a4", 1010), ("b", "b2", 1009), ("a", "a5", 1006), ("a", "a6", 1001),
                 ("a", "a7", 1015), ("a", "a8", 1012), ("b", "b3", 1020)]


def _expected_sliding_windows(difference: int, grace: int) -> dict[str, int]:
    """The sliding count's last value of every window, computed here from the definition: each accepted record at t
    has its window [t - difference, t] (or [0, difference] when t < difference), and a right window
    [t + 1, t + 1 + difference] when a later record of its key falls in that; a window counts the accepted
    records within it. A record is accepted unless its time plus the difference is already before stream time -
    grace; a window that closed (end before stream time - grace) keeps the count it had then."""
    stream_time, accepted = -1, []
    counts: dict[str, int] = {}
    for key, _, timestamp in SLIDING_INPUT:
        stream_time = max(stream_time, timestamp)
        close_time = stream_time - grace
        if timestamp + difference < close_time:
            continue
        accepted.append((key, timestamp))
        times = sorted(t for k, t in accepted if k == key)
        windows = {(max(0, t - difference), max(0, t - difference) + difference) for t in times}
        windows |= {(t + 1, t + 1 + difference) for t in times
                    if any(t < later <= t + 1 + difference for later in times)}
        for start, end in windows:
            if end >= close_time:
                counts[f"{key}@{start}/{end}"] = sum(1 for t in times if start <= t <= end)
    return counts


#: The joins' table (<input>-profiles): (key, profile, timestamp); key3 has none, key1's changes at 1006, between
#: its lines at 1005 and 1009 (processed in timestamp order, the first sees "p1", the second "p1-new").
PROFILES = [("key0", "p0", 500), ("key1", "p1", 501), ("key2", "p2", 502), ("key1", "p1-new", 1006)]


def _expected_joins() -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """The inner and left join computed here: each line joined with its key's latest profile at its time."""
    inner: dict[str, list[str]] = defaultdict(list)
    left: dict[str, list[str]] = defaultdict(list)
    for index, (key, line) in enumerate(INPUT):
        profile = None
        for profile_key, value, timestamp in PROFILES:
            if profile_key == key and timestamp <= 1000 + index:
                profile = value
        left[key].append(f"{line}/{'null' if profile is None else profile}")
        if profile is not None:
            inner[key].append(f"{line}/{profile}")
    return dict(inner), dict(left)


#: The global table (<input>-words) of the joins: a line's first word -> its meaning ("" has none).
WORDS = [("the", "article"), ("jumps", "leaps"), ("to", "toward"), ("ab", "abbreviation"), ("x", "unknown")]


#: The table-table joins' right table (<input>-scores); key3 has no profile, key2 no score.
SCORES = [("key1", "s1", 503), ("key3", "s3", 504), ("key1", "s1b", 1007), ("key0", "s0", 1008)]


def _expected_table_joins() -> dict[str, dict[str, list[str]]]:
    """The inner, left and outer KTable-KTable joins computed here: after each update (in timestamp order) a key's
    result is emitted when the join has a row for it."""
    profiles: dict[str, str] = {}
    scores: dict[str, str] = {}
    results: dict[str, dict[str, list[str]]] = {"inner": defaultdict(list), "left": defaultdict(list),
                                                "outer": defaultdict(list)}
    updates = sorted([(timestamp, "profile", key, value) for key, value, timestamp in PROFILES]
                     + [(timestamp, "score", key, value) for key, value, timestamp in SCORES])
    for _, side, key, value in updates:
        (profiles if side == "profile" else scores)[key] = value
        profile, score = profiles.get(key), scores.get(key)
        joined = f"{profile or 'null'}+{score or 'null'}"
        if profile and score:
            results["inner"][key].append(joined)
        if profile:
            results["left"][key].append(joined)
        results["outer"][key].append(joined)
    return {kind: dict(by_key) for kind, by_key in results.items()}


#: The foreign-key joins' tables, loaded first: customers (<input>-customers) and orders (<input>-orders, whose
#: "customer:item" value holds the foreign key); order o3's customer does not exist.
CUSTOMERS = [("c1", "alice", 500), ("c2", "bob", 501), ("c3", "carol", 502)]
ORDERS = [("o1", "c1:apple", 600), ("o2", "c2:pear", 601), ("o3", "c9:fig", 602), ("o4", "c3:kiwi", 603)]
#: Then one update at a time (table, key, value or None, timestamp), each once both applications have answered the
#: one before: an answer crosses two internal topics, and one for a value replaced meanwhile is dropped (the hash
#: check), so updates in flight together would make the intermediate results depend on timing.
FK_STEPS = [("orders", "o1", "c2:apple", 1001), ("customers", "c2", "bob2", 1005), ("orders", "o2", None, 1002),
            ("customers", "c3", None, 1006), ("orders", "o3", "c1:fig", 1007)]


#: The topologies of foreign-key joins (their inputs and expected results are the same).
FOREIGN_KEY_JOINS = ("fk-joins", "fk-named")


def _expected_fk_joins() -> list[dict[str, list[tuple[str, str | None]]]]:
    """The inner and left foreign-key joins' results, computed here, for the loaded tables and then for each step:
    an update gives the join's new row (or a tombstone) for each order it concerns (the order itself, or the orders
    of the customer), when the order is in the result or was."""
    orders: dict[str, str] = {}
    customers: dict[str, str] = {}
    emitted: dict[str, dict[str, str | None]] = {"inner": {}, "left": {}}
    stages = []
    loaded = ([("customers", key, value) for key, value, _ in CUSTOMERS]
              + [("orders", key, value) for key, value, _ in ORDERS])
    for updates in [loaded] + [[(table, key, value)] for table, key, value, _ in FK_STEPS]:
        results: dict[str, list[tuple[str, str | None]]] = {"inner": [], "left": []}
        for table, key, value in updates:
            rows = orders if table == "orders" else customers
            concerned = [key] if table == "orders" else sorted(order for order, row in orders.items()
                                                                   if row.split(":")[0] == key)
            if value is None:
                rows.pop(key, None)
            else:
                rows[key] = value
            for order in concerned:
                row = orders.get(order)
                customer = None if row is None else customers.get(row.split(":")[0])
                for kind, result in (("inner", None if row is None or customer is None else f"{row}+{customer}"),
                                     ("left", None if row is None else f"{row}+{customer or 'null'}")):
                    if result is not None or emitted[kind].get(order) is not None:
                        results[kind].append((order, result))
                        emitted[kind][order] = result
        stages.append(results)
    return stages


def _feed_fk_steps(bootstrap: str, input_topic: str, outputs: list[str]) -> None:
    """Produce FK_STEPS one at a time, each once every output topic (inner and left join, of both applications)
    has the results of the stages before it."""
    stages = _expected_fk_joins()
    inner = left = 0
    with Producer({"bootstrap.servers": bootstrap}) as producer:
        for stage, (table, key, value, timestamp) in zip(stages, FK_STEPS):
            inner, left = inner + len(stage["inner"]), left + len(stage["left"])
            for output in outputs:
                read_topic(bootstrap, output, inner, timeout=120)
                read_topic(bootstrap, output + "-totals", left, timeout=120)
            producer.send(f"{input_topic}-{table}", None if value is None else value.encode(), key.encode(),
                          timestamp_ms=timestamp)
            producer.flush()


#: The stream-stream join's second stream (<input>-clicks): (key, click, timestamp), joined with the lines of the
#: same key at most 3 ms apart.
CLICKS = [("key0", "c0", 997), ("key1", "c1", 1003), ("key3", "c3", 1004), ("key1", "c1b", 1008),
          ("key2", "c2", 1008), ("key2", "c2-far", 1013)]


def _expected_stream_joins() -> dict[str, list[tuple[str, int]]]:
    """Each pair of a line and a click of one key at most 3 ms apart, emitted when the later of the two arrives
    (records arrive in timestamp order), with the earlier side's records in time order."""
    lines = [(key, line, 1000 + index) for index, (key, line) in enumerate(INPUT)]
    events = sorted([(timestamp, "line", key, value) for key, value, timestamp in lines]
                    + [(timestamp, "click", key, value) for key, value, timestamp in CLICKS])
    seen: dict[str, list[tuple[int, str, str]]] = defaultdict(list)
    results: dict[str, list[tuple[str, int]]] = defaultdict(list)
    for timestamp, side, key, value in events:
        for other_timestamp, other_side, other_value in sorted(seen[key]):
            if other_side != side and abs(other_timestamp - timestamp) <= 3:
                line, click = (value, other_value) if side == "line" else (other_value, value)
                results[key].append((f"{line}&{click}", max(timestamp, other_timestamp)))
        seen[key].append((timestamp, side, value))
    return dict(results)


def _expected_windowed_counts() -> dict[str, list[int]]:
    """The hopping count computed here from the definition: windows [s, s + 4) for s a multiple of 2, closed once
    stream time reaches their end + 2."""
    stream_time, counts, updates = -1, Counter(), defaultdict(list)
    for key, _, timestamp in WINDOWED_INPUT:
        stream_time = max(stream_time, timestamp)
        for start in range(timestamp - timestamp % 2 - 2, timestamp + 1, 2):
            if start <= timestamp < start + 4 and start + 4 > stream_time - 2:
                counts[key, start] += 1
                updates[f"{key}@{start}/{start + 4}"].append(counts[key, start])
    return dict(updates)


def _expected_final_counts() -> dict[str, list[int]]:
    """suppress(until_window_closes) on the hopping count: each window's last count, once, for the windows closed
    by the end (end + 2 ms grace at most the largest timestamp the count accepted), earliest end first per key."""
    updates = _expected_windowed_counts()
    accepted = [timestamp for key, _, timestamp in WINDOWED_INPUT
                if any(start <= timestamp < start + 4 and f"{key}@{start}/{start + 4}" in updates
                       for start in range(timestamp - timestamp % 2 - 2, timestamp + 1, 2))]
    closed_until = max(accepted) - 2
    final: dict[str, list[int]] = defaultdict(list)
    for window, counts in sorted(updates.items(), key=lambda item: int(item[0].split("/")[1])):
        if int(window.split("/")[1]) <= closed_until:
            final[window].append(counts[-1])
    return dict(final)


def _expected_counts_on_window_close() -> dict[str, list[int]]:
    """The hopping count emitting on window close, computed here: after each record, the windows closed by then
    (end + 2 ms grace at most stream time) not emitted yet, each once with its count, earliest start first - but
    only those its store still holds: as Kafka's time-ordered window store, it lets go of the windows that started
    more than size + grace (6 ms) before the latest window start it was given, so a hopping window can be gone by
    the time it closes (Kafka Streams 4.4 then never emits it)."""
    stream_time, latest_start, counts, emitted = -1, -1, Counter(), {}
    for key, _, timestamp in WINDOWED_INPUT:
        stream_time = max(stream_time, timestamp)
        for start in range(timestamp - timestamp % 2 - 2, timestamp + 1, 2):
            if start <= timestamp < start + 4 and start + 4 > stream_time - 2:
                counts[key, start] += 1
                latest_start = max(latest_start, start)
        for (window_key, start), count in sorted(counts.items(), key=lambda item: (item[0][1], item[0][0])):
            window = f"{window_key}@{start}/{start + 4}"
            if start + 4 <= stream_time - 2 and start >= latest_start - 6 and window not in emitted:
                emitted[window] = [count]
    return emitted


def _expected_sessions() -> dict[str, list[int | None]]:
    """The session count (3 ms gap, 2 ms grace) computed here: a record extends or bridges its key's sessions
    within 3 ms of it; the sessions it merges are retracted (None) and the merged one counted; a record whose
    session ended before stream time - 5 is dropped. As Kafka's store, the sessions' store forgets sessions that
    ended 5 ms (its retention: gap + grace) or more before the latest session end it holds."""
    stream_time, latest_end, sessions, updates = -1, -1, defaultdict(list), defaultdict(list)
    for key, _, timestamp in WINDOWED_INPUT:
        stream_time = max(stream_time, timestamp)
        near = sorted((end, start, count) for start, end, count in sessions[key]
                      if end >= max(timestamp - 3, latest_end - 4) and start <= timestamp + 3)
        start = min([timestamp] + [session_start for _, session_start, _ in near])
        end = max([timestamp] + [session_end for session_end, _, _ in near])
        if end < stream_time - 5:
            continue
        if (start, end) != (timestamp, timestamp):
            for session_end, session_start, count in near:
                sessions[key].remove((session_start, session_end, count))
                updates[f"{key}#{session_start}-{session_end}"].append(None)
        count = 1 + sum(count for _, _, count in near)
        sessions[key].append((start, end, count))
        latest_end = max(latest_end, end)
        updates[f"{key}#{start}-{end}"].append(count)
    return dict(updates)


def test_describe_is_kafka_streams_text(streams_oracle) -> None:
    classpath, classes = streams_oracle
    result = run_java("StreamsOracle", ["describe", ",".join(TOPOLOGIES), "lines", "out"], classpath,
                      extra_classpath=[classes])
    assert result.returncode == 0, result.stderr
    java = dict(part.split("\n", 1) for part in result.stdout.split("=== ")[1:])
    for name, build in TOPOLOGIES.items():
        assert str(build("lines", "out").describe()) == java[name], name


def _driver_output_count(name: str, timed: list[tuple[str, str, int]]) -> int:
    """The number of records kfk.streams' topology writes to its output (the test then compares them with Kafka's),
    from the TopologyTestDriver with the record cache off, as the runs: when to stop them, not what is checked."""
    config = {"default.key.serde": "string", "default.value.serde": "string", "statestore.cache.max.bytes": 0}
    with TopologyTestDriver(TOPOLOGIES[name]("in", "out"), config) as driver:
        for key, line, timestamp in timed:
            driver.pipe_input("in", key, line, timestamp)
        return len(driver.read_output("out", value_serde=Serdes.long()))


def _expected_output_count(name: str) -> int:
    if name in FOREIGN_KEY_JOINS:
        return sum(len(stage["inner"]) for stage in _expected_fk_joins())
    if name == "sliding":
        return _driver_output_count(name, SLIDING_INPUT)
    if name == "emit":
        return _driver_output_count(name, WINDOWED_INPUT)
    if name == "windowed":
        return sum(map(len, _expected_windowed_counts().values()))
    if name == "joins":
        return sum(map(len, _expected_joins()[0].values()))
    if name == "table-joins":
        return sum(map(len, _expected_table_joins()["inner"].values()))
    if name == "stream-joins":
        return sum(map(len, _expected_stream_joins().values()))
    words = [word for _, line in INPUT for word in line.lower().split(" ")]
    if name == "stateless":
        return sum(1 for _, line in INPUT if line
                   for word in line.lower().split(" ")
                   if not (word.upper() if len(word) > 3 else f"x:{word}").startswith("x") or len(word) <= 3)
    if name == "wordcount":
        return len(words)
    # table: one update per line, except a tombstone for a key that was never in the filtered table
    return len(INPUT) - 1


def _run_python(name: str, bootstrap: str, application_id: str, input_topic: str, output: str, state_dir: str,
                count: int, totals: int = 0, config: dict | None = None) -> KafkaStreams:
    """Run the topology (with `config` added to the oracle's: every update compared, so the record cache off as on
    the oracle's side) until `count` records are on `output` (and `totals` on `output`-totals)."""
    streams = KafkaStreams(TOPOLOGIES[name](input_topic, output), {
        "application.id": application_id, "bootstrap.servers": bootstrap, "state.dir": state_dir,
        "default.key.serde": "string", "default.value.serde": "string", "commit.interval.ms": 100,
        "statestore.cache.max.bytes": 0, **(config or {})})
    streams.start()
    try:
        read_topic(bootstrap, output, count, timeout=120)
        if totals:
            read_topic(bootstrap, output + "-totals", totals, timeout=120)
    finally:
        assert streams.close()
    assert streams.state is State.NOT_RUNNING and streams.error is None
    return streams


def _by_key(records: list, ordered: bool) -> dict:
    grouped: dict = defaultdict(list)
    for record in records:
        grouped[record.key].append((record.value, record.timestamp) if ordered else record.value)
    return {key: values if ordered else sorted(values, key=repr) for key, values in grouped.items()}


def _last_values(records: list) -> dict:
    return {record.key: (record.value, record.headers) for record in records}


def _internal_topics(admin: Admin, application_id: str) -> dict[str, tuple[int, dict[str, str]]]:
    names = [name for name in admin.list_topics() if name.startswith(application_id + "-")]
    described = admin.describe_topics(names)
    configs = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, name) for name in names])
    result = {}
    for name in names:
        entries = next(entries for resource, entries in configs.items() if resource.name == name)
        explicit = {entry.name: entry.value for entry in entries.values()
                    if entry.source.name == "DYNAMIC_TOPIC_CONFIG"}
        result[name[len(application_id) + 1:]] = (len(described[name].partitions), explicit)
    return result


@pytest.mark.parametrize("name", ["stateless", "wordcount", "table", "windowed", "sliding", "emit", "joins",
                                  "table-joins", "fk-joins", "fk-named", "stream-joins"])
def test_same_output_as_kafka_streams(name: str, streams_oracle, streams_broker, tmp_path) -> None:
    classpath, classes = streams_oracle
    bootstrap = streams_broker.bootstrap_servers
    input_topic = unique_name("lines")
    if name in ("windowed", "sliding", "emit"):
        timed = SLIDING_INPUT if name == "sliding" else WINDOWED_INPUT
        create_input(bootstrap, input_topic, 1, [(key, line) for key, line, _ in timed],
                     [timestamp for _, _, timestamp in timed])
    else:
        create_input(bootstrap, input_topic, 2, INPUT)
    if name == "joins":
        create_input(bootstrap, input_topic + "-words", 2, WORDS)
    if name in ("joins", "table-joins"):
        create_input(bootstrap, input_topic + "-profiles", 2, [(key, value) for key, value, _ in PROFILES],
                     [timestamp for _, _, timestamp in PROFILES])
    if name == "stream-joins":
        create_input(bootstrap, input_topic + "-clicks", 2, [(key, value) for key, value, _ in CLICKS],
                     [timestamp for _, _, timestamp in CLICKS])
    if name == "table-joins":
        create_input(bootstrap, input_topic + "-scores", 2, [(key, value) for key, value, _ in SCORES],
                     [timestamp for _, _, timestamp in SCORES])
    if name in FOREIGN_KEY_JOINS:
        create_input(bootstrap, input_topic + "-customers", 2, [(key, value) for key, value, _ in CUSTOMERS],
                     [timestamp for _, _, timestamp in CUSTOMERS])
        create_input(bootstrap, input_topic + "-orders", 2, [(key, value) for key, value, _ in ORDERS],
                     [timestamp for _, _, timestamp in ORDERS])
    count = _expected_output_count(name)
    totals = sum(len(stage["left"]) for stage in _expected_fk_joins()) if name in FOREIGN_KEY_JOINS else 0
    if name == "emit":
        totals = len(_expected_counts_on_window_close())
    outputs = {side: (unique_name(f"{name}-{side}"), unique_name(f"out-{side}")) for side in ("java", "python")}
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(topic, 2, 1) for _, output in outputs.values()
                             for topic in (output, output + "-totals", output + "-outer")])
    # Both applications run at once (each on its own output topics): the JVM's start-up overlaps Python's run.
    with ThreadPoolExecutor(2) as executor:
        java_app, java_output = outputs["java"]
        java_run = executor.submit(run_java, "StreamsOracle", [
            "run", name, bootstrap, java_app, input_topic, java_output, str(tmp_path / "java"), "at_least_once",
            str(count), str(totals)], classpath, extra_classpath=[classes], timeout=240)
        python_app, python_output = outputs["python"]
        if name in FOREIGN_KEY_JOINS:
            steps = executor.submit(_feed_fk_steps, bootstrap, input_topic, [java_output, python_output])
        _run_python(name, bootstrap, python_app, input_topic, python_output, str(tmp_path / "python"), count,
                    totals)
        result = java_run.result()
        if name in FOREIGN_KEY_JOINS:
            steps.result()
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    # one task per key: the order and timestamps per key are determined
    ordered = name in ("table", "windowed", "sliding", "emit", "joins", *FOREIGN_KEY_JOINS, "table-joins",
                       "stream-joins")
    java_records = read_to_end(bootstrap, java_output)
    python_records = read_to_end(bootstrap, python_output)
    assert _by_key(python_records, ordered) == _by_key(java_records, ordered)
    if name == "wordcount":
        counts = _by_key(python_records, ordered=False)
        assert counts[b"the"] == [int(n).to_bytes(8, "big") for n in range(1, 5)]  # "the" is in four lines
    if name == "windowed":
        assert {key.decode(): [int.from_bytes(value, "big") for value, _ in values]
                for key, values in _by_key(python_records, True).items()} == _expected_windowed_counts()
        python_final = _by_key(read_to_end(bootstrap, python_output + "-outer"), True)
        assert {key.decode(): [int.from_bytes(value, "big") for value, _ in values]
                for key, values in python_final.items() if b"/" in key} == _expected_final_counts()
        assert {key.decode(): [None if value is None else int.from_bytes(value, "big") for value, _ in values]
                for key, values in python_final.items() if b"#" in key} == _expected_sessions()
        # suppressed: each closed session once, with its last count (sessions merged away are not emitted)
        final_sessions = {key.decode().replace("$", "#"): [int.from_bytes(value, "big") for value, _ in values]
                          for key, values in python_final.items() if b"$" in key}
        sessions = _expected_sessions()
        assert final_sessions and all(counts == sessions[key][-1:] for key, counts in final_sessions.items())
        assert python_final == _by_key(read_to_end(bootstrap, java_output + "-outer"), True)
    if name == "joins":
        inner, left = _expected_joins()
        assert {key.decode(): [value.decode() for value, _ in values]
                for key, values in _by_key(python_records, True).items()} == inner
        assert {key.decode(): [value.decode() for value, _ in values]
                for key, values in _by_key(read_to_end(bootstrap, python_output + "-totals"), True).items()} == left
        # the global table join: every line, joined by its first word with the whole table (all partitions)
        meanings = dict(WORDS)
        expected_global: dict[str, list[str]] = defaultdict(list)
        for key, line in INPUT:
            expected_global[key].append(f"{line}={meanings.get(line.split(' ')[0], 'null')}")
        python_global = _by_key(read_to_end(bootstrap, python_output + "-outer"), True)
        assert {key.decode(): [value.decode() for value, _ in values]
                for key, values in python_global.items()} == expected_global
        assert python_global == _by_key(read_to_end(bootstrap, java_output + "-outer"), True)
    if name == "stream-joins":
        assert {key.decode(): [(value.decode(), timestamp) for value, timestamp in values]
                for key, values in _by_key(python_records, True).items()} == _expected_stream_joins()
    if name == "table-joins":
        expected = _expected_table_joins()
        for kind, topic in (("inner", ""), ("left", "-totals"), ("outer", "-outer")):
            assert {key.decode(): [value.decode() for value, _ in values] for key, values
                    in _by_key(read_to_end(bootstrap, python_output + topic), True).items()} == expected[kind], kind
            assert (_by_key(read_to_end(bootstrap, python_output + topic), True)
                    == _by_key(read_to_end(bootstrap, java_output + topic), True)), kind
    if name == "stream-joins":
        for topic in ("-totals", "-outer"):
            assert (_by_key(read_to_end(bootstrap, python_output + topic), True)
                    == _by_key(read_to_end(bootstrap, java_output + topic), True)), topic
        # the left join emitted lines no click joined; the outer join clicks no line joined, too
        left_values = [record.value for record in read_to_end(bootstrap, python_output + "-totals")]
        outer_values = [record.value for record in read_to_end(bootstrap, python_output + "-outer")]
        assert any(value.endswith(b"&null") for value in left_values)
        assert any(value.startswith(b"null&") for value in outer_values)
    if name == "sliding":
        counts = {key.decode(): int.from_bytes(values[-1][0], "big")
                  for key, values in _by_key(python_records, True).items()}
        assert counts == _expected_sliding_windows(5, 3)
        assert any(key.startswith("c@0/") for key in counts)  # the records before the time difference
        # suppressed: the windows closed by the end (end + grace at most the last record's time), ending with their
        # final count. As in Kafka, a window is emitted once stream time reaches end + grace, while the aggregation
        # still updates a window whose end is stream time - grace (its end is inclusive): it is emitted again.
        final = _by_key(read_to_end(bootstrap, python_output + "-outer"), True)
        last_time = max(timestamp for _, _, timestamp in SLIDING_INPUT)
        assert final == _by_key(read_to_end(bootstrap, java_output + "-outer"), True)
        assert {key.decode(): int.from_bytes(values[-1][0], "big") for key, values in final.items()} \
            == {key: count for key, count in counts.items() if int(key.split("/")[1]) + 3 <= last_time}
    if name in FOREIGN_KEY_JOINS:
        for kind, topic in (("inner", python_output), ("left", python_output + "-totals")):
            expected: dict[str, list[str | None]] = defaultdict(list)
            for stage in _expected_fk_joins():
                for key, value in stage[kind]:
                    expected[key].append(value)
            assert {key.decode(): [None if value is None else value.decode() for value, _ in values]
                    for key, values in _by_key(read_to_end(bootstrap, topic), True).items()} == expected, kind
    if name == "fk-named":
        # the unnamed materialized inner join, its joiner writing customer/order: the inner join's rows
        expected_outer: dict[str, list[str | None]] = defaultdict(list)
        for stage in _expected_fk_joins():
            for key, value in stage["inner"]:
                expected_outer[key].append(None if value is None else "/".join(reversed(value.split("+"))))
        python_outer = _by_key(read_to_end(bootstrap, python_output + "-outer"), True)
        assert {key.decode(): [None if value is None else value.decode() for value, _ in values]
                for key, values in python_outer.items()} == expected_outer
        assert python_outer == _by_key(read_to_end(bootstrap, java_output + "-outer"), True)
    if name == "emit":
        # on window close: the hopping count's closed windows, each once with its final count (those its store
        # still held); the sliding reduction's and the session count's closed windows, as Kafka's
        final_counts = {key.decode(): [int.from_bytes(value, "big") for value, _ in values] for key, values
                        in _by_key(read_to_end(bootstrap, python_output + "-totals"), True).items()}
        assert final_counts == _expected_counts_on_window_close()
        assert all(counts == _expected_final_counts()[window] for window, counts in final_counts.items())
        final_outer = _by_key(read_to_end(bootstrap, python_output + "-outer"), True)
        assert final_outer and all(len(values) == 1 for values in final_outer.values())
        assert final_outer == _by_key(read_to_end(bootstrap, java_output + "-outer"), True)
        # the sessions: each closed one (end + 3 ms gap + 2 ms grace before the last stream time) with its final
        # count, none of those merged away
        last_time = max(timestamp for _, _, timestamp in WINDOWED_INPUT)
        assert {key.decode(): [int.from_bytes(value, "big") for value, _ in values]
                for key, values in final_outer.items() if b"#" in key} == {
            session: counts[-1:] for session, counts in _expected_sessions().items()
            if counts[-1] is not None and int(session.split("-")[1]) + 5 < last_time}
    if name in ("table", "windowed", "sliding", "emit", "joins", *FOREIGN_KEY_JOINS):
        assert (_by_key(read_to_end(bootstrap, python_output + "-totals"), True)
                == _by_key(read_to_end(bootstrap, java_output + "-totals"), True))
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        internal = _internal_topics(admin, java_app)
        assert _internal_topics(admin, python_app) == internal
    for topic in internal:
        if "SUPPRESS" in topic or topic.startswith("final-lines"):
            # suppress()'s buffer writes its changelog on commit with the wall-clock time: the records a commit
            # carries and their timestamps vary, what each key ends as does not
            assert (_last_values(read_to_end(bootstrap, f"{python_app}-{topic}"))
                    == _last_values(read_to_end(bootstrap, f"{java_app}-{topic}"))), topic
        elif topic.startswith("KTABLE-FK-JOIN-SUBSCRIPTION-") or "-subscription-" in topic:
            # the subscriptions and answers as Kafka writes them (SubscriptionWrapper, SubscriptionResponseWrapper)
            assert (_by_key(read_to_end(bootstrap, f"{python_app}-{topic}"), True)
                    == _by_key(read_to_end(bootstrap, f"{java_app}-{topic}"), True)), topic
        elif topic.endswith("-changelog"):
            java_changelog = read_to_end(bootstrap, f"{java_app}-{topic}")
            python_changelog = read_to_end(bootstrap, f"{python_app}-{topic}")
            assert _by_key(python_changelog, ordered) == _by_key(java_changelog, ordered), topic


#: The "fk-partitioned" topology's tables, each written to partition len(key) % 2 (not where the default
#: partitioner puts the key): (key, value, timestamp). The customers come first in time, so an answer's timestamp
#: (the later of the order's and the customer's) does not depend on which was processed first.
PARTITIONED_CUSTOMERS = [("c1", "alice", 500), ("cus2", "bob", 501), ("c33", "carol", 502)]
PARTITIONED_ORDERS = [("o1", "c1:apple", 600), ("ord2", "cus2:pear", 601), ("o33", "c33:fig", 602),
                      ("o4", "c33:kiwi", 603), ("order5", "c9:none", 604), ("o6", "cus2:plum", 605)]


def test_foreign_key_join_of_tables_partitioned_otherwise_as_kafka_streams(streams_oracle, streams_broker,
                                                                          tmp_path) -> None:
    """TableJoined.with_(partitioner, other_partitioner): tables written by key length, a foreign-key join told
    so; kfk.streams and Kafka Streams join every order with its customer (computed here), which the default
    partitioners would not: the subscriptions would go to partitions where the customers are not."""
    classpath, classes = streams_oracle
    bootstrap = streams_broker.bootstrap_servers
    input_topic = unique_name("lines")
    outputs = {side: (unique_name(f"fk-partitioned-{side}"), unique_name(f"out-{side}")) for side in ("java", "python")}
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        topics = [input_topic, f"{input_topic}-orders", f"{input_topic}-customers",
                  *(output for _, output in outputs.values())]
        assert all(error is None for error in admin.create_topics([NewTopic(topic, 2, 1) for topic in topics]).values())
    with Producer({"bootstrap.servers": bootstrap}) as producer:
        for table, rows in (("customers", PARTITIONED_CUSTOMERS), ("orders", PARTITIONED_ORDERS)):
            for key, value, timestamp in rows:
                producer.send(f"{input_topic}-{table}", value.encode(), key.encode(), partition=len(key) % 2,
                              timestamp_ms=timestamp)
        producer.flush()
    customers = {key: (value, timestamp) for key, value, timestamp in PARTITIONED_CUSTOMERS}
    expected = {order.encode(): [(f"{row}+{customers[row.split(':')[0]][0]}".encode(),
                                  max(timestamp, customers[row.split(':')[0]][1]))]
                for order, row, timestamp in PARTITIONED_ORDERS if row.split(":")[0] in customers}
    # the default partitioner would send some subscriptions where their customer is not
    assert any(partition_for_key(customer.encode(), 2) != len(customer) % 2 for customer in customers)
    with ThreadPoolExecutor(1) as executor:
        java_app, java_output = outputs["java"]
        java_run = executor.submit(run_java, "StreamsOracle", [
            "run", "fk-partitioned", bootstrap, java_app, input_topic, java_output, str(tmp_path / "java"),
            "at_least_once", str(len(expected))], classpath, extra_classpath=[classes], timeout=240)
        python_app, python_output = outputs["python"]
        _run_python("fk-partitioned", bootstrap, python_app, input_topic, python_output, str(tmp_path / "python"),
                    len(expected))
        result = java_run.result()
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    assert _by_key(read_to_end(bootstrap, python_output), True) == expected
    assert _by_key(read_to_end(bootstrap, java_output), True) == expected


#: The record cache's differential: Kafka's default cache, and a commit interval long enough for both applications
#: to have processed all of the (small) input before their first commit flushes the cache.
CACHED = (10 * 1024 * 1024, 10_000)


@pytest.mark.parametrize("name", ["wordcount", "table", "windowed"])
def test_same_last_values_as_kafka_streams_with_the_record_cache(name: str, streams_oracle, streams_broker,
                                                                 tmp_path) -> None:
    """With the record cache on, both write each key's latest value at the commit instead of every update: the
    outputs are the same records (and the changelogs end with the same value for every key), the word count's
    the counts computed here, in fewer records than updates."""
    classpath, classes = streams_oracle
    bootstrap = streams_broker.bootstrap_servers
    input_topic = unique_name("lines")
    if name == "windowed":
        create_input(bootstrap, input_topic, 1, [(key, line) for key, line, _ in WINDOWED_INPUT],
                     [timestamp for _, _, timestamp in WINDOWED_INPUT])
    else:
        create_input(bootstrap, input_topic, 2, INPUT)
    outputs = {side: (unique_name(f"cached-{name}-{side}"), unique_name(f"cached-out-{side}"))
               for side in ("java", "python")}
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(topic, 2, 1) for _, output in outputs.values()
                             for topic in (output, output + "-totals", output + "-outer")])
    cache_bytes, commit_interval_ms = CACHED
    with ThreadPoolExecutor(1) as executor:
        java_app, java_output = outputs["java"]
        java_run = executor.submit(run_java, "StreamsOracle", [
            "run", name, bootstrap, java_app, input_topic, java_output, str(tmp_path / "java"), "at_least_once",
            "1", "0", str(cache_bytes), str(commit_interval_ms)], classpath, extra_classpath=[classes], timeout=240)
        python_app, python_output = outputs["python"]
        _run_python(name, bootstrap, python_app, input_topic, python_output, str(tmp_path / "python"), 1,
                    config={"statestore.cache.max.bytes": cache_bytes, "commit.interval.ms": commit_interval_ms})
        result = java_run.result()
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    for suffix in ("", "-totals", "-outer"):
        python_records = read_to_end(bootstrap, python_output + suffix)
        java_records = read_to_end(bootstrap, java_output + suffix)
        assert _last_values(python_records) == _last_values(java_records), suffix
        # all of the input is processed before the first commit: its flush sends the same records on both sides
        assert _by_key(python_records, True) == _by_key(java_records, True), suffix
    python_records = read_to_end(bootstrap, python_output)
    if name == "wordcount":
        words = [word for _, line in INPUT for word in line.lower().split(" ")]
        assert {key.decode(): int.from_bytes(value, "big") for key, (value, _) in _last_values(python_records).items()
                } == dict(Counter(words))
        assert len(python_records) < len(words)
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        internal = _internal_topics(admin, java_app)
        assert _internal_topics(admin, python_app) == internal
    for topic in internal:
        if topic.endswith("-changelog"):
            assert (_last_values(read_to_end(bootstrap, f"{python_app}-{topic}"))
                    == _last_values(read_to_end(bootstrap, f"{java_app}-{topic}"))), topic


def test_kafka_streams_reset_tool_resets_a_kfk_streams_application(streams_broker, tmp_path) -> None:
    """Kafka's kafka-streams-application-reset.sh finds a kfk.streams application's group and internal topics
    (they are named as Kafka Streams names them): it rewinds the input and deletes the internal topics, and the
    application then computes its output again from the beginning."""
    bootstrap = streams_broker.bootstrap_servers
    input_topic, output, application_id = unique_name("lines"), unique_name("counts"), unique_name("reset")
    create_input(bootstrap, input_topic, 2, INPUT[:3])
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(output, 2, 1)])
    words = [word for _, line in INPUT[:3] for word in line.lower().split(" ")]
    _run_python("wordcount", bootstrap, application_id, input_topic, output, str(tmp_path / "state"), len(words))
    result = run_java("org.apache.kafka.tools.StreamsResetter", [
        "--bootstrap-server", bootstrap, "--application-id", application_id, "--input-topics", input_topic])
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    # the tool lists partitions and topics in no particular order
    lines[2:4] = sorted(lines[2:4])
    prefix, _, topics = lines[5].partition("[")
    lines[5] = prefix + "[" + ", ".join(sorted(topics.rstrip("]").split(", "))) + "]"
    assert lines == [
        f"Reset-offsets for input topics [{input_topic}]",
        f"Following input topics offsets will be reset to (for consumer group {application_id})",
        f"Topic: {input_topic} Partition: 0 Offset: 0", f"Topic: {input_topic} Partition: 1 Offset: 0", "Done.",
        f"Deleting inferred internal topics [{application_id}-counts-changelog, "
        f"{application_id}-counts-repartition]", "Done."]
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        assert not [name for name in admin.list_topics() if name.startswith(application_id)]
    shutil.rmtree(tmp_path / "state")  # what the reset tool leaves to KafkaStreams.cleanUp()
    _run_python("wordcount", bootstrap, application_id, input_topic, output, str(tmp_path / "state"),
                2 * len(words))
    counts = _by_key(read_to_end(bootstrap, output), ordered=True)
    for word, total in Counter(words).items():
        once = [int(n).to_bytes(8, "big") for n in range(1, total + 1)]
        assert [value for value, _ in counts[word.encode()]] == once + once, word
    # kfk streams reset does the same, with the same lines (a dry run first changes nothing)
    arguments = ["streams", "reset", "--bootstrap-server", bootstrap, "--application-id", application_id,
                 "--input-topics", input_topic]
    dry = CliRunner().invoke(app, [*arguments, "--dry-run"], catch_exceptions=False)
    assert dry.exit_code == 0 and dry.output.splitlines()[1:] == lines, dry.output
    result = CliRunner().invoke(app, arguments, catch_exceptions=False)
    assert result.exit_code == 0 and result.output.splitlines() == lines, result.output
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        assert not [name for name in admin.list_topics() if name.startswith(application_id)]
    shutil.rmtree(tmp_path / "state")
    _run_python("wordcount", bootstrap, application_id, input_topic, output, str(tmp_path / "state"),
                3 * len(words))
    counts = _by_key(read_to_end(bootstrap, output), ordered=True)
    for word, total in Counter(words).items():
        assert [value for value, _ in counts[word.encode()]] == [int(n).to_bytes(8, "big")
                                                                 for n in range(1, total + 1)] * 3, word


#: The "errors" topology's input: integers (4 bytes, big-endian), and every sixth value 3 bytes long, which the
#: Integer serde refuses.
ERRORS_INPUT = [(f"key{index % 4}", index.to_bytes(3 if index % 6 == 4 else 4, "big")) for index in range(30)]


def _errors_failure(value: bytes) -> str | None:
    """Which handler the "errors" topology calls for a value, if any (as tests/streams/topologies.errors)."""
    if len(value) != 4:
        return "deserialization"
    number = int.from_bytes(value, "big")
    if number % 5 == 3:
        return "processing"
    return "production" if number * 10 % 7 == 6 else None


def _committed(bootstrap: str, group: str, topic: str) -> dict[TopicPartition, int]:
    """The group's committed offset of each partition of `topic` (0 where it has none)."""
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        committed = admin.list_consumer_group_offsets(group)
        partitions = admin.describe_topics([topic])[topic].partitions
    return {TopicPartition(topic, index): committed[TopicPartition(topic, index)].offset
            if TopicPartition(topic, index) in committed else 0 for index in range(len(partitions))}


def _produce(bootstrap: str, topic: str, records: list[tuple[str, bytes]], first_timestamp: int
             ) -> dict[TopicPartition, int]:
    """Write `records` (key, value); returns each partition's end offset after them."""
    with Producer({"bootstrap.servers": bootstrap}) as producer:
        futures = [producer.send(topic, value, key.encode(), timestamp_ms=first_timestamp + index)
                   for index, (key, value) in enumerate(records)]
        producer.flush()
    ends: dict[TopicPartition, int] = {}
    for future in futures:
        written = future.result(0)
        partition = TopicPartition(topic, written.partition)
        ends[partition] = max(ends.get(partition, 0), written.offset + 1)
    return ends


def test_exception_handlers_as_kafka_streams(streams_oracle, streams_broker, tmp_path) -> None:
    """A value the source serde refuses, one the processing step raises on and one larger than the producer's
    max.request.size: with continue handlers (Kafka's LogAndContinue ones, and a production handler skipping
    RecordTooLargeException) kfk.streams writes what Apache Kafka Streams writes, each record that got through, and
    counts the others as dropped. With Kafka's default handlers, both applications, having committed the good
    records they were given first, go to ERROR on a record too large to send, without committing past it."""
    classpath, classes = streams_oracle
    bootstrap = streams_broker.bootstrap_servers
    input_topic, fail_input = unique_name("numbers"), unique_name("numbers-fail")
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        assert all(error is None for error in admin.create_topics(
            [NewTopic(input_topic, 2, 1), NewTopic(fail_input, 2, 1)]).values())
    _produce(bootstrap, input_topic, ERRORS_INPUT, 1000)
    good = [(key, value) for key, value in ERRORS_INPUT if _errors_failure(value) is None]
    prefix_ends = _produce(bootstrap, fail_input, good, 1000)
    assert len(prefix_ends) == 2
    expected: dict[bytes, list[tuple[bytes, int]]] = defaultdict(list)
    for index, (key, value) in enumerate(ERRORS_INPUT):
        if _errors_failure(value) is None:
            expected[key.encode()].append((str(int.from_bytes(value, "big") * 10).encode(), 1000 + index))
    count = sum(map(len, expected.values()))
    assert {_errors_failure(value) for _, value in ERRORS_INPUT} == {None, "deserialization", "processing",
                                                                     "production"}
    apps = {run: (unique_name(f"errors-{run}"), unique_name(f"out-{run}"))
            for run in ("java", "python", "java-fail", "python-fail")}
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(output, 2, 1) for _, output in apps.values()])

    def too_large_is_skipped(context: ErrorHandlerContext, record, exception: Exception) -> Result:
        return Result.RESUME if isinstance(exception, RecordTooLargeError) else Result.FAIL

    continuing = {"deserialization.exception.handler": "org.apache.kafka.streams.errors.LogAndContinueExceptionHandler",
                  "processing.exception.handler": LogAndContinueProcessingExceptionHandler,
                  "production.exception.handler": too_large_is_skipped}
    size_limit = {"producer.max.request.size": 10_000}  # as the Java oracle's "errors" topology sets it
    with ThreadPoolExecutor(2) as executor:
        java_runs = {run: executor.submit(run_java, "StreamsOracle", [
            "run", "errors" + run[len("java"):], bootstrap, apps[run][0], topic, apps[run][1],
            str(tmp_path / run), "at_least_once", str(count)], classpath, extra_classpath=[classes], timeout=240)
            for run, topic in (("java", input_topic), ("java-fail", fail_input))}
        failing_app, failing_output = apps["python-fail"]
        failing = KafkaStreams(TOPOLOGIES["errors"](fail_input, failing_output), {
            "application.id": failing_app, "bootstrap.servers": bootstrap, "state.dir": str(tmp_path / "failing"),
            "default.key.serde": "string", "default.value.serde": "string", "commit.interval.ms": 100, **size_limit})
        failing.start()
        try:
            python_app, python_output = apps["python"]
            streams = _run_python("errors", bootstrap, python_app, input_topic, python_output,
                                  str(tmp_path / "python"), count, config={**continuing, **size_limit})
            # the failing applications first commit the good records; then come one too large to send (10 * 2 is
            # 6 modulo 7) and a good one of the same key (partition) after it
            deadline = time.monotonic() + 120
            while any(_committed(bootstrap, apps[run][0], fail_input) != prefix_ends
                      for run in ("java-fail", "python-fail")):
                assert time.monotonic() < deadline, "the good records were not committed"
                assert not java_runs["java-fail"].done(), java_runs["java-fail"].result().stdout
                time.sleep(0.2)
            _produce(bootstrap, fail_input, [("key1", (2).to_bytes(4, "big")), ("key1", (1).to_bytes(4, "big"))],
                     2000)
            assert failing.wait_for_state(State.ERROR, timeout=120) is State.ERROR
        finally:
            failing.close()
        results = {run: future.result() for run, future in java_runs.items()}
    for run, result in results.items():
        assert result.returncode == 0, run + result.stdout + result.stderr[-3000:]
    assert '"state": "ERROR"' in results["java-fail"].stdout
    python_records = _by_key(read_to_end(bootstrap, python_output), True)
    assert python_records == expected
    assert python_records == _by_key(read_to_end(bootstrap, apps["java"][1]), True)
    dropped = sum(1 for _, value in ERRORS_INPUT if _errors_failure(value) is not None)
    assert streams.metrics()["dropped-records-total"] == dropped
    # as in Kafka, the failed send stops the next one (the good record after it), in the processor above the sink
    assert isinstance(failing.error, StreamsException) and isinstance(failing.error.__cause__, StreamsException)
    assert str(failing.error.__cause__).endswith(
        "Exception handler choose to FAIL the processing, no more records would be sent.")
    assert isinstance(failing.error.__cause__.__cause__, RecordTooLargeError)
    for run in ("java-fail", "python-fail"):
        assert _committed(bootstrap, apps[run][0], fail_input) == prefix_ends, run
