"""A multi-broker kfk cluster, every node its own `kfk server start` process (so kill -9, SIGSTOP and SIGTERM are
real), for tests and benchmarks. Two kinds of metadata:

- ZooKeeper: the brokers share a ZooKeeper connect string (a chroot of its own per cluster);
- KRaft: no external service. `controllers=N` adds N controller-only nodes (ids 101..100+N) beside the brokers
  (ids 1..size), or `combined=True` makes every broker a controller too (ids 1..size, all voters). Controller
  listeners get free ports before the start, as `controller.quorum.voters` names them; broker listeners are
  ephemeral.

Every node runs with short timeouts so that failures are noticed in seconds: a killed broker's session (and so its
registration) ends after zookeeper.session.timeout.ms or broker.session.timeout.ms, a follower that stops fetching
leaves the ISR after replica.lag.time.max.ms, a dead active controller is replaced after
controller.quorum.election.timeout.ms.
"""

from __future__ import annotations

import base64
import signal
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from kfk.testing.broker import START_TIMEOUT_S, BrokerProcess, start_together
from kfk.testing.ports import free_port

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

#: KRaft's counterparts: brokers fenced 3 s after their last heartbeat (every 500 ms), a new active controller
#: within a second or two of the old one's death.
KRAFT_OVERRIDES = {
    "broker.heartbeat.interval.ms": "500",
    "broker.session.timeout.ms": "3000",
    "controller.quorum.election.timeout.ms": "1000",
    "controller.quorum.fetch.timeout.ms": "2000",
    "controller.listener.names": "CONTROLLER",
    "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
}

#: The first id of controller-only nodes (brokers are 1..size, so tests name brokers the same in both modes).
CONTROLLER_ID_BASE = 100


@dataclass
class KfkCluster:
    zookeeper_connect: str | None
    directory: Path
    overrides: dict[str, str]
    brokers: dict[int, BrokerProcess] = field(default_factory=dict)
    listener_name: str = "PLAINTEXT"  # each broker's one listener (SSL: the brokers replicate over TLS too)
    #: KRaft controller-only nodes, by node id (combined nodes are in `brokers`).
    controllers: dict[int, BrokerProcess] = field(default_factory=dict)
    #: KRaft: the voters, id -> controller port.
    voters: dict[int, int] = field(default_factory=dict)
    #: KRaft: the cluster id every node's storage is formatted with.
    cluster_id: str | None = None
    #: KRaft: more `kfk storage format` flags, the same for every node (e.g. `--add-scram ...`).
    format_args: list[str] = field(default_factory=list)

    @property
    def kraft(self) -> bool:
        return self.zookeeper_connect is None

    @property
    def bootstrap_servers(self) -> str:
        """The brokers that run now."""
        return ",".join(broker.bootstrap_servers for broker in self.brokers.values() if broker.process is not None)

    @property
    def quorum_voters(self) -> str:
        return ",".join(f"{node_id}@127.0.0.1:{port}" for node_id, port in sorted(self.voters.items()))

    @property
    def nodes(self) -> dict[int, BrokerProcess]:
        """Every process of the cluster: brokers (combined nodes included) and controller-only nodes."""
        return {**self.brokers, **self.controllers}

    def broker(self, broker_id: int) -> BrokerProcess:
        return self.brokers[broker_id]

    def add_broker(self, broker_id: int, overrides: dict[str, str] | None = None) -> BrokerProcess:
        """A broker (on ZooKeeper, or a KRaft broker: combined when its id is a voter)."""
        roles = "broker,controller" if broker_id in self.voters else "broker"
        broker = self._add_node(broker_id, roles, overrides)
        self.brokers[broker_id] = broker
        return broker

    def add_controller(self, node_id: int, overrides: dict[str, str] | None = None) -> BrokerProcess:
        """A KRaft controller-only node (its id must be a voter)."""
        controller = self._add_node(node_id, "controller", overrides)
        self.controllers[node_id] = controller
        return controller

    def _add_node(self, node_id: int, roles: str, overrides: dict[str, str] | None) -> BrokerProcess:
        merged = dict(self.overrides)
        merged.update(overrides or {})
        if self.kraft:
            merged.update({"process.roles": roles, "node.id": str(node_id),
                           "controller.quorum.voters": self.quorum_voters})
        else:
            merged["zookeeper.connect"] = self.zookeeper_connect
            merged["broker.id"] = str(node_id)
        directory = self.directory / f"{'controller' if roles == 'controller' else 'broker'}-{node_id}"
        directory.mkdir(parents=True, exist_ok=True)
        return BrokerProcess(log_dir=directory / "data", overrides=merged, log_path=directory / "broker.log",
                             controller_port=self.voters.get(node_id), cluster_id=self.cluster_id,
                             listener_name=self.listener_name, format_args=list(self.format_args))

    def start(self, broker_ids: list[int] | None = None, timeout: float = START_TIMEOUT_S) -> None:
        """Start (or restart) nodes in parallel and wait until each serves (default: every node, controllers
        included; a KRaft broker is ready once the controller has unfenced it)."""
        nodes = self.nodes
        start_together([nodes[node_id] for node_id in (broker_ids if broker_ids is not None else list(nodes))],
                       timeout)

    def kill(self, broker_id: int) -> None:
        self.nodes[broker_id].kill()

    def stop(self, broker_id: int) -> int:
        return self.nodes[broker_id].stop()

    def pause(self, broker_id: int) -> None:
        """SIGSTOP: the process freezes (no fetches, no heartbeats) without closing its sockets."""
        self._signal(broker_id, signal.SIGSTOP)

    def resume(self, broker_id: int) -> None:
        self._signal(broker_id, signal.SIGCONT)

    def _signal(self, broker_id: int, sig: int) -> None:
        process = self.nodes[broker_id].process
        if process is not None:
            process.send_signal(sig)

    def shutdown(self) -> None:
        for node_id, node in self.nodes.items():
            if node.process is not None:
                self.resume(node_id)
                node.kill()

    def logs(self) -> str:
        return "\n".join(f"--- node {node_id} ({node.log_path}) ---\n{node.output()[-15000:]}"
                         for node_id, node in self.nodes.items())


def start_cluster(directory: Path, zookeeper_connect: str | None, size: int = 3,
                  overrides: dict[str, str] | None = None, timeout: float = START_TIMEOUT_S, *, controllers: int = 0,
                  combined: bool = False, listener_name: str = "PLAINTEXT",
                  format_args: list[str] | None = None,
                  controller_overrides: dict[str, str] | None = None) -> KfkCluster:
    """Brokers 1..size on ZooKeeper (`zookeeper_connect`), or on KRaft (`zookeeper_connect` None): with
    `controllers` controller-only nodes, or `combined` (every broker a voter; the default when there are no
    controller-only nodes). `listener_name`: each broker's one client listener (SSL: they replicate over TLS).
    `format_args`: KRaft, flags every node's `kfk storage format` gets (`--add-scram ...`).
    `controller_overrides`: settings of the controller-only nodes alone (an authorizer on the controllers)."""
    merged = dict(CLUSTER_OVERRIDES)
    if zookeeper_connect is None:
        merged.update(KRAFT_OVERRIDES)
    merged.update(overrides or {})
    cluster = KfkCluster(zookeeper_connect, Path(directory), merged, listener_name=listener_name,
                         format_args=list(format_args or []))
    if zookeeper_connect is None:
        cluster.cluster_id = random_cluster_id()
        voter_ids = list(range(1, size + 1)) if combined or not controllers else \
            [CONTROLLER_ID_BASE + index for index in range(1, controllers + 1)]
        cluster.voters = {node_id: free_port() for node_id in voter_ids}
        for node_id in voter_ids:
            if node_id > CONTROLLER_ID_BASE:
                cluster.add_controller(node_id, controller_overrides)
    for broker_id in range(1, size + 1):
        cluster.add_broker(broker_id)
    try:
        cluster.start(timeout=timeout)
    except BaseException:
        cluster.shutdown()
        raise
    return cluster


def random_cluster_id() -> str:
    """A cluster id as `kfk storage random-uuid` prints one (Kafka's Uuid in URL-safe base64, never starting with
    '-'), made here: kfk.testing imports nothing of kfk."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not text.startswith("-"):
            return text
