"""Transaction markers on the broker side: writing them into this broker's partitions (TxnMarkerWriter, what
WriteTxnMarkers does) and delivering the coordinator's marker requests to whichever broker leads each partition
(TxnMarkerSender, the transaction coordinator's `send_markers`).

Writing: each marker becomes one control batch per partition (COMMIT or ABORT, the coordinator's epoch in its
value, the transaction's producer id and epoch in its header), appended by the partition leader as a COORDINATOR
append with acks=-1: the coordinator writes CompleteCommit/CompleteAbort only once every marker is committed. The
producer state refuses a marker from a coordinator epoch older than the last one it saw
(TRANSACTION_COORDINATOR_FENCED) or for an older producer epoch (INVALID_PRODUCER_EPOCH). A marker appended to a
__consumer_offsets partition also tells the group coordinator, which makes the transaction's offset commits visible
(commit) or drops them (abort).

Sending: a request for this broker is written directly, without a round trip; one for another broker goes over an
inter-broker connection (WriteTxnMarkers v1, kfk/server/inter_broker_channels.py). A broker with no live endpoint,
or a failed send, raises NetworkError: the coordinator looks the leader up again and retries.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from kfk.common.internal_topics import GROUP_METADATA_TOPIC_NAME
from kfk.coordinator.group.service import GroupCoordinatorService
from kfk.errors import ErrorCode
from kfk.protocol.messages.write_txn_markers import WriteTxnMarkersRequest, WriteTxnMarkersResponse
from kfk.records.control import ControlRecordType, EndTransactionMarker, build_end_transaction_marker_batch
from kfk.replication.replica_manager import ReplicaManager
from kfk.server.inter_broker_channels import InterBrokerChannels
from kfk.common.structs import TopicPartition
from kfk.storage.producer_state import AppendOrigin

log = logging.getLogger("kfk.server.txn_markers")

#: The WriteTxnMarkers version brokers send each other (the highest the vendored schemas have).
WRITE_TXN_MARKERS_VERSION = 1

MarkerResult = WriteTxnMarkersResponse.WritableTxnMarkerResult
MarkerTopicResult = WriteTxnMarkersResponse.WritableTxnMarkerTopicResult
MarkerPartitionResult = WriteTxnMarkersResponse.WritableTxnMarkerPartitionResult


class TxnMarkerWriter:
    """Appends the markers of a WriteTxnMarkersRequest to the partitions this broker leads."""

    def __init__(self, replica_manager: ReplicaManager, group_coordinator: GroupCoordinatorService,
                 now_ms: Callable[[], int], timeout_ms: int) -> None:
        self.replica_manager = replica_manager
        self.group_coordinator = group_coordinator
        self.now_ms = now_ms
        self.timeout_ms = timeout_ms

    async def write(self, request: WriteTxnMarkersRequest) -> WriteTxnMarkersResponse:
        """Every marker's partitions appended (the markers concurrently), with an error per partition."""
        results = await asyncio.gather(*(self._write_marker(marker) for marker in request.markers))
        return WriteTxnMarkersResponse(markers=list(results))

    async def _write_marker(self, marker: WriteTxnMarkersRequest.WritableTxnMarker) -> MarkerResult:
        control_type = ControlRecordType.COMMIT if marker.transaction_result else ControlRecordType.ABORT
        end_marker = EndTransactionMarker(control_type, marker.coordinator_epoch)
        now_ms = self.now_ms()
        entries: dict[TopicPartition, bytes] = {}
        for topic in marker.topics:
            for index in topic.partition_indexes:
                topic_partition = TopicPartition(topic.name, index)
                partition = self.replica_manager.get_partition(topic_partition)
                leader_epoch = partition.leader_epoch if partition is not None else -1
                entries[topic_partition] = build_end_transaction_marker_batch(
                    base_offset=0, timestamp=now_ms, partition_leader_epoch=leader_epoch,
                    producer_id=marker.producer_id, producer_epoch=marker.producer_epoch, marker=end_marker)
        appended = await self.replica_manager.append_records(self.timeout_ms, -1, entries, AppendOrigin.COORDINATOR)
        for topic_partition, result in appended.items():
            if topic_partition.topic == GROUP_METADATA_TOPIC_NAME and result.error == ErrorCode.NONE:
                self.group_coordinator.complete_transaction(topic_partition.partition, marker.producer_id,
                                                            marker.transaction_result)
            elif result.error != ErrorCode.NONE:
                log.debug("Marker of producer %d for %s failed: %s", marker.producer_id, topic_partition,
                          result.error.name)
        return MarkerResult(producer_id=marker.producer_id, topics=[
            MarkerTopicResult(name=topic.name, partitions=[
                MarkerPartitionResult(partition_index=index,
                                      error_code=appended[TopicPartition(topic.name, index)].error)
                for index in topic.partition_indexes])
            for topic in marker.topics])


class TxnMarkerSender:
    """The transaction coordinator's `send_markers(broker_id, request)`."""

    def __init__(self, node_id: int, writer: TxnMarkerWriter, channels: InterBrokerChannels) -> None:
        self.node_id = node_id
        self.writer = writer
        self.channels = channels

    async def send(self, broker_id: int, request: WriteTxnMarkersRequest) -> WriteTxnMarkersResponse:
        if broker_id == self.node_id:
            return await self.writer.write(request)
        return await self.channels.request(broker_id, request, WRITE_TXN_MARKERS_VERSION)
