"""Replication: the partitions a broker hosts (leader or follower), their in-sync replicas and high watermark, and
the purgatories where acks=all produces and long-poll fetches wait (Kafka's ReplicaManager, Partition,
DelayedProduce, DelayedFetch)."""

from kfk.replication.fetch_params import FetchParams, FetchPartitionRequest, LogReadResult
from kfk.replication.partition import Partition
from kfk.replication.replica_manager import ReplicaManager

__all__ = ["FetchParams", "FetchPartitionRequest", "LogReadResult", "Partition", "ReplicaManager"]
