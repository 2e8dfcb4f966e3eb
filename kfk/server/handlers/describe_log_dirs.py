"""DescribeLogDirs (key 35), v0-v4.

Every log dir of this broker with the size of each partition it holds (all partitions when topics is null, else the
ones asked for), offset_lag 0 (the log end is never behind the high watermark) and is_future false (no replica is
being moved between dirs). v1 is v0, v2 is flexible, v3 adds the top-level error_code, v4 the volume's total and
usable bytes.
"""

from __future__ import annotations

from kfk.common.structs import TopicPartition
from kfk.errors import ErrorCode
from kfk.protocol.messages import ApiKey
from kfk.protocol.messages.describe_log_dirs import DescribeLogDirsRequest, DescribeLogDirsResponse
from kfk.replication.replica_manager import ReplicaManager
from kfk.server.dispatch import Dispatcher, RequestContext

DescribeLogDirsResult = DescribeLogDirsResponse.DescribeLogDirsResult
DescribeLogDirsTopic = DescribeLogDirsResponse.DescribeLogDirsTopic
DescribeLogDirsPartition = DescribeLogDirsResponse.DescribeLogDirsPartition


class DescribeLogDirsHandler:
    def __init__(self, replica_manager: ReplicaManager) -> None:
        self.replica_manager = replica_manager

    def register(self, dispatcher: Dispatcher) -> None:
        dispatcher.register(ApiKey.DESCRIBE_LOG_DIRS, self.describe_log_dirs)

    async def describe_log_dirs(self, context: RequestContext,
                                request: DescribeLogDirsRequest) -> DescribeLogDirsResponse:
        replica_manager = self.replica_manager
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
