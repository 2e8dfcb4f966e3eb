"""Two instances of one application on kfk (one stream thread, then two more), three partitions: the second
instance joins while the first is processing, the group moves tasks between them (the first commits and
checkpoints what it gives up, the second restores the moved stores from their changelogs), and the word counts
come out exactly as computed here, as do a windowed count with late records, its final results and a stream-stream
join; and interactive queries find the instance that holds a key."""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from random import Random

from kfk.client import Admin, NewTopic, Producer
from kfk.streams import (BufferConfig, HostInfo, JoinWindows, KafkaStreams, Serdes, State, StreamsBuilder,
                         Suppressed, TimeWindows, Topology)
from kfk.streams.errors import StreamsException
from tests.streams.conftest import create_input, read_to_end, read_topic, unique_name
from tests.streams.topologies import foreign_key_joins, wordcount

WORDS = ["red", "green", "blue", "cyan", "magenta", "yellow", "black"]


def _lines(start: int, count: int) -> list[tuple[str, str]]:
    return [(f"k{index}", " ".join(WORDS[(index + offset) % len(WORDS)] for offset in range(index % 3 + 1)))
            for index in range(start, start + count)]


def _wordcount_application(bootstrap: str, partitions: int, lines: list[tuple[str, str]], prefix: str
                           ) -> tuple[str, str, str]:
    """A word count's input topic (holding `lines`) and output topic, of `partitions` partitions each, and its
    application id."""
    input_topic, output, application_id = unique_name("lines"), unique_name("counts"), unique_name(prefix)
    create_input(bootstrap, input_topic, partitions, lines)
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(output, partitions, 1)])
    return input_topic, output, application_id


def _wordcount_instance(bootstrap: str, directory, input_topic: str, output: str, application_id: str,
                        **config: object) -> KafkaStreams:
    """One instance of that word count, its state in `directory`, with `config` added (dots written as _)."""
    return KafkaStreams(wordcount(input_topic, output), {
        "application.id": application_id, "bootstrap.servers": bootstrap, "state.dir": str(directory),
        "default.key.serde": "string", "default.value.serde": "string", "commit.interval.ms": 100,
        # every update of the counts is checked: the record cache off, as Kafka users turn it off for that
        "statestore.cache.max.bytes": 0, **{key.replace("_", "."): value for key, value in config.items()}})


def _assert_every_count_once(bootstrap: str, output: str, words: Counter) -> None:
    """The word count's output holds each word's counts 1, 2, ... its total, each once and in order."""
    counts: dict[str, list[int]] = defaultdict(list)
    for record in read_to_end(bootstrap, output):
        counts[record.key.decode()].append(int.from_bytes(record.value, "big"))
    assert counts == {word: list(range(1, total + 1)) for word, total in words.items()}


def test_two_instances_share_the_tasks(streams_broker, tmp_path) -> None:
    bootstrap = streams_broker.bootstrap_servers
    first_half, second_half = _lines(0, 150), _lines(150, 150)
    input_topic, output, application_id = _wordcount_application(bootstrap, 3, first_half, "wc2")

    def instance(name: str, threads: int) -> KafkaStreams:
        return _wordcount_instance(bootstrap, tmp_path / name, input_topic, output, application_id,
                                   num_stream_threads=threads)

    words = [word for _, line in first_half + second_half for word in line.split()]
    first, second = instance("first", 1), instance("second", 2)
    first.start()
    try:
        assert first.wait_for_state(State.RUNNING, State.ERROR) is State.RUNNING, first.error
        read_topic(bootstrap, output, 10)
        second.start()
        with Producer({"bootstrap.servers": bootstrap}) as producer:
            for key, line in second_half:
                producer.send(input_topic, line.encode(), key.encode())
        read_topic(bootstrap, output, len(words))
        assert second.wait_for_state(State.RUNNING, State.ERROR) is State.RUNNING, second.error
        threads = [thread for streams in (first, second) for thread in streams._threads]
        assert len(threads) == 3 and all(thread.tasks for thread in threads), "each thread runs some of the tasks"
        assert sorted(str(task) for thread in threads for task in thread.tasks) == [
            "0_0", "0_1", "0_2", "1_0", "1_1", "1_2"]
    finally:
        assert first.close() and second.close()
    assert first.error is None and second.error is None
    _assert_every_count_once(bootstrap, output, Counter(words))


def test_a_processor_that_raises_stops_the_application_in_error(streams_broker, tmp_path) -> None:
    """An exception in user code ends the stream thread (the default processing.exception.handler,
    LogAndFailProcessingExceptionHandler); the instance goes to ERROR and keeps the exception, a StreamsException
    caused by the user's, as Kafka Streams' (the records it had not committed are processed again by the next
    run)."""
    bootstrap = streams_broker.bootstrap_servers
    input_topic = unique_name("lines")
    create_input(bootstrap, input_topic, 1, [("k", "fine"), ("k", "boom")])

    def check(line: str) -> str:
        if line == "boom":
            raise ValueError("cannot handle boom")
        return line

    builder = StreamsBuilder()
    builder.stream(input_topic).map_values(check).to(unique_name("out"))
    streams = KafkaStreams(builder.build(), {"application.id": unique_name("fails"), "bootstrap.servers": bootstrap,
                                             "state.dir": str(tmp_path), "default.value.serde": "string"})
    streams.start()
    assert streams.wait_for_state(State.ERROR) is State.ERROR
    assert isinstance(streams.error, StreamsException)
    assert isinstance(streams.error.__cause__, ValueError) and str(streams.error.__cause__) == "cannot handle boom"
    assert streams.close()
    assert streams.state is State.ERROR


def _last_values(bootstrap: str, topic: str) -> dict[str, str]:
    """Each key's last value on `topic`, tombstones (and keys never written) left out."""
    last: dict[str, str | None] = {}
    for record in read_to_end(bootstrap, topic):
        last[record.key.decode()] = None if record.value is None else record.value.decode()
    return {key: value for key, value in last.items() if value is not None}


def test_two_instances_join_on_foreign_keys(streams_broker, tmp_path) -> None:
    """The foreign-key joins on two instances, three partitions: orders subscribe to their customers across the
    instances while tasks move between them, customers change and go away, orders change customer; each order ends
    joined with its customer's last value exactly as computed here (inner: only while the customer exists; left:
    with "null" when it does not)."""
    bootstrap = streams_broker.bootstrap_servers
    input_topic, output, application_id = unique_name("lines"), unique_name("fk-out"), unique_name("fk2")
    customers = [(f"c{index}", f"name{index}") for index in range(40)]
    orders = [(f"o{index}", f"c{index * 7 % 45}:item{index}") for index in range(120)]
    create_input(bootstrap, input_topic, 3, [])
    create_input(bootstrap, input_topic + "-customers", 3, customers)
    create_input(bootstrap, input_topic + "-orders", 3, orders[:60])
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(output, 3, 1), NewTopic(output + "-totals", 3, 1)])
    # later: the other orders, customers renamed or deleted, orders moved to another customer or deleted
    updates = ([("-orders", key, value) for key, value in orders[60:]]
               + [("-customers", f"c{index}", None if index % 5 == 0 else f"new{index}") for index in range(0, 40, 3)]
               + [("-orders", f"o{index}", None if index % 4 == 0 else f"c{index % 13}:moved{index}")
                  for index in range(0, 120, 7)])
    final_orders, final_customers = dict(orders), dict(customers)
    for table, key, value in updates:
        rows = final_orders if table == "-orders" else final_customers
        if value is None:
            rows.pop(key, None)
        else:
            rows[key] = value
    expected_inner, expected_left = {}, {}
    for key, order in final_orders.items():
        customer = final_customers.get(order.split(":")[0])
        expected_left[key] = f"{order}+{customer or 'null'}"
        if customer is not None:
            expected_inner[key] = f"{order}+{customer}"

    def instance(name: str, threads: int) -> KafkaStreams:
        return KafkaStreams(foreign_key_joins(input_topic, output), {
            "application.id": application_id, "bootstrap.servers": bootstrap, "state.dir": str(tmp_path / name),
            "default.key.serde": "string", "default.value.serde": "string", "commit.interval.ms": 100,
            "num.stream.threads": threads, "statestore.cache.max.bytes": 0})  # every update is counted

    first, second = instance("first", 1), instance("second", 1)
    first.start()
    try:
        assert first.wait_for_state(State.RUNNING, State.ERROR) is State.RUNNING, first.error
        read_topic(bootstrap, output + "-totals", 10)
        second.start()
        with Producer({"bootstrap.servers": bootstrap}) as producer:
            for table, key, value in updates:
                producer.send(input_topic + table, None if value is None else value.encode(), key.encode())
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and (_last_values(bootstrap, output) != expected_inner
                                               or _last_values(bootstrap, output + "-totals") != expected_left):
            time.sleep(0.5)
        assert second.wait_for_state(State.RUNNING, State.ERROR) is State.RUNNING, second.error
        assert all(thread.tasks for streams in (first, second) for thread in streams._threads)
    finally:
        assert first.close() and second.close()
    assert first.error is None and second.error is None
    assert _last_values(bootstrap, output) == expected_inner
    assert _last_values(bootstrap, output + "-totals") == expected_left


def test_each_instance_knows_which_instance_holds_a_key(streams_broker, tmp_path) -> None:
    """Interactive queries across instances: with application.server set, both instances answer, for every word,
    the same host (the one whose counts store has the word) and partition; metadata_for_all_stream_clients lists
    both hosts and the stores their tasks hold."""
    bootstrap = streams_broker.bootstrap_servers
    lines = _lines(0, 120)
    input_topic, output, application_id = _wordcount_application(bootstrap, 4, lines, "iq")
    hosts = {"first": HostInfo("127.0.0.1", 7071), "second": HostInfo("127.0.0.1", 7072)}

    def instance(name: str) -> KafkaStreams:
        return _wordcount_instance(bootstrap, tmp_path / name, input_topic, output, application_id,
                                   application_server=str(hosts[name]))

    words = Counter(word for _, line in lines for word in line.split())
    instances = {name: instance(name) for name in hosts}
    try:
        for streams in instances.values():
            streams.start()
        for streams in instances.values():
            assert streams.wait_for_state(State.RUNNING, State.ERROR) is State.RUNNING, streams.error
        read_topic(bootstrap, output, sum(words.values()))
        deadline = time.monotonic() + 60
        while not all(len(streams.metadata_for_all_stream_clients()) == 2 for streams in instances.values()):
            assert time.monotonic() < deadline, "the instances never learnt of each other"
            time.sleep(0.1)
        holders = set()
        for word, count in words.items():
            answers = {name: streams.query_metadata_for_key("counts", word) for name, streams in instances.items()}
            assert answers["first"] == answers["second"], word
            answer = answers["first"]
            assert answer.active_host in hosts.values() and 0 <= answer.partition < 4
            holder = next(name for name, host in hosts.items() if host == answer.active_host)
            other = next(name for name in hosts if name != holder)
            assert instances[holder].store("counts").get(word) == count, word
            assert instances[other].store("counts").get(word) is None, word
            holders.add(holder)
        assert holders == set(hosts), "each instance holds some of the words"
        clients = instances["first"].metadata_for_all_stream_clients()
        assert [client.host_info for client in clients] == sorted(hosts.values())
        assert all(client.state_store_names == {"counts"} for client in clients)
        assert instances["first"].streams_metadata_for_store("no-such-store") == []
    finally:
        for streams in instances.values():
            assert streams.close()


#: The windowed count's windows and grace, and the join's time difference (its grace is long enough that no join
#: input is ever late: which of two topics' records a task reads first depends on fetch timing, as in Java).
WINDOW_SIZE, WINDOW_GRACE, JOIN_DIFFERENCE, JOIN_GRACE = 10, 5, 3, 100_000


def _windowed_and_joined(events: str, lines: str, clicks: str, output: str) -> Topology:
    builder = StreamsBuilder()
    counts = (builder.stream(events).group_by_key()
              .windowed_by(TimeWindows.of_size_and_grace(WINDOW_SIZE, WINDOW_GRACE)).count("window-counts"))
    (counts.to_stream().map(lambda windowed, count: (f"{windowed.key}@{windowed.window.start}", count))
     .to(output + "-counts", key_serde=Serdes.string(), value_serde=Serdes.long()))
    (counts.suppress(Suppressed.until_window_closes(BufferConfig.unbounded()))
     .to_stream().map(lambda windowed, count: (f"{windowed.key}@{windowed.window.start}", count))
     .to(output + "-final", key_serde=Serdes.string(), value_serde=Serdes.long()))
    (builder.stream(lines)
     .join(builder.stream(clicks), lambda line, click: f"{line}&{click}",
           JoinWindows.of_time_difference_and_grace(JOIN_DIFFERENCE, JOIN_GRACE))
     .to(output + "-joined"))
    return builder.build()


def _partition_of(key: str) -> int:
    return int(key[1:]) % 3


def _timed_records(random: Random, prefix: str, partition: int, start: int, count: int,
                   lateness: int) -> list[tuple[str, str, int]]:
    """`count` records (key, value, timestamp) of one partition's keys, 3 ms apart from `start` and up to
    `lateness` ms earlier than that (out of order); the first is exactly at `start`."""
    keys = [f"{prefix}{index}" for index in range(9) if _partition_of(f"{prefix}{index}") == partition]
    return [(random.choice(keys), f"{prefix}{partition}-{start}-{index}",
             start + 3 * index - (random.randint(0, lateness) if index else 0)) for index in range(count)]


def _expected_windows(events: list[tuple[str, str, int]]) -> tuple[dict[str, int], dict[str, int]]:
    """Each tumbling window's count and, for the windows closed by the end, its final count, computed here per
    partition (each partition is one task with its own stream time): a record is counted unless its window ended
    at or before stream time - grace; a window is final once the latest counted time reaches its end + grace."""
    counts: Counter = Counter()
    stream_time: dict[int, int] = defaultdict(lambda: -1)
    latest_counted: dict[int, int] = defaultdict(lambda: -1)
    for key, _, timestamp in events:
        partition = _partition_of(key)
        stream_time[partition] = max(stream_time[partition], timestamp)
        start = timestamp - timestamp % WINDOW_SIZE
        if start + WINDOW_SIZE > stream_time[partition] - WINDOW_GRACE:
            counts[f"{key}@{start}"] += 1
            latest_counted[partition] = max(latest_counted[partition], timestamp)
    final = {window: count for window, count in counts.items()
             if int(window.split("@")[1]) + WINDOW_SIZE + WINDOW_GRACE <= latest_counted[_partition_of(window.split("@")[0])]}
    return dict(counts), final


def _expected_joins(lines: list[tuple[str, str, int]], clicks: list[tuple[str, str, int]]) -> Counter:
    return Counter((line_key, f"{line}&{click}") for line_key, line, line_time in lines
                   for click_key, click, click_time in clicks
                   if line_key == click_key and abs(line_time - click_time) <= JOIN_DIFFERENCE)


def _produce_timed(bootstrap: str, topic: str, records: list[tuple[str, str, int]]) -> None:
    with Producer({"bootstrap.servers": bootstrap}) as producer:
        for key, value, timestamp in records:
            producer.send(topic, value.encode(), key.encode(), partition=_partition_of(key), timestamp_ms=timestamp)


def _outputs(bootstrap: str, output: str) -> tuple[dict[str, int], list[tuple[str, int]], Counter]:
    """The windowed counts' last value per window, every final count, and every joined pair."""
    counts = {record.key.decode(): int.from_bytes(record.value, "big")
              for record in read_to_end(bootstrap, output + "-counts")}
    final = [(record.key.decode(), int.from_bytes(record.value, "big"))
             for record in read_to_end(bootstrap, output + "-final")]
    joined = Counter((record.key.decode(), record.value.decode())
                     for record in read_to_end(bootstrap, output + "-joined"))
    return counts, final, joined


def test_two_instances_window_late_records_and_join_streams(streams_broker, tmp_path) -> None:
    """A windowed count with late records (some within the grace, some after it) and its suppressed final
    results, and a stream-stream join, on two instances and three partitions: the second instance joins after
    the first has processed a first half, takes some of the tasks (restoring their window stores, join windows
    and suppression buffers from the changelogs), and the outputs are what is computed here from the input:
    every window's last count, each closed window's final count exactly once, and every pair of a line and a
    click of one key at most 3 ms apart exactly once, pairs across the hand-over included."""
    bootstrap = streams_broker.bootstrap_servers
    events, lines, clicks = unique_name("events"), unique_name("lines"), unique_name("clicks")
    output, application_id = unique_name("out"), unique_name("wj2")
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(name, 3, 1) for name in (
            events, lines, clicks, output + "-counts", output + "-final", output + "-joined")])
    random = Random(20261206)
    halves: list[dict[str, list[tuple[str, str, int]]]] = [defaultdict(list), defaultdict(list)]
    for partition in range(3):
        first_events = _timed_records(random, "e", partition, 1000, 40, 20)
        halves[0]["events"] += first_events
        # the second half's first record is in order: a task's stream time starts again from the first record
        # it processes after it moves (in Kafka Streams too), and that record must not be late
        halves[1]["events"] += _timed_records(random, "e", partition, max(t for _, _, t in first_events) + 1, 40, 20)
        for half, start in ((0, 1000), (1, 1045)):  # the halves overlap: pairs across the hand-over
            halves[half]["lines"] += _timed_records(random, "u", partition, start, 30, 0)
            halves[half]["clicks"] += _timed_records(random, "u", partition, start + 1, 30, 0)
    topics = {"events": events, "lines": lines, "clicks": clicks}

    def produce(half: dict[str, list[tuple[str, str, int]]]) -> None:
        for name, records in half.items():
            _produce_timed(bootstrap, topics[name], records)

    def expected(upto: int) -> tuple[dict[str, int], dict[str, int], Counter]:
        merged = {name: [record for half in halves[:upto] for record in half[name]] for name in topics}
        counts, final = _expected_windows(merged["events"])
        return counts, final, _expected_joins(merged["lines"], merged["clicks"])

    def wait_for(counts_expected: dict[str, int], final_expected: dict[str, int], joins_expected: Counter) -> None:
        deadline = time.monotonic() + 90
        while True:
            counts, final, joined = _outputs(bootstrap, output)
            if (counts, dict(final), joined) == (counts_expected, final_expected, joins_expected):
                return
            assert time.monotonic() < deadline, (
                f"counts differ: {set(counts.items()) ^ set(counts_expected.items())}; final: "
                f"{set(final) ^ set(final_expected.items())}; joins: {joined - joins_expected} extra, "
                f"{joins_expected - joined} missing")
            time.sleep(0.5)

    def instance(name: str) -> KafkaStreams:
        return KafkaStreams(_windowed_and_joined(events, lines, clicks, output), {
            "application.id": application_id, "bootstrap.servers": bootstrap, "state.dir": str(tmp_path / name),
            "default.key.serde": "string", "default.value.serde": "string", "commit.interval.ms": 100,
            "statestore.cache.max.bytes": 0})  # every update is counted

    first, second = instance("first"), instance("second")
    produce(halves[0])
    first.start()
    try:
        assert first.wait_for_state(State.RUNNING, State.ERROR) is State.RUNNING, first.error
        wait_for(*expected(1))
        second.start()
        deadline = time.monotonic() + 60
        while True:  # until the rebalances are over: every task runs, on one instance or the other
            held = [{str(task) for thread in streams._threads for task in thread.tasks} for streams in (first, second)]
            if all(held) and sorted(held[0] | held[1]) == [f"{sub}_{part}" for sub in (0, 1) for part in range(3)]:
                break
            assert time.monotonic() < deadline, f"the tasks never settled: {held}"
            assert first.error is None and second.error is None, first.error or second.error
            time.sleep(0.1)
        assert all({"0", "1"} <= {task.split("_")[0] for task in tasks} for tasks in held), (
            f"each instance runs windowed and join tasks: {held}")
        produce(halves[1])
        counts_expected, final_expected, joins_expected = expected(2)
        wait_for(counts_expected, final_expected, joins_expected)
    finally:
        assert first.close() and second.close()
    assert first.error is None and second.error is None
    late = sum(1 for half in halves for _ in half["events"]) - sum(counts_expected.values())
    assert late > 0 and len(final_expected) < len(counts_expected), "some records were too late, some windows open"
    counts, final, joined = _outputs(bootstrap, output)
    assert len(final) == len(final_expected), "each closed window's final count once"


def test_standby_replicas_follow_the_active_tasks_and_take_over(streams_broker, tmp_path) -> None:
    """num.standby.replicas=1 on two instances: each stateful task has a standby on the other instance, kept up to
    date from the changelog (stale-store queries on either instance see every word's count, and
    query_metadata_for_key names the other host as the standby); when one instance leaves, the other turns its
    standbys into active tasks restoring only the changelog's tail, and the counts go on exactly."""
    bootstrap = streams_broker.bootstrap_servers
    first_half, second_half = _lines(0, 150), _lines(150, 150)
    input_topic, output, application_id = _wordcount_application(bootstrap, 3, first_half, "standby")
    hosts = {"first": HostInfo("127.0.0.1", 7081), "second": HostInfo("127.0.0.1", 7082)}

    def instance(name: str) -> KafkaStreams:
        return _wordcount_instance(bootstrap, tmp_path / name, input_topic, output, application_id,
                                   num_standby_replicas=1, application_server=str(hosts[name]))

    first_words = Counter(word for _, line in first_half for word in line.split())
    all_words = Counter(word for _, line in first_half + second_half for word in line.split())
    first, second = instance("first"), instance("second")
    try:
        first.start()
        second.start()
        for streams in (first, second):
            assert streams.wait_for_state(State.RUNNING, State.ERROR) is State.RUNNING, streams.error
        read_topic(bootstrap, output, sum(first_words.values()))
        deadline = time.monotonic() + 60
        while not all(streams.store("counts", enable_stale_stores=True).all() == dict(first_words)
                      and streams.store("counts").all() != dict(first_words) for streams in (first, second)):
            assert time.monotonic() < deadline, "the standbys never caught up"
            time.sleep(0.2)
        for word in first_words:
            answer = first.query_metadata_for_key("counts", word)
            assert answer == second.query_metadata_for_key("counts", word), word
            assert answer.standby_hosts == set(hosts.values()) - {answer.active_host}, word
        # a standby of every stateful task (sub-topology 1, after the repartition) on the instance not running it
        stateful = [{str(task) for task in streams._threads[0].tasks if task.subtopology == 1}
                    for streams in (first, second)]
        assert [{str(task) for task in streams.standby_updater.tasks} for streams in (first, second)] == [
            stateful[1], stateful[0]]
        assert first.metrics()["update-total"] + second.metrics()["update-total"] > 0
        restored_before = first.metrics()["restore-total"]
        assert second.close()
        with Producer({"bootstrap.servers": bootstrap}) as producer:
            for key, line in second_half:
                producer.send(input_topic, line.encode(), key.encode())
        read_topic(bootstrap, output, sum(all_words.values()))
        assert first.store("counts").all() == dict(all_words), "the first instance now runs every task"
        changelog_records = sum(first_words.values())
        restored = first.metrics()["restore-total"] - restored_before
        assert restored < changelog_records / 10, f"took over with {restored} of {changelog_records} restored"
    finally:
        assert first.close() and second.close()
    assert first.error is None and second.error is None
    _assert_every_count_once(bootstrap, output, all_words)
