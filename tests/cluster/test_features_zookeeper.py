"""Feature versions in ZooKeeper mode: UpdateFeatures goes to the controller the ZooKeeper election chose (any
other broker answers NOT_CONTROLLER and the client follows the Metadata's controller), which keeps the levels in the
/feature znode as Kafka 3.x's ZooKeeper controller did; metadata.version belongs to KRaft and is refused. Brokers
list the levels they support in their registration znode."""

from __future__ import annotations

import json

import pytest
from kazoo.client import KazooClient

from tests.cluster.helpers import wait_until
from tests.cluster.test_features import finalized, kfk_features

pytestmark = [pytest.mark.integration]


def test_levels_live_in_the_feature_znode(kfk_cluster_factory) -> None:
    cluster = kfk_cluster_factory(size=2)
    done = kfk_features(cluster.broker(2).bootstrap_servers, "downgrade", "--feature", "transaction.version=1")
    assert (done.returncode, done.stdout) == (0, "transaction.version was downgraded to 1.\n"), done.stderr
    for node in cluster.brokers.values():
        wait_until(lambda node=node: finalized(node.bootstrap_servers).get("transaction.version") == 1,
                   what=f"broker {node.node_id} at transaction.version 1")
    refused = kfk_features(cluster.bootstrap_servers, "upgrade", "--metadata", "3.3-IV3")
    assert refused.returncode == 1 and refused.stdout.splitlines()[-1] == (
        "Could not upgrade metadata.version to 7. The update failed for all features since the following feature "
        "had an error: Could not apply finalized feature update because the provided feature is not supported.")
    client = KazooClient(hosts=cluster.zookeeper_connect)
    client.start(timeout=10)
    try:
        features = json.loads(client.get("/feature")[0])["features"]
        broker = json.loads(client.get("/brokers/ids/1")[0])["features"]
    finally:
        client.stop()
        client.close()
    assert features["transaction.version"] == {"max_version_level": 1, "min_version_level": 1}
    assert broker == {"group.version": {"min_version": 0, "max_version": 1},
                      "kraft.version": {"min_version": 0, "max_version": 1},
                      "transaction.version": {"min_version": 0, "max_version": 2}}
