"""Warm-up replicas and probing rebalances (KIP-441) on kfk, two instances of a count over three partitions whose
changelogs hold far more than acceptable.recovery.lag: the second instance joins, gets no active stateful task
while it is not caught up (the first keeps running them all, restoring nothing), warms its target tasks up as
standbys, and takes them at the probing rebalance, restoring only the changelog's tail; the counts go on exactly."""

from __future__ import annotations

import threading
import time

import pytest

from kfk.client import Producer
from kfk.streams import KafkaStreams, State, StreamsBuilder
from kfk.streams.standby import StandbyUpdater
from tests.streams.conftest import create_input, unique_name

KEYS = 12_000
ACCEPTABLE_LAG = 500


def _instance(bootstrap: str, directory, input_topic: str, application_id: str,
              probing_interval_ms: int | None = None) -> KafkaStreams:
    builder = StreamsBuilder()
    builder.stream(input_topic).group_by_key().count("counts")
    streams = KafkaStreams(builder.build(), {
        "application.id": application_id, "bootstrap.servers": bootstrap, "state.dir": str(directory),
        "default.key.serde": "string", "default.value.serde": "string", "commit.interval.ms": 100,
        "acceptable.recovery.lag": ACCEPTABLE_LAG})
    if probing_interval_ms is not None:  # below Kafka's 60 s minimum, which the config refuses
        streams.config.probing_rebalance_interval_ms = probing_interval_ms
    return streams


def _store_size(streams: KafkaStreams) -> int:
    try:
        return len(streams.store("counts").all())
    except Exception:  # noqa: BLE001 - the store is closed while the instance rebalances
        return -1


def _watch(first: KafkaStreams, second: KafkaStreams, samples: list[tuple[bool, bool, int]],
           stop: threading.Event) -> None:
    """Samples of (the second instance runs some task, it has warm-ups, the tasks the first runs) until `stop`."""
    while not stop.is_set():
        thread = second._threads[0]
        try:
            samples.append((bool(list(thread.tasks)), bool(thread.assignor.warmup_tasks),
                            len(list(first._threads[0].tasks))))
        except RuntimeError:  # a thread changed its tasks meanwhile
            continue
        time.sleep(0.005)


def _scale_out(streams_broker, tmp_path, probing_interval_ms: int | None) -> None:
    bootstrap = streams_broker.bootstrap_servers
    input_topic, application_id = unique_name("keys"), unique_name("warmup")
    create_input(bootstrap, input_topic, 3, [(f"k{index}", "v") for index in range(KEYS)])
    first = _instance(bootstrap, tmp_path / "first", input_topic, application_id, probing_interval_ms)
    second = _instance(bootstrap, tmp_path / "second", input_topic, application_id, probing_interval_ms)
    samples: list[tuple[bool, bool, int]] = []
    stop = threading.Event()
    try:
        first.start()
        assert first.wait_for_state(State.RUNNING, State.ERROR) is State.RUNNING, first.error
        deadline = time.monotonic() + 60
        while _store_size(first) != KEYS:
            assert time.monotonic() < deadline, f"the first instance counted {_store_size(first)} keys"
            time.sleep(0.1)
        restored_by_first = first.metrics()["restore-total"]
        second.start()
        watcher = threading.Thread(target=_watch, args=(first, second, samples, stop), daemon=True)
        deadline = time.monotonic() + 60
        while not second._threads[0].assigned:
            assert time.monotonic() < deadline
            time.sleep(0.005)
        watcher.start()
        deadline = time.monotonic() + 60
        while not list(second._threads[0].tasks):
            assert time.monotonic() < deadline, "the second instance never got a task"
            assert first.error is None and second.error is None, first.error or second.error
            time.sleep(0.05)
        stop.set()
        watcher.join()
        taken = {str(task) for task in second._threads[0].tasks}
        kept = {str(task) for task in first._threads[0].tasks}
        assert taken and kept and not taken & kept, (taken, kept)
        # while it warmed up the second ran nothing (it warmed up before taking any task), and the first ran every
        # task, so that its interactive queries answered for every key
        assert samples and samples[0][:2] == (False, True), samples[:5]
        assert all(not running for running, warming, _ in samples if warming)
        assert any(warming and first_runs == 3 for _, warming, first_runs in samples), samples[:20]
        metrics = second.metrics()
        assert metrics["restore-total"] <= ACCEPTABLE_LAG * len(taken), "it took its tasks caught up"
        assert metrics["update-total"] >= KEYS / 3 * len(taken) - ACCEPTABLE_LAG * len(taken), metrics
        assert first.metrics()["restore-total"] == restored_by_first, "the first restored nothing meanwhile"
        with Producer({"bootstrap.servers": bootstrap}) as producer:
            for index in range(KEYS):
                producer.send(input_topic, b"v", f"k{index}".encode())
        deadline = time.monotonic() + 90
        while True:
            counts = {**first.store("counts").all(), **second.store("counts").all()}
            if counts == {f"k{index}": 2 for index in range(KEYS)}:
                break
            assert time.monotonic() < deadline, f"{sum(1 for count in counts.values() if count == 2)} keys at 2"
            time.sleep(0.2)
    finally:
        stop.set()
        assert first.close() and second.close()
    assert first.error is None and second.error is None


def test_a_new_instance_takes_its_tasks_once_its_warm_ups_have_caught_up(streams_broker, tmp_path) -> None:
    """probing.rebalance.interval.ms at its default (10 minutes): the warm-ups ask for the probing rebalance as
    soon as they have caught up."""
    _scale_out(streams_broker, tmp_path, None)


def test_the_probing_rebalance_moves_the_warmed_up_tasks(streams_broker, tmp_path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The warm-ups never ask: the leader's probing rebalance, 2 s after the warm-ups were assigned, moves them."""
    monkeypatch.setattr(StandbyUpdater, "_probe_if_warmed_up", lambda updater: None)
    _scale_out(streams_broker, tmp_path, 2_000)
