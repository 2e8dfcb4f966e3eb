"""Two instances of one application on kfk (one stream thread, then two more), three partitions: the second
instance joins while the first is processing, the group moves tasks between them (the first commits and
checkpoints what it gives up, the second restores the moved stores from their changelogs), and the word counts
come out exactly as computed here; and interactive queries find the instance that holds a key."""

from __future__ import annotations

import time
from collections import Counter, defaultdict

from kfk.client import Admin, NewTopic, Producer
from kfk.streams import HostInfo, KafkaStreams, State, StreamsBuilder
from kfk.streams.errors import StreamsException
from tests.streams.conftest import create_input, read_to_end, read_topic, unique_name
from tests.streams.topologies import foreign_key_joins, wordcount

WORDS = ["red", "green", "blue", "cyan", "magenta", "yellow", "black"]


def _lines(start: int, count: int) -> list[tuple[str, str]]:
    return [(f"k{index}", " ".join(WORDS[(index + offset) % len(WORDS)] for offset in range(index % 3 + 1)))
            for index in range(start, start + count)]


def test_two_instances_share_the_tasks(streams_broker, tmp_path) -> None:
    bootstrap = streams_broker.bootstrap_servers
    input_topic, output, application_id = unique_name("lines"), unique_name("counts"), unique_name("wc2")
    first_half, second_half = _lines(0, 150), _lines(150, 150)
    create_input(bootstrap, input_topic, 3, first_half)
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(output, 3, 1)])

    def instance(name: str, threads: int) -> KafkaStreams:
        return KafkaStreams(wordcount(input_topic, output), {
            "application.id": application_id, "bootstrap.servers": bootstrap, "state.dir": str(tmp_path / name),
            "default.key.serde": "string", "default.value.serde": "string", "commit.interval.ms": 100,
            "num.stream.threads": threads})

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
    counts: dict[str, list[int]] = defaultdict(list)
    for record in read_to_end(bootstrap, output):
        counts[record.key.decode()].append(int.from_bytes(record.value, "big"))
    assert counts == {word: list(range(1, total + 1)) for word, total in Counter(words).items()}


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
            "num.stream.threads": threads})

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
    input_topic, output, application_id = unique_name("lines"), unique_name("counts"), unique_name("iq")
    lines = _lines(0, 120)
    create_input(bootstrap, input_topic, 4, lines)
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(output, 4, 1)])
    hosts = {"first": HostInfo("127.0.0.1", 7071), "second": HostInfo("127.0.0.1", 7072)}

    def instance(name: str) -> KafkaStreams:
        return KafkaStreams(wordcount(input_topic, output), {
            "application.id": application_id, "bootstrap.servers": bootstrap, "state.dir": str(tmp_path / name),
            "default.key.serde": "string", "default.value.serde": "string", "commit.interval.ms": 100,
            "application.server": str(hosts[name])})

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
