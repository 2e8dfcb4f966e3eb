"""Test helpers for projects that use Kafka: real kfk brokers in subprocesses, as pytest fixtures.

`pip install kfk` registers the pytest plugin (kfk.testing.plugin); a test then asks for `kfk_broker` and gets the
bootstrap address of a fresh single-node broker on an ephemeral port with its own temporary log dir. No JVM, no
Docker. Multi-broker clusters (`kfk_cluster`, `kfk_cluster_factory`) run on ZooKeeper, which is Java: they use
the ZooKeeper installed on the machine (Debian's `zookeeper` package) through `zookeeper_server`. Apache Kafka
itself (kfk.testing.apache_kafka, fixtures `apache_kafka` and `apache_kafka_factory`) is there to compare with.
"""

from kfk.testing.apache_kafka import ApacheKafka, run_kafka_tool
from kfk.testing.broker import BrokerProcess, start_broker
from kfk.testing.cluster import KfkCluster, start_cluster
from kfk.testing.zookeeper import ZooKeeperServer, start_ensemble

__all__ = ["ApacheKafka", "BrokerProcess", "KfkCluster", "ZooKeeperServer", "run_kafka_tool", "start_broker",
           "start_cluster", "start_ensemble"]
