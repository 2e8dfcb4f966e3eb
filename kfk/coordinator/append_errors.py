"""What a failed write to a coordinator topic becomes in the client's answer.

Both coordinators write their state with acks=-1 through the partition layer and must turn its errors into ones a
client acts on: the write could not be replicated now (retry: COORDINATOR_NOT_AVAILABLE), this broker no longer
leads the partition (find the coordinator again: NOT_COORDINATOR), or a size limit that only a bug can hit.
"""

from __future__ import annotations

from kfk.errors import ErrorCode


def append_error_to_response_error(error: ErrorCode) -> ErrorCode:
    """Kafka's mapping of a coordinator append error (appendGroupMetadataErrorToResponseError and
    TransactionStateManager.appendTransactionToLog agree on it)."""
    if error in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_ENOUGH_REPLICAS,
                 ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, ErrorCode.REQUEST_TIMED_OUT):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if error in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR):
        return ErrorCode.NOT_COORDINATOR
    if error in (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE, ErrorCode.INVALID_FETCH_SIZE):
        return ErrorCode.UNKNOWN_SERVER_ERROR
    return error
