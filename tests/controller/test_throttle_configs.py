"""The replication throttles of reassignments as dynamic broker configs (set on any registered broker or
the cluster default, values bytes/s >= 0), and the follower's quota that enforces them."""

from __future__ import annotations

from kfk.common.config_types import ConfigResourceType
from kfk.controller.config_control import OpType
from kfk.errors import ErrorCode
from kfk.replication.replica_fetcher import ReplicationQuota
from tests.controller.test_configs import incremental

BROKER = ConfigResourceType.BROKER
RATE = "follower.replication.throttled.rate"


def test_throttle_rates_are_dynamic_broker_configs(cluster) -> None:
    cluster.register(2)
    assert incremental(cluster, BROKER, "2", (RATE, OpType.SET, "1000")) == (ErrorCode.NONE, None)
    assert incremental(cluster, BROKER, "", ("leader.replication.throttled.rate", OpType.SET, "5")) == (
        ErrorCode.NONE, None)
    assert dict(cluster.image.config(BROKER, "2")) == {RATE: "1000"}
    assert dict(cluster.image.config(BROKER, "")) == {"leader.replication.throttled.rate": "5"}
    assert incremental(cluster, BROKER, "2", (RATE, OpType.SET, "-1"))[0] == ErrorCode.INVALID_REQUEST  # as Kafka
    assert incremental(cluster, BROKER, "2", (RATE, OpType.SET, "1000"),
                       ("log.retention.hours", OpType.SET, "1")) == (
        ErrorCode.INVALID_REQUEST, "Cannot update these configs dynamically: log.retention.hours")
    assert incremental(cluster, BROKER, "2", (RATE, OpType.DELETE, None)) == (ErrorCode.NONE, None)
    assert not cluster.image.config(BROKER, "2")
    assert incremental(cluster, BROKER, "9", (RATE, OpType.SET, "1"))[0] == ErrorCode.INVALID_REQUEST


def test_the_quota_admits_the_rate_with_one_second_of_burst() -> None:
    now = [100.0]
    quota = ReplicationQuota(lambda: now[0])
    assert not quota.is_exceeded()  # no rate: never
    quota.update_rate(1000)
    quota.record(1500)
    assert quota.is_exceeded()
    now[0] += 0.4
    assert quota.is_exceeded()
    now[0] += 0.2
    assert not quota.is_exceeded()
    now[0] += 60
    quota.record(1000)
    assert not quota.is_exceeded()  # the burst is capped at one second of rate
    quota.record(1)
    assert quota.is_exceeded()
    quota.update_rate(None)
    assert not quota.is_exceeded()
