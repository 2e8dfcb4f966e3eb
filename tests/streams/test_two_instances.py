"""Two instances of one application on kfk (one stream thread, then two more), three partitions: the second
instance joins while the first is processing, the group moves tasks between them (the first commits and
checkpoints what it gives up, the second restores the moved stores from their changelogs), and the word counts
come out exactly as computed here."""

from __future__ import annotations

from collections import Counter, defaultdict

from kfk.client import Admin, NewTopic, Producer
from kfk.streams import KafkaStreams, State, StreamsBuilder
from tests.streams.conftest import create_input, read_to_end, read_topic, unique_name
from tests.streams.topologies import wordcount

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
    """An exception in user code ends the stream thread; the instance goes to ERROR and keeps the exception (the
    records it had not committed are processed again by the next run, as in Kafka Streams)."""
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
    assert isinstance(streams.error, ValueError) and str(streams.error) == "cannot handle boom"
    assert streams.close()
    assert streams.state is State.ERROR
