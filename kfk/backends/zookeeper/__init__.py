"""The ZooKeeper metadata backend: Kafka's znode layout in a real ZooKeeper ensemble (kazoo).

`zookeeper.connect` in server.properties selects it. kazoo is imported only in this package: backend.py is the
facade, the modules beside it do the blocking ZooKeeper work; znodes.py (paths and JSON payloads) and
translation.py (records <-> znodes) are pure.
"""

from kfk.backends.zookeeper.backend import ZooKeeperMetadataBackend
from kfk.backends.zookeeper.session import split_chroot

__all__ = ["ZooKeeperMetadataBackend", "split_chroot"]
