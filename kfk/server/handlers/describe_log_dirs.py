"""DescribeLogDirs (key 35) v0-v5 and AlterReplicaLogDirs (key 34) v1-v2.

DescribeLogDirs: every log dir of this broker with the size of each partition it holds (all partitions when topics
is null, else the ones asked for), offset_lag 0 (the log end is never behind the high watermark; -1 for a log whose
partition is not hosted), and the future replicas being copied into a dir by AlterReplicaLogDirs (is_future_key true,
size copied so far). v1 is v0, v2 is flexible, v3 adds the top-level error_code, v4 the volume's total and usable
bytes, v5 is_cordoned (false: kfk cordons no log dir).

AlterReplicaLogDirs starts moving replicas into other log dirs of this broker and answers before the moves end, as
Kafka does (ReplicaManager.alter_replica_log_dir): LOG_DIR_NOT_FOUND for a dir not in log.dirs,
REPLICA_NOT_AVAILABLE for a partition this broker does not host, KAFKA_STORAGE_ERROR for an offline dir; a partition
whose log is being created (DescribeLogDirs may list it already) is answered once it is hosted. Kafka 4 dropped v0;
v1 is v0 on the wire, v2 is flexible.
"""

from __future__ import annotations

from kfk.common.structs import TopicPartition
from kfk.errors import ErrorCode
from kfk.protocol.messages import ApiKey
from kfk.protocol.messages.alter_replica_log_dirs import AlterReplicaLogDirsRequest, AlterReplicaLogDirsResponse
from kfk.protocol.messages.describe_log_dirs import DescribeLogDirsRequest, DescribeLogDirsResponse
from kfk.replication.replica_manager import ReplicaManager
from kfk.security.acl import AclOperation, ResourceType
from kfk.server.authorization import ALLOW_ALL, RequestAuthorizer
from kfk.server.dispatch import Dispatcher, RequestContext

DescribeLogDirsResult = DescribeLogDirsResponse.DescribeLogDirsResult
DescribeLogDirsTopic = DescribeLogDirsResponse.DescribeLogDirsTopic
DescribeLogDirsPartition = DescribeLogDirsResponse.DescribeLogDirsPartition
AlterReplicaLogDirTopicResult = AlterReplicaLogDirsResponse.AlterReplicaLogDirTopicResult
AlterReplicaLogDirPartitionResult = AlterReplicaLogDirsResponse.AlterReplicaLogDirPartitionResult


class DescribeLogDirsHandler:
    """DESCRIBE on the cluster to describe log dirs, ALTER to move replicas (CLUSTER_AUTHORIZATION_FAILED)."""

    def __init__(self, replica_manager: ReplicaManager, auth: RequestAuthorizer = ALLOW_ALL) -> None:
        self.replica_manager = replica_manager
        self.auth = auth

    def register(self, dispatcher: Dispatcher) -> None:
        dispatcher.register(ApiKey.DESCRIBE_LOG_DIRS, self.describe_log_dirs)
        dispatcher.register(ApiKey.ALTER_REPLICA_LOG_DIRS, self.alter_replica_log_dirs)

    async def alter_replica_log_dirs(self, context: RequestContext,
                                     request: AlterReplicaLogDirsRequest) -> AlterReplicaLogDirsResponse:
        results: dict[str, list[AlterReplicaLogDirPartitionResult]] = {}
        allowed = self.auth.authorize(context, AclOperation.ALTER, ResourceType.CLUSTER)
        for log_dir in request.dirs:
            for topic in log_dir.topics:
                for index in topic.partitions:
                    error = await self.replica_manager.alter_replica_log_dir(TopicPartition(topic.name, index),
                                                                             log_dir.path) \
                        if allowed else ErrorCode.CLUSTER_AUTHORIZATION_FAILED
                    results.setdefault(topic.name, []).append(
                        AlterReplicaLogDirPartitionResult(partition_index=index, error_code=error))
        return AlterReplicaLogDirsResponse(results=[
            AlterReplicaLogDirTopicResult(topic_name=name, partitions=partitions)
            for name, partitions in results.items()])

    async def describe_log_dirs(self, context: RequestContext,
                                request: DescribeLogDirsRequest) -> DescribeLogDirsResponse:
        replica_manager = self.replica_manager
        if not self.auth.authorize(context, AclOperation.DESCRIBE, ResourceType.CLUSTER):
            return DescribeLogDirsResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        wanted = None
        if request.topics is not None:
            wanted = {TopicPartition(topic.topic, index) for topic in request.topics for index in topic.partitions}
        results = [
            DescribeLogDirsResult(
                error_code=description.error,
                log_dir=description.path,
                topics=[DescribeLogDirsTopic(name=topic, partitions=[
                    DescribeLogDirsPartition(partition_index=partition.partition, partition_size=partition.size,
                                             offset_lag=partition.offset_lag, is_future_key=partition.is_future)
                    for partition in partitions]) for topic, partitions in description.topics.items()],
                total_bytes=description.total_bytes,
                usable_bytes=description.usable_bytes,
            )
            for description in replica_manager.describe_log_dirs(wanted)
        ]
        return DescribeLogDirsResponse(error_code=ErrorCode.NONE, results=results)
