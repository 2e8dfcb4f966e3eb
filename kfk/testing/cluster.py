"""A multi-broker kfk cluster on ZooKeeper, every broker its own `kfk server start` process (so kill -9, SIGSTOP
and SIGTERM are real), for tests and benchmarks.

The brokers share a ZooKeeper connect string (a chroot of its own per cluster) and run with short timeouts so that
failures are noticed in seconds: a killed broker's session (and so its registration) ends after
zookeeper.session.timeout.ms, a follower that stops fetching leaves the ISR after replica.lag.time.max.ms.
"""

from __future__ import annotations

import signal
import threading
from dataclasses import dataclass, field
from pathlib import Path

from kfk.testing.broker import BrokerProcess

#: Settings that make a local cluster react within seconds (Kafka's defaults are tuned for data centres).
CLUSTER_OVERRIDES = {
    "zookeeper.session.timeout.ms": "4000",
    "replica.lag.time.max.ms": "2000",
    "replica.fetch.wait.max.ms": "200",
    "replica.fetch.backoff.ms": "100",
    "offsets.topic.num.partitions": "3",
    "offsets.topic.replication.factor": "3",
    "transaction.state.log.num.partitions": "3",
    # `kfk server start` without a properties file sizes the internal topics for one node: a cluster replicates them.
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "group.initial.rebalance.delay.ms": "0",
    "num.partitions": "3",
    "default.replication.factor": "3",
}


@dataclass
class KfkCluster:
    zookeeper_connect: str
    directory: Path
    overrides: dict[str, str]
    brokers: dict[int, BrokerProcess] = field(default_factory=dict)
    listener_name: str = "PLAINTEXT"  # each broker's one listener (SSL: the brokers replicate over TLS too)

    @property
    def bootstrap_servers(self) -> str:
        """The brokers that run now."""
        return ",".join(broker.bootstrap_servers for broker in self.brokers.values() if broker.process is not None)

    def broker(self, broker_id: int) -> BrokerProcess:
        return self.brokers[broker_id]

    def add_broker(self, broker_id: int, overrides: dict[str, str] | None = None) -> BrokerProcess:
        merged = dict(self.overrides)
        merged.update(overrides or {})
        merged["zookeeper.connect"] = self.zookeeper_connect
        merged["broker.id"] = str(broker_id)
        directory = self.directory / f"broker-{broker_id}"
        directory.mkdir(parents=True, exist_ok=True)
        broker = BrokerProcess(log_dir=directory / "data", overrides=merged, log_path=directory / "broker.log",
                               listener_name=self.listener_name)
        self.brokers[broker_id] = broker
        return broker

    def start(self, broker_ids: list[int] | None = None, timeout: float = 30.0) -> None:
        """Start (or restart) brokers in parallel and wait until each serves."""
        errors: list[BaseException] = []

        def start_one(broker: BrokerProcess) -> None:
            try:
                broker.start(timeout)
            except BaseException as error:  # noqa: BLE001 - reported below
                errors.append(error)

        threads = [threading.Thread(target=start_one, args=(self.brokers[broker_id],))
                   for broker_id in (broker_ids if broker_ids is not None else list(self.brokers))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if errors:
            raise errors[0]

    def kill(self, broker_id: int) -> None:
        self.brokers[broker_id].kill()

    def stop(self, broker_id: int) -> int:
        return self.brokers[broker_id].stop()

    def pause(self, broker_id: int) -> None:
        """SIGSTOP: the process freezes (no fetches, no ZooKeeper heartbeats) without closing its sockets."""
        self._signal(broker_id, signal.SIGSTOP)

    def resume(self, broker_id: int) -> None:
        self._signal(broker_id, signal.SIGCONT)

    def _signal(self, broker_id: int, sig: int) -> None:
        process = self.brokers[broker_id].process
        if process is not None:
            process.send_signal(sig)

    def shutdown(self) -> None:
        for broker_id, broker in self.brokers.items():
            if broker.process is not None:
                self.resume(broker_id)
                broker.kill()

    def logs(self) -> str:
        return "\n".join(f"--- broker {broker_id} ({broker.log_path}) ---\n{broker.output()[-15000:]}"
                         for broker_id, broker in self.brokers.items())


def start_cluster(directory: Path, zookeeper_connect: str, size: int = 3, overrides: dict[str, str] | None = None,
                  timeout: float = 30.0, listener_name: str = "PLAINTEXT") -> KfkCluster:
    merged = dict(CLUSTER_OVERRIDES)
    merged.update(overrides or {})
    cluster = KfkCluster(zookeeper_connect, Path(directory), merged, listener_name=listener_name)
    for broker_id in range(1, size + 1):
        cluster.add_broker(broker_id)
    try:
        cluster.start(timeout=timeout)
    except BaseException:
        cluster.shutdown()
        raise
    return cluster
