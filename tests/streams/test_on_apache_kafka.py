"""kfk.streams runs on any Kafka: the word count under exactly_once_v2 on Apache Kafka itself. The application is
closed, its state directory deleted, and restarted on more input: the counts continue from the changelog (the
store is restored from <application.id>-counts-changelog), checked against counts computed here."""

from __future__ import annotations

import shutil
from collections import Counter, defaultdict

from kfk.client import Admin, NewTopic, Producer
from kfk.streams import KafkaStreams, State
from tests.streams.conftest import create_input, read_to_end, read_topic, unique_name
from tests.streams.topologies import wordcount

FIRST = [("a", "one fish two fish"), ("b", "red fish blue fish"), ("c", "one two three")]
SECOND = [("a", "fish and chips"), ("d", "two more fish")]


def _run(bootstrap: str, application_id: str, input_topic: str, output: str, state_dir: str,
         until: int) -> dict[str, int]:
    """Run until `until` output records are committed; returns what the counts store answers (interactive query)."""
    streams = KafkaStreams(wordcount(input_topic, output), {
        "application.id": application_id, "bootstrap.servers": bootstrap, "state.dir": state_dir,
        "processing.guarantee": "exactly_once_v2", "default.key.serde": "string",
        "default.value.serde": "string", "statestore.cache.max.bytes": 0})  # every update is checked
    streams.start()
    try:
        assert streams.wait_for_state(State.RUNNING, State.ERROR) is State.RUNNING, streams.error
        read_topic(bootstrap, output, until)
        counts = streams.store("counts").all()
    finally:
        assert streams.close()
    assert streams.state is State.NOT_RUNNING and streams.error is None
    return counts


def test_word_count_on_apache_kafka_restores_from_changelog(apache_kafka, tmp_path) -> None:
    bootstrap = apache_kafka.bootstrap_server
    input_topic, output, application_id = unique_name("lines"), unique_name("counts"), unique_name("wc")
    create_input(bootstrap, input_topic, 2, FIRST)
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(output, 2, 1)])
    state_dir = tmp_path / "state"
    first_words = [word for _, line in FIRST for word in line.split()]
    _run(bootstrap, application_id, input_topic, output, str(state_dir), len(first_words))
    checkpoints = list((state_dir / application_id).glob("1_*/.checkpoint"))
    assert checkpoints, "a clean close writes the tasks' checkpoints"
    shutil.rmtree(state_dir / application_id)
    with Producer({"bootstrap.servers": bootstrap}) as producer:
        for key, line in SECOND:
            producer.send(input_topic, line.encode(), key.encode())
    all_words = first_words + [word for _, line in SECOND for word in line.split()]
    queried = _run(bootstrap, application_id, input_topic, output, str(state_dir), len(all_words))
    assert queried == dict(Counter(all_words)), "the restored store answers interactive queries"
    counts: dict[str, list[int]] = defaultdict(list)
    for record in read_to_end(bootstrap, output):
        counts[record.key.decode()].append(int.from_bytes(record.value, "big"))
    assert counts == {word: list(range(1, total + 1)) for word, total in Counter(all_words).items()}
    changelog = {record.key.decode(): int.from_bytes(record.value, "big")
                 for record in read_to_end(bootstrap, f"{application_id}-counts-changelog")}
    assert changelog == dict(Counter(all_words))
