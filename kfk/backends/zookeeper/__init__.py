"""The ZooKeeper metadata backend: Kafka's znode layout in a real ZooKeeper ensemble (kazoo).

`zookeeper.connect` in server.properties selects it. kazoo is imported by backend.py only; znodes.py (paths and
JSON payloads) and translation.py (records <-> znodes) are pure.
"""

from kfk.backends.zookeeper.backend import ZooKeeperMetadataBackend, split_chroot

__all__ = ["ZooKeeperMetadataBackend", "split_chroot"]
