"""Three brokers, each a separate process, on a real ZooKeeper or on a KRaft controller: replicated topics, leaders
killed with kill -9 while a producer writes with acks=all, the controller killed (in KRaft: the broker Metadata
names as the controller), controlled shutdown on SIGTERM."""

from __future__ import annotations

import threading
import time
import zlib

import pytest
from confluent_kafka import Producer

from tests.cluster.helpers import consume_all, controller_id, create_topic, partitions, wait_until

pytestmark = [pytest.mark.integration]


@pytest.fixture(params=[pytest.param("zookeeper", marks=pytest.mark.zookeeper), "kraft"])
def kfk_metadata_mode(request: pytest.FixtureRequest) -> str:
    """Every test on both metadata backends: brokers on ZooKeeper, and brokers on a KRaft controller."""
    return request.param


class SequenceProducer:
    """Writes "partition:sequence" values to every partition with acks=all from a thread, and remembers which
    ones were acknowledged."""

    def __init__(self, bootstrap: str, topic: str, partition_count: int) -> None:
        self.topic = topic
        self.partition_count = partition_count
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                                  "linger.ms": 5, "message.timeout.ms": 30000, "retry.backoff.ms": 50,
                                  "topic.metadata.refresh.interval.ms": 500})
        self.acknowledged: dict[int, list[bytes]] = {index: [] for index in range(partition_count)}
        self.failed = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _delivered(self, error, message) -> None:
        if error is None:
            self.acknowledged[message.partition()].append(message.value())
        else:
            self.failed += 1

    def _run(self) -> None:
        sequence = 0
        while not self._stop.is_set():
            for index in range(self.partition_count):
                self.producer.produce(self.topic, f"{index}:{sequence}".encode(), partition=index,
                                      on_delivery=self._delivered)
            sequence += 1
            self.producer.poll(0)
            time.sleep(0.002)
        self.producer.flush(40)

    def start(self) -> SequenceProducer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(60)

    @property
    def count(self) -> int:
        return sum(len(values) for values in self.acknowledged.values())


def check_every_acknowledged_record_is_there(bootstrap: str, producer: SequenceProducer) -> None:
    consumed = consume_all(bootstrap, producer.topic, producer.partition_count)
    for index, acknowledged in producer.acknowledged.items():
        values = consumed[index]
        sequences = [int(value.split(b":")[1]) for value in values]
        assert sequences == sorted(sequences), f"partition {index} out of order"
        assert len(set(sequences)) == len(sequences), f"partition {index} has duplicates"
        assert set(acknowledged) <= set(values), f"partition {index} lost acknowledged records"
        # No gaps: the producer writes each partition's sequence in order, so what is there is a prefix-closed run.
        assert sequences == list(range(sequences[0], sequences[0] + len(sequences))), f"partition {index} has gaps"
        assert sequences[0] == 0
        assert zlib.crc32(b"".join(acknowledged)) == zlib.crc32(b"".join(values[:len(acknowledged)])) or \
            set(acknowledged) <= set(values)


def test_replicated_topics_spread_leaders_and_replicate_everything(kfk_cluster) -> None:
    bootstrap = kfk_cluster.bootstrap_servers
    create_topic(bootstrap, "spread", partitions=6, replication_factor=3)
    layout = wait_until(lambda: (state := partitions(bootstrap, "spread")) and all(
        len(isr) == 3 for _, _, isr in state.values()) and state, what="every ISR full")
    leaders = [leader for leader, _, _ in layout.values()]
    assert sorted(leaders) == [1, 1, 2, 2, 3, 3]
    assert all(sorted(replicas) == [1, 2, 3] and replicas[0] == leader for leader, replicas, _ in layout.values())
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for sequence in range(600):
        producer.produce("spread", f"{sequence % 6}:{sequence // 6}".encode(), partition=sequence % 6)
    assert producer.flush(20) == 0
    consumed = consume_all(bootstrap, "spread", 6)
    assert all(len(values) == 100 for values in consumed.values())
    # Every replica's log holds the same bytes as the leader's.
    for index in range(6):
        logs = {broker_id: (broker.log_dir / f"spread-{index}" / "00000000000000000000.log")
                for broker_id, broker in kfk_cluster.brokers.items()}
        wait_until(lambda: len({path.read_bytes() for path in logs.values()}) == 1, what=f"spread-{index} replicas")


@pytest.mark.slow
def test_killing_each_leader_in_turn_loses_no_acknowledged_record(kfk_cluster) -> None:
    bootstrap = kfk_cluster.bootstrap_servers
    create_topic(bootstrap, "orders", partitions=3, replication_factor=3)
    wait_until(lambda: all(len(isr) == 3 for _, _, isr in partitions(bootstrap, "orders").values()))
    producer = SequenceProducer(bootstrap, "orders", 3).start()
    try:
        for index in range(3):
            wait_until(lambda: producer.count > 100 * (index + 1), what="records acknowledged")
            state = partitions(bootstrap, "orders")
            leader = state[index][0]
            kfk_cluster.kill(leader)
            survivors = ",".join(b.bootstrap_servers for i, b in kfk_cluster.brokers.items() if i != leader)
            wait_until(lambda: partitions(survivors, "orders")[index][0] not in (leader, -1), timeout=20,
                       what=f"a new leader for orders-{index}")
            before = producer.count
            wait_until(lambda: producer.count > before + 50, what="produce resumes on the new leader")
            kfk_cluster.start([leader])
            wait_until(lambda: all(len(isr) == 3 for _, _, isr in partitions(bootstrap, "orders").values()),
                       timeout=30, what="the restarted broker back in every ISR")
    finally:
        producer.stop()
    assert producer.count > 300
    check_every_acknowledged_record_is_there(kfk_cluster.bootstrap_servers, producer)


def test_the_cluster_keeps_serving_when_the_controller_dies(kfk_cluster) -> None:
    bootstrap = kfk_cluster.bootstrap_servers
    create_topic(bootstrap, "before", partitions=3, replication_factor=3)
    controller = controller_id(bootstrap)
    kfk_cluster.kill(controller)
    survivors = kfk_cluster.bootstrap_servers
    new_controller = wait_until(lambda: (found := controller_id(survivors)) not in (controller, -1) and found,
                                timeout=20, what="a new controller")
    assert new_controller in kfk_cluster.brokers
    wait_until(lambda: all(leader not in (controller, -1) for leader, _, _ in partitions(survivors, "before").values()),
               what="leaders moved off the dead controller")
    create_topic(survivors, "after", partitions=2, replication_factor=2)
    producer = Producer({"bootstrap.servers": survivors, "acks": "all"})
    for sequence in range(100):
        producer.produce("after", str(sequence).encode(), partition=sequence % 2)
        producer.produce("before", str(sequence).encode(), partition=sequence % 3)
    assert producer.flush(20) == 0
    assert sum(len(v) for v in consume_all(survivors, "after", 2).values()) == 100


def test_sigterm_moves_leadership_away_before_the_broker_exits(kfk_cluster) -> None:
    bootstrap = kfk_cluster.bootstrap_servers
    create_topic(bootstrap, "moving", partitions=3, replication_factor=3)
    wait_until(lambda: all(len(isr) == 3 for _, _, isr in partitions(bootstrap, "moving").values()))
    leader = partitions(bootstrap, "moving")[0][0]
    assert kfk_cluster.stop(leader) == 0
    assert f"controlled shutdown of broker {leader} succeeded" in kfk_cluster.broker(leader).output()
    survivors = kfk_cluster.bootstrap_servers
    # Leadership moved during the shutdown itself: the survivors know it at once, not after a session timeout.
    state = wait_until(lambda: (found := partitions(survivors, "moving")) and all(
        partition_leader not in (leader, -1) and leader not in isr for partition_leader, _, isr in found.values())
        and found, timeout=2, interval=0.05, what="leaders and ISRs without the stopped broker")
    assert all(sorted(isr) == sorted(set(kfk_cluster.brokers) - {leader}) for _, _, isr in state.values())


def test_a_rolling_restart_with_sigterm_loses_nothing(kfk_cluster) -> None:
    bootstrap = kfk_cluster.bootstrap_servers
    create_topic(bootstrap, "rolling", partitions=3, replication_factor=3, config={"min.insync.replicas": "2"})
    wait_until(lambda: all(len(isr) == 3 for _, _, isr in partitions(bootstrap, "rolling").values()))
    producer = SequenceProducer(bootstrap, "rolling", 3).start()
    try:
        for broker_id in sorted(kfk_cluster.brokers):
            wait_until(lambda: producer.count > 100, what="records acknowledged")
            before = producer.count
            assert kfk_cluster.stop(broker_id) == 0
            kfk_cluster.start([broker_id])
            wait_until(lambda: all(len(isr) == 3 for _, _, isr in partitions(bootstrap, "rolling").values()),
                       timeout=30, what=f"broker {broker_id} back in every ISR")
            wait_until(lambda: producer.count > before + 50, what="produce continues")
    finally:
        producer.stop()
    assert producer.failed == 0
    check_every_acknowledged_record_is_there(kfk_cluster.bootstrap_servers, producer)
