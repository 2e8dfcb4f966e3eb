"""Opening, closing and (for tests) expiring a ZooKeeper session; the cluster id kept in /cluster/id.

Everything here blocks (kazoo's calls do): the backend runs it in an executor.
"""

from __future__ import annotations

import logging

from kazoo.client import KazooClient
from kazoo.exceptions import NodeExistsError
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.retry import KazooRetry

from kfk.backends.zookeeper import znodes
from kfk.errors import InconsistentClusterIdError, KafkaError

log = logging.getLogger("kfk.backends.zookeeper")


def split_chroot(connect: str) -> tuple[str, str]:
    """'h1:2181,h2:2181/kafka' -> ('h1:2181,h2:2181', '/kafka'); no chroot -> ''."""
    slash = connect.find("/")
    if slash < 0:
        return connect, ""
    return connect[:slash], connect[slash:].rstrip("/")


#: The longest pause between two reconnection attempts, in seconds.
MAX_RECONNECT_DELAY_S = 0.5


class _OncePerOutage(logging.Filter):
    """Lets each of kazoo's connection messages through once per outage: reconnecting every few hundred
    milliseconds would otherwise log "Connecting to ..." and "Connection dropped: ..." a hundred times in a 30 s
    ZooKeeper outage. An established connection ends the outage."""

    def __init__(self) -> None:
        super().__init__()
        self._seen: set[str] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        template = str(record.msg)
        if template.startswith("Zookeeper connection established"):
            self._seen.clear()
            return True
        if template in self._seen:
            return False
        self._seen.add(template)
        return True


#: kazoo's own log lines (its connection loop), deduplicated per outage.
_kazoo_log = logging.getLogger("kfk.backends.zookeeper.kazoo")
_kazoo_log.addFilter(_OncePerOutage())


def new_client(hosts: str, session_timeout_ms: int, client_id: tuple[int, bytes] | None = None) -> KazooClient:
    """A KazooClient that keeps trying to reconnect every few hundred milliseconds. kazoo's default connection retry
    doubles its pause up to an hour: after a 30 s ZooKeeper outage a client would wait 13-19 s more before trying
    again, longer than Kafka's 18 s session timeout, so ZooKeeper expired sessions that a prompt reconnect keeps
    (a restarted ZooKeeper gives every session it recovered a full timeout). The pause grows from 100 ms to at most
    MAX_RECONNECT_DELAY_S (or a tenth of the session timeout, if smaller) and attempts never stop."""
    max_delay = min(MAX_RECONNECT_DELAY_S, session_timeout_ms / 10_000)
    retry = KazooRetry(max_tries=-1, delay=min(0.1, max_delay), backoff=2, max_jitter=0.2, max_delay=max_delay)
    return KazooClient(hosts=hosts, timeout=session_timeout_ms / 1000, client_id=client_id, connection_retry=retry,
                       logger=_kazoo_log)


def open_session(connect: str, session_timeout_ms: int, connection_timeout_ms: int, cluster_id: str | None,
                 expected_cluster_id: str | None) -> tuple[KazooClient, str]:
    """A started client (the chroot and Kafka's persistent znodes created if missing) and the cluster id stored in
    ZooKeeper, which must be `cluster_id` and `expected_cluster_id` where given (else
    InconsistentClusterIdError)."""
    hosts, chroot = split_chroot(connect)
    timeout_s = connection_timeout_ms / 1000
    if chroot:
        root = new_client(hosts, session_timeout_ms)
        try:
            root.start(timeout=timeout_s)
            root.ensure_path(chroot)
        except KazooTimeoutError as error:
            raise KafkaError(f"Timed out connecting to ZooKeeper at {hosts}") from error
        finally:
            root.stop()
            root.close()
    client = new_client(connect, session_timeout_ms)
    try:
        client.start(timeout=timeout_s)
    except KazooTimeoutError as error:
        close_session(client)  # stop kazoo's connection thread too, or the process never exits
        raise KafkaError(f"Timed out connecting to ZooKeeper at {connect} after "
                         f"{connection_timeout_ms} ms") from error
    try:
        for path in znodes.PERSISTENT_PATHS:
            client.ensure_path(path)
        try:
            # Kafka's getOrGenerateClusterId: a new ZooKeeper gets a new id, even under a log dir that holds
            # one, so that log dirs of another cluster are refused rather than adopted.
            client.create(znodes.CLUSTER_ID_PATH, znodes.encode_cluster_id(cluster_id or _random_cluster_id()))
        except NodeExistsError:
            pass
        stored = znodes.decode_cluster_id(client.get(znodes.CLUSTER_ID_PATH)[0])
        for expected in (cluster_id, expected_cluster_id):
            if expected is not None and stored != expected:
                raise InconsistentClusterIdError(
                    f"The cluster id {expected} does not match the cluster id {stored} stored in ZooKeeper "
                    f"{connect} (a log dir of another cluster?)")
    except BaseException:
        close_session(client)  # kazoo's threads would keep the process alive
        raise
    log.info("connected to ZooKeeper %s (session 0x%x, cluster id %s)", connect, client.client_id[0], stored)
    return client, stored


def close_session(client: KazooClient) -> None:
    try:
        client.stop()
    finally:
        client.close()


def expire_session(client: KazooClient, connect: str, session_timeout_ms: int, connection_timeout_ms: int) -> None:
    """Make ZooKeeper expire `client`'s session, the way ZooKeeper's own tests do it: a second client that joins
    the session with its id and password, then closes it."""
    session_id, password = client.client_id
    hosts, _ = split_chroot(connect)
    other = new_client(hosts, session_timeout_ms, client_id=(session_id, password))
    other.start(timeout=connection_timeout_ms / 1000)
    other.stop()
    other.close()


def _random_cluster_id() -> str:
    from kfk.storage.format import random_cluster_id

    return random_cluster_id()
