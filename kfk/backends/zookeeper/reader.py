"""Reading Kafka's znodes into a ZooKeeperSnapshot, setting a watch on each znode read.

A ZnodeReader caches what it read (data and stat per znode, children per listed path) and re-reads only the paths
whose watch fired; decoding is cached per znode version too. It runs in the backend's executor thread (kazoo's calls
block) under the backend's read lock; the backend turns watch events into dirty paths on its event loop.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from kfk.backends.zookeeper import znodes
from kfk.backends.zookeeper.translation import Operation, ZooKeeperSnapshot
from kfk.errors import CorruptRecordError
from kfk.metadata.image import ConfigResourceType

log = logging.getLogger("kfk.backends.zookeeper")

#: Paths whose children kfk lists (with a child watch); every other watched path is read for its data.
CHILDREN_PATHS = (znodes.BROKER_IDS_PATH, znodes.TOPICS_PATH, znodes.CONFIG_TOPICS_PATH, znodes.CONFIG_BROKERS_PATH,
                  znodes.CONFIG_USERS_PATH, znodes.DELETE_TOPICS_PATH, *znodes.ACL_TYPE_PATHS)
#: Notifications for other readers: never read back.
_NOTIFICATION_PATHS = (znodes.CONFIG_CHANGES_PATH, znodes.ACL_CHANGES_PATH, znodes.ACL_EXTENDED_CHANGES_PATH)
SINGLE_PATHS = (znodes.CLUSTER_ID_PATH, znodes.CONTROLLER_PATH, znodes.CONTROLLER_EPOCH_PATH, znodes.FEATURE_PATH,
                znodes.PRODUCER_ID_BLOCK_PATH, znodes.REASSIGN_PARTITIONS_PATH)


class _ZnodeCache:
    """What was read of each znode (data and stat) and each children list; only touched from the reading thread."""

    def __init__(self) -> None:
        self.data: dict[str, tuple[bytes, object]] = {}
        self.children: dict[str, list[str]] = {}
        self.offset = -1

    def forget_under(self, prefix: str) -> None:
        for path in [p for p in self.data if p == prefix or p.startswith(prefix + "/")]:
            del self.data[path]
        for path in [p for p in self.children if p == prefix or p.startswith(prefix + "/")]:
            del self.children[path]


class ZnodeReader:
    def __init__(self, watch: Callable[[object], None]) -> None:
        """`watch`: kazoo's watcher for every znode read (called on kazoo's thread)."""
        self._watch = watch
        self._cache = _ZnodeCache()
        self._decoded: dict[str, tuple[tuple[int, int], object]] = {}

    def known_path(self, path: str) -> bool:
        """Whether the znode existed when last read (translation.operations_for creates or sets by it)."""
        cache = self._cache
        if path in cache.data:
            return True
        parent, _, name = path.rpartition("/")
        return name in cache.children.get(parent, ())

    def read(self, client: KazooClient, dirty: set[str] | None, consume_isr_changes: bool) -> ZooKeeperSnapshot:
        """Read what is dirty (everything if None), set watches, and decode the whole cache. The controller
        (`consume_isr_changes`) also deletes the leaders' ISR change notifications."""
        cache = self._cache
        if dirty is None:
            cache.data.clear()
            cache.children.clear()
            for path in SINGLE_PATHS:
                self._read_data(client, path)
            for path in CHILDREN_PATHS:
                self._read_children(client, path, full=True)
        else:
            for path in sorted(dirty):
                if path in CHILDREN_PATHS:
                    self._read_children(client, path, full=False)
                elif path.count("/") == 3 and path.startswith(znodes.TOPICS_PATH + "/"):
                    self._read_topic(client, path.rsplit("/", 1)[1], states=False)
                else:
                    self._read_data(client, path)
        if consume_isr_changes:
            _delete_isr_change_notifications(client)
        return self._decode()

    def _read_data(self, client: KazooClient, path: str) -> bytes | None:
        try:
            data, stat = client.get(path, watch=self._watch)
        except NoNodeError:
            self._cache.data.pop(path, None)
            if client.exists(path, watch=self._watch) is not None:
                return self._read_data(client, path)
            return None
        self._cache.data[path] = (data, stat)
        self._cache.offset = max(self._cache.offset, stat.mzxid)
        return data

    def _read_children(self, client: KazooClient, path: str, full: bool) -> None:
        cache = self._cache
        try:
            children, stat = client.get_children(path, watch=self._watch, include_data=True)
            cache.offset = max(cache.offset, stat.pzxid)
        except NoNodeError:
            children = []
        previous = set(cache.children.get(path, ()))
        cache.children[path] = sorted(children)
        for gone in previous - set(children):
            cache.forget_under(f"{path}/{gone}")
        for child in sorted(children):
            if not full and child in previous:
                continue
            if path == znodes.TOPICS_PATH:
                self._read_topic(client, child, states=True)
            else:
                self._read_data(client, f"{path}/{child}")

    def _read_topic(self, client: KazooClient, topic: str, states: bool) -> None:
        """A topic's assignment znode and the state znodes of its partitions (only the new ones unless `states`)."""
        path = znodes.topic_path(topic)
        data = self._read_data(client, path)
        if data is None:
            self._cache.forget_under(path)
            return
        try:
            assignment = znodes.decode_topic(topic, data)
        except CorruptRecordError as error:
            log.error("%s", error)
            return
        for partition in assignment.partitions:
            state_path = znodes.partition_state_path(topic, partition)
            if states or state_path not in self._cache.data:
                self._read_data(client, state_path)

    def _decode(self) -> ZooKeeperSnapshot:
        """The snapshot of everything cached. A znode is decoded again only when it changed (its zxids moved), so a
        refresh after one partition's change costs a dictionary pass, not a thousand JSON parses."""
        cache = self._cache
        decoded = self._decoded
        snapshot = ZooKeeperSnapshot(offset=cache.offset)
        for path, (data, stat) in cache.data.items():
            version = (stat.mzxid, stat.czxid)
            entry = decoded.get(path)
            if entry is None or entry[0] != version:
                try:
                    value = _decode_znode(path, data, stat)
                except (CorruptRecordError, KeyError, TypeError, ValueError) as error:
                    log.error("ignoring znode %s: %s", path, error)
                    value = None
                entry = decoded[path] = (version, value)
            if entry[1] is not None:
                _place(snapshot, path, entry[1])
        if len(decoded) > 2 * len(cache.data) + 100:
            for path in [path for path in decoded if path not in cache.data]:
                del decoded[path]
        return snapshot


def paths_to_reread(operations: Sequence[Operation]) -> list[str]:
    """The paths a refresh must re-read after a multi-op: every znode written, and the children lists above
    created or deleted ones."""
    paths: list[str] = []
    for operation in operations:
        if operation.kind == "check" or operation.path.startswith(_NOTIFICATION_PATHS):
            continue
        if not _is_structural(operation.path):
            paths.append(operation.path)
        if operation.kind in ("create", "delete"):
            parent = operation.path.rsplit("/", 1)[0]
            if parent in CHILDREN_PATHS:
                paths.append(parent)
    return paths


def _delete_isr_change_notifications(client: KazooClient) -> None:
    """The controller consumes leaders' ISR change notifications (brokers already see the state znodes)."""
    try:
        for child in client.get_children(znodes.ISR_CHANGE_NOTIFICATION_PATH):
            try:
                client.delete(f"{znodes.ISR_CHANGE_NOTIFICATION_PATH}/{child}")
            except NoNodeError:
                pass
    except NoNodeError:
        pass


def _decode_znode(path: str, data: bytes, stat) -> object:
    """The decoded value of one of the znodes kfk reads (placed into a snapshot by `_place`)."""
    if path == znodes.CLUSTER_ID_PATH:
        return znodes.decode_cluster_id(data)
    if path == znodes.CONTROLLER_PATH:
        return znodes.decode_controller(data)
    if path == znodes.CONTROLLER_EPOCH_PATH:
        return znodes.decode_controller_epoch(data)
    if path == znodes.FEATURE_PATH:
        return znodes.decode_features(data)
    if path == znodes.PRODUCER_ID_BLOCK_PATH:
        return znodes.decode_producer_id_block_end(data)
    if path == znodes.REASSIGN_PARTITIONS_PATH:
        return znodes.decode_reassignment(data)
    if path.startswith(znodes.DELETE_TOPICS_PATH + "/"):
        return path.rsplit("/", 1)[1]
    if path.startswith(znodes.BROKER_IDS_PATH + "/"):
        broker_id = int(path.rsplit("/", 1)[1])
        return znodes.decode_broker(broker_id, data, stat.czxid)
    if path.startswith(znodes.CONFIG_PATH + "/"):
        return znodes.decode_config(path, data)
    if path.startswith((znodes.ACL_PATH + "/", znodes.ACL_PREFIXED_PATH + "/")):
        return znodes.decode_acls(path, data)
    parts = path.split("/")  # ['', 'brokers', 'topics', topic, ('partitions', p, 'state')]
    if len(parts) == 4:
        return znodes.decode_topic(parts[3], data)
    if len(parts) == 7 and parts[6] == "state":
        return znodes.decode_partition_state(path, data, stat.version)
    return None  # a structural znode (/partitions, /partitions/<p>): no data of its own


def _place(snapshot: ZooKeeperSnapshot, path: str, value) -> None:
    if path.startswith(znodes.TOPICS_PATH + "/"):
        parts = path.split("/")
        if len(parts) == 4:
            snapshot.topics[parts[3]] = value
        else:
            snapshot.partition_states[(parts[3], int(parts[5]))] = value
    elif path.startswith(znodes.BROKER_IDS_PATH + "/"):
        snapshot.brokers[value.broker_id] = value
    elif path.startswith(znodes.CONFIG_TOPICS_PATH + "/"):
        snapshot.configs[(ConfigResourceType.TOPIC, path.rsplit("/", 1)[1])] = value
    elif path.startswith(znodes.CONFIG_BROKERS_PATH + "/"):
        entity = path.rsplit("/", 1)[1]
        snapshot.configs[(ConfigResourceType.BROKER, "" if entity == znodes.DEFAULT_BROKER_CONFIG_ENTITY
                          else entity)] = value
    elif path.startswith(znodes.CONFIG_USERS_PATH + "/"):
        snapshot.user_configs[znodes.desanitize_entity(path.rsplit("/", 1)[1])] = value
    elif path.startswith(znodes.DELETE_TOPICS_PATH + "/"):
        snapshot.delete_topic_requests.append(value)
    elif path.startswith((znodes.ACL_PATH + "/", znodes.ACL_PREFIXED_PATH + "/")):
        pattern, entries = value
        snapshot.acls[pattern] = entries
    elif path == znodes.CLUSTER_ID_PATH:
        snapshot.cluster_id = value
    elif path == znodes.CONTROLLER_PATH:
        snapshot.controller_id = value
    elif path == znodes.CONTROLLER_EPOCH_PATH:
        snapshot.controller_epoch = value
    elif path == znodes.FEATURE_PATH:
        snapshot.features = value
    elif path == znodes.PRODUCER_ID_BLOCK_PATH:
        snapshot.producer_id_block_end = value
    elif path == znodes.REASSIGN_PARTITIONS_PATH:
        snapshot.reassignment_request = value


def _is_structural(path: str) -> bool:
    """/brokers/topics/<t>/partitions and /brokers/topics/<t>/partitions/<p> hold no data kfk reads."""
    return path.startswith(znodes.TOPICS_PATH + "/") and path.count("/") in (4, 5)
