"""Kafka's protocol error codes and the exceptions that carry them.

Every Kafka response reports failure as a signed 16-bit error code. This module is kfk's one table of those codes as
Apache Kafka 4.0 defines them (-1 UNKNOWN_SERVER_ERROR, 0 NONE, 1 .. 129): the name, the default message the broker
sends, and whether the client may retry. A code is retriable when Kafka's exception for it is a RetriableException
(directly or via InvalidMetadataException, the "refresh metadata, then retry" family).

Each code except NONE has one exception class, named after Kafka's exception with ``Exception`` -> ``Error`` (so
``CorruptRecordException`` is ``CorruptRecordError``). The broker raises these deep inside storage or coordinator
code and the request handler turns ``e.error_code`` into the response field; the client does the reverse with
``raise_for_code``. Codes newer than Kafka 4.0 (e.g. from a newer broker) map to ``UnknownServerError``, as a 4.0
Java client does.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from types import MappingProxyType
from typing import ClassVar, NamedTuple


@enum.unique
class ErrorCode(enum.IntEnum):
    """Kafka's error codes, under Kafka's own names (``Errors`` enum of Apache Kafka 4.0)."""

    UNKNOWN_SERVER_ERROR = -1
    NONE = 0
    OFFSET_OUT_OF_RANGE = 1
    CORRUPT_MESSAGE = 2
    UNKNOWN_TOPIC_OR_PARTITION = 3
    INVALID_FETCH_SIZE = 4
    LEADER_NOT_AVAILABLE = 5
    NOT_LEADER_OR_FOLLOWER = 6
    REQUEST_TIMED_OUT = 7
    BROKER_NOT_AVAILABLE = 8
    REPLICA_NOT_AVAILABLE = 9
    MESSAGE_TOO_LARGE = 10
    STALE_CONTROLLER_EPOCH = 11
    OFFSET_METADATA_TOO_LARGE = 12
    NETWORK_EXCEPTION = 13
    COORDINATOR_LOAD_IN_PROGRESS = 14
    COORDINATOR_NOT_AVAILABLE = 15
    NOT_COORDINATOR = 16
    INVALID_TOPIC_EXCEPTION = 17
    RECORD_LIST_TOO_LARGE = 18
    NOT_ENOUGH_REPLICAS = 19
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20
    INVALID_REQUIRED_ACKS = 21
    ILLEGAL_GENERATION = 22
    INCONSISTENT_GROUP_PROTOCOL = 23
    INVALID_GROUP_ID = 24
    UNKNOWN_MEMBER_ID = 25
    INVALID_SESSION_TIMEOUT = 26
    REBALANCE_IN_PROGRESS = 27
    INVALID_COMMIT_OFFSET_SIZE = 28
    TOPIC_AUTHORIZATION_FAILED = 29
    GROUP_AUTHORIZATION_FAILED = 30
    CLUSTER_AUTHORIZATION_FAILED = 31
    INVALID_TIMESTAMP = 32
    UNSUPPORTED_SASL_MECHANISM = 33
    ILLEGAL_SASL_STATE = 34
    UNSUPPORTED_VERSION = 35
    TOPIC_ALREADY_EXISTS = 36
    INVALID_PARTITIONS = 37
    INVALID_REPLICATION_FACTOR = 38
    INVALID_REPLICA_ASSIGNMENT = 39
    INVALID_CONFIG = 40
    NOT_CONTROLLER = 41
    INVALID_REQUEST = 42
    UNSUPPORTED_FOR_MESSAGE_FORMAT = 43
    POLICY_VIOLATION = 44
    OUT_OF_ORDER_SEQUENCE_NUMBER = 45
    DUPLICATE_SEQUENCE_NUMBER = 46
    INVALID_PRODUCER_EPOCH = 47
    INVALID_TXN_STATE = 48
    INVALID_PRODUCER_ID_MAPPING = 49
    INVALID_TRANSACTION_TIMEOUT = 50
    CONCURRENT_TRANSACTIONS = 51
    TRANSACTION_COORDINATOR_FENCED = 52
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
    SECURITY_DISABLED = 54
    OPERATION_NOT_ATTEMPTED = 55
    KAFKA_STORAGE_ERROR = 56
    LOG_DIR_NOT_FOUND = 57
    SASL_AUTHENTICATION_FAILED = 58
    UNKNOWN_PRODUCER_ID = 59
    REASSIGNMENT_IN_PROGRESS = 60
    DELEGATION_TOKEN_AUTH_DISABLED = 61
    DELEGATION_TOKEN_NOT_FOUND = 62
    DELEGATION_TOKEN_OWNER_MISMATCH = 63
    DELEGATION_TOKEN_REQUEST_NOT_ALLOWED = 64
    DELEGATION_TOKEN_AUTHORIZATION_FAILED = 65
    DELEGATION_TOKEN_EXPIRED = 66
    INVALID_PRINCIPAL_TYPE = 67
    NON_EMPTY_GROUP = 68
    GROUP_ID_NOT_FOUND = 69
    FETCH_SESSION_ID_NOT_FOUND = 70
    INVALID_FETCH_SESSION_EPOCH = 71
    LISTENER_NOT_FOUND = 72
    TOPIC_DELETION_DISABLED = 73
    FENCED_LEADER_EPOCH = 74
    UNKNOWN_LEADER_EPOCH = 75
    UNSUPPORTED_COMPRESSION_TYPE = 76
    STALE_BROKER_EPOCH = 77
    OFFSET_NOT_AVAILABLE = 78
    MEMBER_ID_REQUIRED = 79
    PREFERRED_LEADER_NOT_AVAILABLE = 80
    GROUP_MAX_SIZE_REACHED = 81
    FENCED_INSTANCE_ID = 82
    ELIGIBLE_LEADERS_NOT_AVAILABLE = 83
    ELECTION_NOT_NEEDED = 84
    NO_REASSIGNMENT_IN_PROGRESS = 85
    GROUP_SUBSCRIBED_TO_TOPIC = 86
    INVALID_RECORD = 87
    UNSTABLE_OFFSET_COMMIT = 88
    THROTTLING_QUOTA_EXCEEDED = 89
    PRODUCER_FENCED = 90
    RESOURCE_NOT_FOUND = 91
    DUPLICATE_RESOURCE = 92
    UNACCEPTABLE_CREDENTIAL = 93
    INCONSISTENT_VOTER_SET = 94
    INVALID_UPDATE_VERSION = 95
    FEATURE_UPDATE_FAILED = 96
    PRINCIPAL_DESERIALIZATION_FAILURE = 97
    SNAPSHOT_NOT_FOUND = 98
    POSITION_OUT_OF_RANGE = 99
    UNKNOWN_TOPIC_ID = 100
    DUPLICATE_BROKER_REGISTRATION = 101
    BROKER_ID_NOT_REGISTERED = 102
    INCONSISTENT_TOPIC_ID = 103
    INCONSISTENT_CLUSTER_ID = 104
    TRANSACTIONAL_ID_NOT_FOUND = 105
    FETCH_SESSION_TOPIC_ID_ERROR = 106
    INELIGIBLE_REPLICA = 107
    NEW_LEADER_ELECTED = 108
    OFFSET_MOVED_TO_TIERED_STORAGE = 109
    FENCED_MEMBER_EPOCH = 110
    UNRELEASED_INSTANCE_ID = 111
    UNSUPPORTED_ASSIGNOR = 112
    STALE_MEMBER_EPOCH = 113
    MISMATCHED_ENDPOINT_TYPE = 114
    UNSUPPORTED_ENDPOINT_TYPE = 115
    UNKNOWN_CONTROLLER_ID = 116
    UNKNOWN_SUBSCRIPTION_ID = 117
    TELEMETRY_TOO_LARGE = 118
    INVALID_REGISTRATION = 119
    TRANSACTION_ABORTABLE = 120
    INVALID_RECORD_STATE = 121
    SHARE_SESSION_NOT_FOUND = 122
    INVALID_SHARE_SESSION_EPOCH = 123
    FENCED_STATE_EPOCH = 124
    INVALID_VOTER_KEY = 125
    DUPLICATE_VOTER = 126
    VOTER_NOT_FOUND = 127
    INVALID_REGULAR_EXPRESSION = 128
    REBOOTSTRAP_REQUIRED = 129
    # Kafka 4.1's (KIP-1071 streams groups, KIP-932's bounded share session cache)
    STREAMS_INVALID_TOPOLOGY = 130
    STREAMS_INVALID_TOPOLOGY_EPOCH = 131
    STREAMS_TOPOLOGY_FENCED = 132
    SHARE_SESSION_LIMIT_REACHED = 133


class ErrorInfo(NamedTuple):
    """What Kafka publishes about one error code (the protocol guide's error table)."""

    code: ErrorCode
    name: str
    retriable: bool
    message: str


_E = ErrorCode

# Codes whose Kafka exception extends RetriableException. Kafka 4.0's InvalidMetadataException subclasses (retry after
# a metadata refresh) are the first group; the direct RetriableException subclasses are the second.
INVALID_METADATA: frozenset[ErrorCode] = frozenset({
    _E.UNKNOWN_TOPIC_OR_PARTITION, _E.LEADER_NOT_AVAILABLE, _E.NOT_LEADER_OR_FOLLOWER, _E.REPLICA_NOT_AVAILABLE,
    _E.NETWORK_EXCEPTION, _E.KAFKA_STORAGE_ERROR, _E.LISTENER_NOT_FOUND, _E.FENCED_LEADER_EPOCH,
    _E.PREFERRED_LEADER_NOT_AVAILABLE, _E.ELIGIBLE_LEADERS_NOT_AVAILABLE, _E.ELECTION_NOT_NEEDED,
    _E.UNKNOWN_TOPIC_ID, _E.INCONSISTENT_TOPIC_ID,
})
_RETRIABLE: frozenset[ErrorCode] = INVALID_METADATA | frozenset({
    _E.CORRUPT_MESSAGE, _E.REQUEST_TIMED_OUT, _E.COORDINATOR_LOAD_IN_PROGRESS, _E.COORDINATOR_NOT_AVAILABLE,
    _E.NOT_COORDINATOR, _E.NOT_ENOUGH_REPLICAS, _E.NOT_ENOUGH_REPLICAS_AFTER_APPEND, _E.NOT_CONTROLLER,
    _E.CONCURRENT_TRANSACTIONS, _E.FETCH_SESSION_ID_NOT_FOUND, _E.INVALID_FETCH_SESSION_EPOCH,
    _E.UNKNOWN_LEADER_EPOCH, _E.OFFSET_NOT_AVAILABLE, _E.UNSTABLE_OFFSET_COMMIT, _E.THROTTLING_QUOTA_EXCEEDED,
    _E.FETCH_SESSION_TOPIC_ID_ERROR, _E.SHARE_SESSION_NOT_FOUND, _E.INVALID_SHARE_SESSION_EPOCH,
    _E.SHARE_SESSION_LIMIT_REACHED,
})

# The default message a Kafka broker attaches to each code. Clients print these, so they stay word for word.
_MESSAGES: dict[ErrorCode, str] = {
    _E.UNKNOWN_SERVER_ERROR: "The server experienced an unexpected error when processing the request.",
    _E.NONE: "",
    _E.OFFSET_OUT_OF_RANGE: "The requested offset is not within the range of offsets maintained by the server.",
    _E.CORRUPT_MESSAGE: "This message has failed its CRC checksum, exceeds the valid size, has a null key for a "
                        "compacted topic, or is otherwise corrupt.",
    _E.UNKNOWN_TOPIC_OR_PARTITION: "This server does not host this topic-partition.",
    _E.INVALID_FETCH_SIZE: "The requested fetch size is invalid.",
    _E.LEADER_NOT_AVAILABLE: "There is no leader for this topic-partition as we are in the middle of a leadership "
                             "election.",
    _E.NOT_LEADER_OR_FOLLOWER: "For requests intended only for the leader, this error indicates that the broker is "
                               "not the current leader. For requests intended for any replica, this error indicates "
                               "that the broker is not a replica of the topic partition.",
    _E.REQUEST_TIMED_OUT: "The request timed out.",
    _E.BROKER_NOT_AVAILABLE: "The broker is not available.",
    _E.REPLICA_NOT_AVAILABLE: "The replica is not available for the requested topic-partition. Produce/Fetch "
                              "requests and other requests intended only for the leader or follower return "
                              "NOT_LEADER_OR_FOLLOWER if the broker is not a replica of the topic-partition.",
    _E.MESSAGE_TOO_LARGE: "The request included a message larger than the max message size the server will accept.",
    _E.STALE_CONTROLLER_EPOCH: "The controller moved to another broker.",
    _E.OFFSET_METADATA_TOO_LARGE: "The metadata field of the offset request was too large.",
    _E.NETWORK_EXCEPTION: "The server disconnected before a response was received.",
    _E.COORDINATOR_LOAD_IN_PROGRESS: "The coordinator is loading and hence can't process requests.",
    _E.COORDINATOR_NOT_AVAILABLE: "The coordinator is not available.",
    _E.NOT_COORDINATOR: "This is not the correct coordinator.",
    _E.INVALID_TOPIC_EXCEPTION: "The request attempted to perform an operation on an invalid topic.",
    _E.RECORD_LIST_TOO_LARGE: "The request included message batch larger than the configured segment size on the "
                              "server.",
    _E.NOT_ENOUGH_REPLICAS: "Messages are rejected since there are fewer in-sync replicas than required.",
    _E.NOT_ENOUGH_REPLICAS_AFTER_APPEND: "Messages are written to the log, but to fewer in-sync replicas than "
                                         "required.",
    _E.INVALID_REQUIRED_ACKS: "Produce request specified an invalid value for required acks.",
    _E.ILLEGAL_GENERATION: "Specified group generation id is not valid.",
    _E.INCONSISTENT_GROUP_PROTOCOL: "The group member's supported protocols are incompatible with those of existing "
                                    "members or first group member tried to join with empty protocol type or empty "
                                    "protocol list.",
    _E.INVALID_GROUP_ID: "The group id is invalid.",
    _E.UNKNOWN_MEMBER_ID: "The coordinator is not aware of this member.",
    _E.INVALID_SESSION_TIMEOUT: "The session timeout is not within the range allowed by the broker (as configured "
                                "by group.min.session.timeout.ms and group.max.session.timeout.ms).",
    _E.REBALANCE_IN_PROGRESS: "The group is rebalancing, so a rejoin is needed.",
    _E.INVALID_COMMIT_OFFSET_SIZE: "The committing offset data size is not valid.",
    _E.TOPIC_AUTHORIZATION_FAILED: "Topic authorization failed.",
    _E.GROUP_AUTHORIZATION_FAILED: "Group authorization failed.",
    _E.CLUSTER_AUTHORIZATION_FAILED: "Cluster authorization failed.",
    _E.INVALID_TIMESTAMP: "The timestamp of the message is out of acceptable range.",
    _E.UNSUPPORTED_SASL_MECHANISM: "The broker does not support the requested SASL mechanism.",
    _E.ILLEGAL_SASL_STATE: "Request is not valid given the current SASL state.",
    _E.UNSUPPORTED_VERSION: "The version of API is not supported.",
    _E.TOPIC_ALREADY_EXISTS: "Topic with this name already exists.",
    _E.INVALID_PARTITIONS: "Number of partitions is below 1.",
    _E.INVALID_REPLICATION_FACTOR: "Replication factor is below 1 or larger than the number of available brokers.",
    _E.INVALID_REPLICA_ASSIGNMENT: "Replica assignment is invalid.",
    _E.INVALID_CONFIG: "Configuration is invalid.",
    _E.NOT_CONTROLLER: "This is not the correct controller for this cluster.",
    _E.INVALID_REQUEST: "This most likely occurs because of a request being malformed by the client library or the "
                        "message was sent to an incompatible broker. See the broker logs for more details.",
    _E.UNSUPPORTED_FOR_MESSAGE_FORMAT: "The message format version on the broker does not support the request.",
    _E.POLICY_VIOLATION: "Request parameters do not satisfy the configured policy.",
    _E.OUT_OF_ORDER_SEQUENCE_NUMBER: "The broker received an out of order sequence number.",
    _E.DUPLICATE_SEQUENCE_NUMBER: "The broker received a duplicate sequence number.",
    _E.INVALID_PRODUCER_EPOCH: "Producer attempted to produce with an old epoch.",
    _E.INVALID_TXN_STATE: "The producer attempted a transactional operation in an invalid state.",
    _E.INVALID_PRODUCER_ID_MAPPING: "The producer attempted to use a producer id which is not currently assigned to "
                                    "its transactional id.",
    _E.INVALID_TRANSACTION_TIMEOUT: "The transaction timeout is larger than the maximum value allowed by the broker "
                                    "(as configured by transaction.max.timeout.ms).",
    _E.CONCURRENT_TRANSACTIONS: "The producer attempted to update a transaction while another concurrent operation "
                                "on the same transaction was ongoing.",
    _E.TRANSACTION_COORDINATOR_FENCED: "Indicates that the transaction coordinator sending a WriteTxnMarker is no "
                                       "longer the current coordinator for a given producer.",
    _E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED: "Transactional Id authorization failed.",
    _E.SECURITY_DISABLED: "Security features are disabled.",
    _E.OPERATION_NOT_ATTEMPTED: "The broker did not attempt to execute this operation. This may happen for batched "
                                "RPCs where some operations in the batch failed, causing the broker to respond "
                                "without trying the rest.",
    _E.KAFKA_STORAGE_ERROR: "Disk error when trying to access log file on the disk.",
    _E.LOG_DIR_NOT_FOUND: "The user-specified log directory is not found in the broker config.",
    _E.SASL_AUTHENTICATION_FAILED: "SASL Authentication failed.",
    _E.UNKNOWN_PRODUCER_ID: "This exception is raised by the broker if it could not locate the producer metadata "
                            "associated with the producerId in question. This could happen if, for instance, the "
                            "producer's records were deleted because their retention time had elapsed. Once the "
                            "last records of the producerId are removed, the producer's metadata is removed from "
                            "the broker, and future appends by the producer will return this exception.",
    _E.REASSIGNMENT_IN_PROGRESS: "A partition reassignment is in progress.",
    _E.DELEGATION_TOKEN_AUTH_DISABLED: "Delegation Token feature is not enabled.",
    _E.DELEGATION_TOKEN_NOT_FOUND: "Delegation Token is not found on server.",
    _E.DELEGATION_TOKEN_OWNER_MISMATCH: "Specified Principal is not valid Owner/Renewer.",
    _E.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED: "Delegation Token requests are not allowed on PLAINTEXT/1-way SSL "
                                             "channels and on delegation token authenticated channels.",
    _E.DELEGATION_TOKEN_AUTHORIZATION_FAILED: "Delegation Token authorization failed.",
    _E.DELEGATION_TOKEN_EXPIRED: "Delegation Token is expired.",
    _E.INVALID_PRINCIPAL_TYPE: "Supplied principalType is not supported.",
    _E.NON_EMPTY_GROUP: "The group is not empty.",
    _E.GROUP_ID_NOT_FOUND: "The group id does not exist.",
    _E.FETCH_SESSION_ID_NOT_FOUND: "The fetch session ID was not found.",
    _E.INVALID_FETCH_SESSION_EPOCH: "The fetch session epoch is invalid.",
    _E.LISTENER_NOT_FOUND: "There is no listener on the leader broker that matches the listener on which metadata "
                           "request was processed.",
    _E.TOPIC_DELETION_DISABLED: "Topic deletion is disabled.",
    _E.FENCED_LEADER_EPOCH: "The leader epoch in the request is older than the epoch on the broker.",
    _E.UNKNOWN_LEADER_EPOCH: "The leader epoch in the request is newer than the epoch on the broker.",
    _E.UNSUPPORTED_COMPRESSION_TYPE: "The requesting client does not support the compression type of given "
                                     "partition.",
    _E.STALE_BROKER_EPOCH: "Broker epoch has changed.",
    _E.OFFSET_NOT_AVAILABLE: "The leader high watermark has not caught up from a recent leader election so the "
                             "offsets cannot be guaranteed to be monotonically increasing.",
    _E.MEMBER_ID_REQUIRED: "The group member needs to have a valid member id before actually entering a consumer "
                           "group.",
    _E.PREFERRED_LEADER_NOT_AVAILABLE: "The preferred leader was not available.",
    _E.GROUP_MAX_SIZE_REACHED: "The group has reached its maximum size.",
    _E.FENCED_INSTANCE_ID: "The broker rejected this static consumer since another consumer with the same "
                           "group.instance.id has registered with a different member.id.",
    _E.ELIGIBLE_LEADERS_NOT_AVAILABLE: "Eligible topic partition leaders are not available.",
    _E.ELECTION_NOT_NEEDED: "Leader election not needed for topic partition.",
    _E.NO_REASSIGNMENT_IN_PROGRESS: "No partition reassignment is in progress.",
    _E.GROUP_SUBSCRIBED_TO_TOPIC: "Deleting offsets of a topic is forbidden while the consumer group is actively "
                                  "subscribed to it.",
    _E.INVALID_RECORD: "This record has failed the validation on broker and hence will be rejected.",
    _E.UNSTABLE_OFFSET_COMMIT: "There are unstable offsets that need to be cleared.",
    _E.THROTTLING_QUOTA_EXCEEDED: "The throttling quota has been exceeded.",
    _E.PRODUCER_FENCED: "There is a newer producer with the same transactionalId which fences the current one.",
    _E.RESOURCE_NOT_FOUND: "A request illegally referred to a resource that does not exist.",
    _E.DUPLICATE_RESOURCE: "A request illegally referred to the same resource twice.",
    _E.UNACCEPTABLE_CREDENTIAL: "Requested credential would not meet criteria for acceptability.",
    _E.INCONSISTENT_VOTER_SET: "Indicates that the either the sender or recipient of a voter-only request is not one "
                               "of the expected voters.",
    _E.INVALID_UPDATE_VERSION: "The given update version was invalid.",
    _E.FEATURE_UPDATE_FAILED: "Unable to update finalized features due to an unexpected server error.",
    _E.PRINCIPAL_DESERIALIZATION_FAILURE: "Request principal deserialization failed during forwarding. This "
                                          "indicates an internal error on the broker cluster security setup.",
    _E.SNAPSHOT_NOT_FOUND: "Requested snapshot was not found.",
    _E.POSITION_OUT_OF_RANGE: "Requested position is not greater than or equal to zero, and less than the size of "
                              "the snapshot.",
    _E.UNKNOWN_TOPIC_ID: "This server does not host this topic ID.",
    _E.DUPLICATE_BROKER_REGISTRATION: "This broker ID is already in use.",
    _E.BROKER_ID_NOT_REGISTERED: "The given broker ID was not registered.",
    _E.INCONSISTENT_TOPIC_ID: "The log's topic ID did not match the topic ID in the request.",
    _E.INCONSISTENT_CLUSTER_ID: "The clusterId in the request does not match that found on the server.",
    _E.TRANSACTIONAL_ID_NOT_FOUND: "The transactionalId could not be found.",
    _E.FETCH_SESSION_TOPIC_ID_ERROR: "The fetch session encountered inconsistent topic ID usage.",
    _E.INELIGIBLE_REPLICA: "The new ISR contains at least one ineligible replica.",
    _E.NEW_LEADER_ELECTED: "The AlterPartition request successfully updated the partition state but the leader has "
                           "changed.",
    _E.OFFSET_MOVED_TO_TIERED_STORAGE: "The requested offset is moved to tiered storage.",
    _E.FENCED_MEMBER_EPOCH: "The member epoch is fenced by the group coordinator. The member must abandon all its "
                            "partitions and rejoin.",
    _E.UNRELEASED_INSTANCE_ID: "The instance ID is still used by another member in the consumer group. That member "
                               "must leave first.",
    _E.UNSUPPORTED_ASSIGNOR: "The assignor or its version range is not supported by the consumer group.",
    _E.STALE_MEMBER_EPOCH: "The member epoch is stale. The member must retry after receiving its updated member "
                           "epoch via the ConsumerGroupHeartbeat API.",
    _E.MISMATCHED_ENDPOINT_TYPE: "The request was sent to an endpoint of the wrong type.",
    _E.UNSUPPORTED_ENDPOINT_TYPE: "This endpoint type is not supported yet.",
    _E.UNKNOWN_CONTROLLER_ID: "This controller ID is not known.",
    _E.UNKNOWN_SUBSCRIPTION_ID: "Client sent a push telemetry request with an invalid or outdated subscription ID.",
    _E.TELEMETRY_TOO_LARGE: "Client sent a push telemetry request larger than the maximum size the broker will "
                            "accept.",
    _E.INVALID_REGISTRATION: "The controller has considered the broker registration to be invalid.",
    _E.TRANSACTION_ABORTABLE: "The server encountered an error with the transaction. The client can abort the "
                              "transaction to continue using this transactional ID.",
    _E.INVALID_RECORD_STATE: "The record state is invalid. The acknowledgement of delivery could not be completed.",
    _E.SHARE_SESSION_NOT_FOUND: "The share session was not found.",
    _E.INVALID_SHARE_SESSION_EPOCH: "The share session epoch is invalid.",
    _E.FENCED_STATE_EPOCH: "The share coordinator rejected the request because the share-group state epoch did not "
                           "match.",
    _E.INVALID_VOTER_KEY: "The voter key doesn't match the receiving replica's key.",
    _E.DUPLICATE_VOTER: "The voter is already part of the set of voters.",
    _E.VOTER_NOT_FOUND: "The voter is not part of the set of voters.",
    _E.INVALID_REGULAR_EXPRESSION: "The regular expression is not valid.",
    _E.REBOOTSTRAP_REQUIRED: "Client metadata is stale. The client should rebootstrap to obtain new metadata.",
    _E.STREAMS_INVALID_TOPOLOGY: "The supplied topology is invalid.",
    _E.STREAMS_INVALID_TOPOLOGY_EPOCH: "The supplied topology epoch is invalid.",
    _E.STREAMS_TOPOLOGY_FENCED: "The supplied topology epoch is outdated.",
    _E.SHARE_SESSION_LIMIT_REACHED: "The limit of share sessions has been reached.",
}

ERROR_INFO: Mapping[ErrorCode, ErrorInfo] = MappingProxyType({
    code: ErrorInfo(code, code.name, code in _RETRIABLE, _MESSAGES[code]) for code in ErrorCode
})

_CLASS_FOR_CODE: dict[ErrorCode, type[KafkaError]] = {}


class KafkaError(Exception):
    """Base of every kfk error that maps to a Kafka error code.

    Subclasses set ``error_code``; ``retriable`` is filled in from ``ERROR_INFO`` so the table stays the one source.
    The base itself stands for UNKNOWN_SERVER_ERROR, the code a broker answers with when nothing more specific fits.
    """

    error_code: ClassVar[ErrorCode] = ErrorCode.UNKNOWN_SERVER_ERROR
    retriable: ClassVar[bool] = False
    fatal: bool = False
    """Set (on the instance) by a transactional or idempotent producer when the error leaves it unusable: the only
    thing left is close() (PRODUCER_FENCED, TRANSACTIONAL_ID_AUTHORIZATION_FAILED, ...); librdkafka's
    ``KafkaError.fatal()``, the Java producer's fatal errors."""
    txn_requires_abort: bool = False
    """Set (on the instance) by a transactional producer when the error failed the current transaction but not the
    producer: the application calls abort_transaction() and may begin a new one; librdkafka's
    ``KafkaError.txn_requires_abort()``, the Java producer's abortable errors."""

    def __init__(self, message: str | None = None) -> None:
        self.message = ERROR_INFO[self.error_code].message if message is None else message
        super().__init__(self.message)

    def __str__(self) -> str:
        return self.message

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        code = cls.__dict__.get("error_code")
        if code is None:  # a refinement such as ProtocolError: same code as its parent, not the code's own class
            return
        if code is ErrorCode.NONE or code in _CLASS_FOR_CODE:
            raise TypeError(f"{cls.__name__}: error code {code.name} is NONE or already has a class")
        cls.retriable = ERROR_INFO[code].retriable
        _CLASS_FOR_CODE[code] = cls


# One class per code, in code order. Names follow Kafka's exception classes; where Kafka's name would shadow a Python
# builtin (TimeoutException) it gets a Kafka prefix.

class UnknownServerError(KafkaError):
    error_code = ErrorCode.UNKNOWN_SERVER_ERROR

class OffsetOutOfRangeError(KafkaError):
    error_code = ErrorCode.OFFSET_OUT_OF_RANGE

class CorruptRecordError(KafkaError):
    error_code = ErrorCode.CORRUPT_MESSAGE

class UnknownTopicOrPartitionError(KafkaError):
    error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

class InvalidFetchSizeError(KafkaError):
    error_code = ErrorCode.INVALID_FETCH_SIZE

class LeaderNotAvailableError(KafkaError):
    error_code = ErrorCode.LEADER_NOT_AVAILABLE

class NotLeaderOrFollowerError(KafkaError):
    error_code = ErrorCode.NOT_LEADER_OR_FOLLOWER

class KafkaTimeoutError(KafkaError):
    error_code = ErrorCode.REQUEST_TIMED_OUT

class BrokerNotAvailableError(KafkaError):
    error_code = ErrorCode.BROKER_NOT_AVAILABLE

class ReplicaNotAvailableError(KafkaError):
    error_code = ErrorCode.REPLICA_NOT_AVAILABLE

class RecordTooLargeError(KafkaError):
    error_code = ErrorCode.MESSAGE_TOO_LARGE

class ControllerMovedError(KafkaError):
    error_code = ErrorCode.STALE_CONTROLLER_EPOCH

class OffsetMetadataTooLargeError(KafkaError):
    error_code = ErrorCode.OFFSET_METADATA_TOO_LARGE

class NetworkError(KafkaError):
    error_code = ErrorCode.NETWORK_EXCEPTION

class CoordinatorLoadInProgressError(KafkaError):
    error_code = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS

class CoordinatorNotAvailableError(KafkaError):
    error_code = ErrorCode.COORDINATOR_NOT_AVAILABLE

class NotCoordinatorError(KafkaError):
    error_code = ErrorCode.NOT_COORDINATOR

class InvalidTopicError(KafkaError):
    error_code = ErrorCode.INVALID_TOPIC_EXCEPTION

class RecordBatchTooLargeError(KafkaError):
    error_code = ErrorCode.RECORD_LIST_TOO_LARGE

class NotEnoughReplicasError(KafkaError):
    error_code = ErrorCode.NOT_ENOUGH_REPLICAS

class NotEnoughReplicasAfterAppendError(KafkaError):
    error_code = ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND

class InvalidRequiredAcksError(KafkaError):
    error_code = ErrorCode.INVALID_REQUIRED_ACKS

class IllegalGenerationError(KafkaError):
    error_code = ErrorCode.ILLEGAL_GENERATION

class InconsistentGroupProtocolError(KafkaError):
    error_code = ErrorCode.INCONSISTENT_GROUP_PROTOCOL

class InvalidGroupIdError(KafkaError):
    error_code = ErrorCode.INVALID_GROUP_ID

class UnknownMemberIdError(KafkaError):
    error_code = ErrorCode.UNKNOWN_MEMBER_ID

class InvalidSessionTimeoutError(KafkaError):
    error_code = ErrorCode.INVALID_SESSION_TIMEOUT

class RebalanceInProgressError(KafkaError):
    error_code = ErrorCode.REBALANCE_IN_PROGRESS

class InvalidCommitOffsetSizeError(KafkaError):
    error_code = ErrorCode.INVALID_COMMIT_OFFSET_SIZE

class TopicAuthorizationError(KafkaError):
    error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED

class GroupAuthorizationError(KafkaError):
    error_code = ErrorCode.GROUP_AUTHORIZATION_FAILED

class ClusterAuthorizationError(KafkaError):
    error_code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED

class InvalidTimestampError(KafkaError):
    error_code = ErrorCode.INVALID_TIMESTAMP

class UnsupportedSaslMechanismError(KafkaError):
    error_code = ErrorCode.UNSUPPORTED_SASL_MECHANISM

class IllegalSaslStateError(KafkaError):
    error_code = ErrorCode.ILLEGAL_SASL_STATE

class UnsupportedVersionError(KafkaError):
    error_code = ErrorCode.UNSUPPORTED_VERSION

class TopicExistsError(KafkaError):
    error_code = ErrorCode.TOPIC_ALREADY_EXISTS

class InvalidPartitionsError(KafkaError):
    error_code = ErrorCode.INVALID_PARTITIONS

class InvalidReplicationFactorError(KafkaError):
    error_code = ErrorCode.INVALID_REPLICATION_FACTOR

class InvalidReplicaAssignmentError(KafkaError):
    error_code = ErrorCode.INVALID_REPLICA_ASSIGNMENT

class InvalidConfigurationError(KafkaError):
    error_code = ErrorCode.INVALID_CONFIG

class NotControllerError(KafkaError):
    error_code = ErrorCode.NOT_CONTROLLER

class InvalidRequestError(KafkaError):
    error_code = ErrorCode.INVALID_REQUEST

class UnsupportedForMessageFormatError(KafkaError):
    error_code = ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT

class PolicyViolationError(KafkaError):
    error_code = ErrorCode.POLICY_VIOLATION

class OutOfOrderSequenceError(KafkaError):
    error_code = ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER

class DuplicateSequenceError(KafkaError):
    error_code = ErrorCode.DUPLICATE_SEQUENCE_NUMBER

class InvalidProducerEpochError(KafkaError):
    error_code = ErrorCode.INVALID_PRODUCER_EPOCH

class InvalidTxnStateError(KafkaError):
    error_code = ErrorCode.INVALID_TXN_STATE

class InvalidPidMappingError(KafkaError):
    error_code = ErrorCode.INVALID_PRODUCER_ID_MAPPING

class InvalidTxnTimeoutError(KafkaError):
    error_code = ErrorCode.INVALID_TRANSACTION_TIMEOUT

class ConcurrentTransactionsError(KafkaError):
    error_code = ErrorCode.CONCURRENT_TRANSACTIONS

class TransactionCoordinatorFencedError(KafkaError):
    error_code = ErrorCode.TRANSACTION_COORDINATOR_FENCED

class TransactionalIdAuthorizationError(KafkaError):
    error_code = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED

class SecurityDisabledError(KafkaError):
    error_code = ErrorCode.SECURITY_DISABLED

class OperationNotAttemptedError(KafkaError):
    error_code = ErrorCode.OPERATION_NOT_ATTEMPTED

class KafkaStorageError(KafkaError):
    error_code = ErrorCode.KAFKA_STORAGE_ERROR

class LogDirNotFoundError(KafkaError):
    error_code = ErrorCode.LOG_DIR_NOT_FOUND

class SaslAuthenticationError(KafkaError):
    error_code = ErrorCode.SASL_AUTHENTICATION_FAILED

class UnknownProducerIdError(KafkaError):
    error_code = ErrorCode.UNKNOWN_PRODUCER_ID

class ReassignmentInProgressError(KafkaError):
    error_code = ErrorCode.REASSIGNMENT_IN_PROGRESS

class DelegationTokenDisabledError(KafkaError):
    error_code = ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED

class DelegationTokenNotFoundError(KafkaError):
    error_code = ErrorCode.DELEGATION_TOKEN_NOT_FOUND

class DelegationTokenOwnerMismatchError(KafkaError):
    error_code = ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH

class UnsupportedByAuthenticationError(KafkaError):
    error_code = ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED

class DelegationTokenAuthorizationError(KafkaError):
    error_code = ErrorCode.DELEGATION_TOKEN_AUTHORIZATION_FAILED

class DelegationTokenExpiredError(KafkaError):
    error_code = ErrorCode.DELEGATION_TOKEN_EXPIRED

class InvalidPrincipalTypeError(KafkaError):
    error_code = ErrorCode.INVALID_PRINCIPAL_TYPE

class GroupNotEmptyError(KafkaError):
    error_code = ErrorCode.NON_EMPTY_GROUP

class GroupIdNotFoundError(KafkaError):
    error_code = ErrorCode.GROUP_ID_NOT_FOUND

class FetchSessionIdNotFoundError(KafkaError):
    error_code = ErrorCode.FETCH_SESSION_ID_NOT_FOUND

class InvalidFetchSessionEpochError(KafkaError):
    error_code = ErrorCode.INVALID_FETCH_SESSION_EPOCH

class ListenerNotFoundError(KafkaError):
    error_code = ErrorCode.LISTENER_NOT_FOUND

class TopicDeletionDisabledError(KafkaError):
    error_code = ErrorCode.TOPIC_DELETION_DISABLED

class FencedLeaderEpochError(KafkaError):
    error_code = ErrorCode.FENCED_LEADER_EPOCH

class UnknownLeaderEpochError(KafkaError):
    error_code = ErrorCode.UNKNOWN_LEADER_EPOCH

class UnsupportedCompressionTypeError(KafkaError):
    error_code = ErrorCode.UNSUPPORTED_COMPRESSION_TYPE

class StaleBrokerEpochError(KafkaError):
    error_code = ErrorCode.STALE_BROKER_EPOCH

class OffsetNotAvailableError(KafkaError):
    error_code = ErrorCode.OFFSET_NOT_AVAILABLE

class MemberIdRequiredError(KafkaError):
    error_code = ErrorCode.MEMBER_ID_REQUIRED

class PreferredLeaderNotAvailableError(KafkaError):
    error_code = ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE

class GroupMaxSizeReachedError(KafkaError):
    error_code = ErrorCode.GROUP_MAX_SIZE_REACHED

class FencedInstanceIdError(KafkaError):
    error_code = ErrorCode.FENCED_INSTANCE_ID

class EligibleLeadersNotAvailableError(KafkaError):
    error_code = ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE

class ElectionNotNeededError(KafkaError):
    error_code = ErrorCode.ELECTION_NOT_NEEDED

class NoReassignmentInProgressError(KafkaError):
    error_code = ErrorCode.NO_REASSIGNMENT_IN_PROGRESS

class GroupSubscribedToTopicError(KafkaError):
    error_code = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC

class InvalidRecordError(KafkaError):
    error_code = ErrorCode.INVALID_RECORD

class UnstableOffsetCommitError(KafkaError):
    error_code = ErrorCode.UNSTABLE_OFFSET_COMMIT

class ThrottlingQuotaExceededError(KafkaError):
    error_code = ErrorCode.THROTTLING_QUOTA_EXCEEDED

class ProducerFencedError(KafkaError):
    error_code = ErrorCode.PRODUCER_FENCED

class ResourceNotFoundError(KafkaError):
    error_code = ErrorCode.RESOURCE_NOT_FOUND

class DuplicateResourceError(KafkaError):
    error_code = ErrorCode.DUPLICATE_RESOURCE

class UnacceptableCredentialError(KafkaError):
    error_code = ErrorCode.UNACCEPTABLE_CREDENTIAL

class InconsistentVoterSetError(KafkaError):
    error_code = ErrorCode.INCONSISTENT_VOTER_SET

class InvalidUpdateVersionError(KafkaError):
    error_code = ErrorCode.INVALID_UPDATE_VERSION

class FeatureUpdateFailedError(KafkaError):
    error_code = ErrorCode.FEATURE_UPDATE_FAILED

class PrincipalDeserializationError(KafkaError):
    error_code = ErrorCode.PRINCIPAL_DESERIALIZATION_FAILURE

class SnapshotNotFoundError(KafkaError):
    error_code = ErrorCode.SNAPSHOT_NOT_FOUND

class PositionOutOfRangeError(KafkaError):
    error_code = ErrorCode.POSITION_OUT_OF_RANGE

class UnknownTopicIdError(KafkaError):
    error_code = ErrorCode.UNKNOWN_TOPIC_ID

class DuplicateBrokerRegistrationError(KafkaError):
    error_code = ErrorCode.DUPLICATE_BROKER_REGISTRATION

class BrokerIdNotRegisteredError(KafkaError):
    error_code = ErrorCode.BROKER_ID_NOT_REGISTERED

class InconsistentTopicIdError(KafkaError):
    error_code = ErrorCode.INCONSISTENT_TOPIC_ID

class InconsistentClusterIdError(KafkaError):
    error_code = ErrorCode.INCONSISTENT_CLUSTER_ID

class TransactionalIdNotFoundError(KafkaError):
    error_code = ErrorCode.TRANSACTIONAL_ID_NOT_FOUND

class FetchSessionTopicIdError(KafkaError):
    error_code = ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR

class IneligibleReplicaError(KafkaError):
    error_code = ErrorCode.INELIGIBLE_REPLICA

class NewLeaderElectedError(KafkaError):
    error_code = ErrorCode.NEW_LEADER_ELECTED

class OffsetMovedToTieredStorageError(KafkaError):
    error_code = ErrorCode.OFFSET_MOVED_TO_TIERED_STORAGE

class FencedMemberEpochError(KafkaError):
    error_code = ErrorCode.FENCED_MEMBER_EPOCH

class UnreleasedInstanceIdError(KafkaError):
    error_code = ErrorCode.UNRELEASED_INSTANCE_ID

class UnsupportedAssignorError(KafkaError):
    error_code = ErrorCode.UNSUPPORTED_ASSIGNOR

class StaleMemberEpochError(KafkaError):
    error_code = ErrorCode.STALE_MEMBER_EPOCH

class MismatchedEndpointTypeError(KafkaError):
    error_code = ErrorCode.MISMATCHED_ENDPOINT_TYPE

class UnsupportedEndpointTypeError(KafkaError):
    error_code = ErrorCode.UNSUPPORTED_ENDPOINT_TYPE

class UnknownControllerIdError(KafkaError):
    error_code = ErrorCode.UNKNOWN_CONTROLLER_ID

class UnknownSubscriptionIdError(KafkaError):
    error_code = ErrorCode.UNKNOWN_SUBSCRIPTION_ID

class TelemetryTooLargeError(KafkaError):
    error_code = ErrorCode.TELEMETRY_TOO_LARGE

class InvalidRegistrationError(KafkaError):
    error_code = ErrorCode.INVALID_REGISTRATION

class TransactionAbortableError(KafkaError):
    error_code = ErrorCode.TRANSACTION_ABORTABLE

class InvalidRecordStateError(KafkaError):
    error_code = ErrorCode.INVALID_RECORD_STATE

class ShareSessionNotFoundError(KafkaError):
    error_code = ErrorCode.SHARE_SESSION_NOT_FOUND

class InvalidShareSessionEpochError(KafkaError):
    error_code = ErrorCode.INVALID_SHARE_SESSION_EPOCH

class FencedStateEpochError(KafkaError):
    error_code = ErrorCode.FENCED_STATE_EPOCH

class InvalidVoterKeyError(KafkaError):
    error_code = ErrorCode.INVALID_VOTER_KEY

class DuplicateVoterError(KafkaError):
    error_code = ErrorCode.DUPLICATE_VOTER

class VoterNotFoundError(KafkaError):
    error_code = ErrorCode.VOTER_NOT_FOUND

class InvalidRegularExpressionError(KafkaError):
    error_code = ErrorCode.INVALID_REGULAR_EXPRESSION

class RebootstrapRequiredError(KafkaError):
    error_code = ErrorCode.REBOOTSTRAP_REQUIRED

class StreamsInvalidTopologyError(KafkaError):
    error_code = ErrorCode.STREAMS_INVALID_TOPOLOGY

class StreamsInvalidTopologyEpochError(KafkaError):
    error_code = ErrorCode.STREAMS_INVALID_TOPOLOGY_EPOCH

class StreamsTopologyFencedError(KafkaError):
    error_code = ErrorCode.STREAMS_TOPOLOGY_FENCED

class ShareSessionLimitReachedError(KafkaError):
    error_code = ErrorCode.SHARE_SESSION_LIMIT_REACHED


class ProtocolError(InvalidRequestError):
    """Bytes from the wire that do not parse: a truncated frame, a negative length, a varint longer than its type
    allows, an unknown api key or version.

    It is an InvalidRequestError (code INVALID_REQUEST) because that is how Kafka treats a request it cannot parse: the
    broker answers INVALID_REQUEST where it can still frame a response, and otherwise closes the connection. The codec
    raises this so callers need only one ``except`` for "the peer sent garbage", and a handler that catches it already
    has the right error code to send back.
    """


_missing = [code.name for code in ErrorCode if code is not ErrorCode.NONE and code not in _CLASS_FOR_CODE]
if _missing:  # a new ErrorCode member without its class would silently decode as UNKNOWN_SERVER_ERROR
    raise ImportError(f"kfk.errors: no exception class for {', '.join(_missing)}")
del _missing


def error_for_code(code: int) -> type[KafkaError]:
    """The exception class for a wire error code; a code this table does not know maps to UnknownServerError.

    NONE (0) is success, not an error, so asking for its class is a programming mistake and raises ValueError.
    """
    if code == ErrorCode.NONE:
        raise ValueError("error code 0 (NONE) means success and has no exception class")
    try:
        return _CLASS_FOR_CODE[ErrorCode(code)]
    except ValueError:
        return UnknownServerError


def raise_for_code(code: int, message: str | None = None) -> None:
    """Raise the exception for a response's error code, or return if it is NONE.

    ``message`` is the response's error message field when it has one; otherwise Kafka's default message is used.
    """
    if code == ErrorCode.NONE:
        return
    error_class = error_for_code(code)
    if message is None and code not in _CLASS_FOR_CODE:
        message = f"Unknown error code {code} in response. {ERROR_INFO[ErrorCode.UNKNOWN_SERVER_ERROR].message}"
    raise error_class(message)
