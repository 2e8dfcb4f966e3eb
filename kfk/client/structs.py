"""The small value types every client API speaks: topic-partitions, offsets, record metadata, consumed records, and
the Admin's arguments and results (topics, configs, groups, reassignments, elections, transactions).

NamedTuples and frozen dataclasses, as in aiokafka's structs.py and Java's plain classes: cheap to create on the hot
path, hashable where they are keys, and printable. TopicPartition, OffsetAndMetadata, the config types and the wire
sentinels live in kfk.common.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import IntEnum
from typing import TYPE_CHECKING, NamedTuple

from kfk.common.client_quotas import ClientQuotaEntity
from kfk.common.config_types import ConfigResourceType
from kfk.common.constants import UNKNOWN_LEADER_EPOCH
from kfk.common.structs import TopicPartition
from kfk.security.principal import KafkaPrincipal

if TYPE_CHECKING:
    from kfk.client.cluster import BrokerMetadata

__all__ = [
    "ClientQuotaFilterComponent",
    "ClientQuotaAlteration",
    "ScramCredentialInfo",
    "UserScramCredentialUpsertion",
    "UserScramCredentialDeletion",
    "OffsetAndTimestamp",
    "RecordMetadata",
    "ConsumerRecord",
    "ConsumerGroupMetadata",
    "NewTopic",
    "ConfigResource",
    "AlterConfigOp",
    "AlterConfigOpType",
    "TopicDescription",
    "PartitionInfo",
    "ClusterDescription",
    "GroupListing",
    "MemberDescription",
    "ConsumerGroupDescription",
    "NewPartitionReassignment",
    "PartitionReassignment",
    "ElectionType",
    "TransactionListing",
    "TransactionDescription",
    "ProducerState",
    "PartitionProducerState",
    "AbortTransactionSpec",
    "OpenTransaction",
    "ReplicaInfo",
    "LogDirDescription",
]


class OffsetAndTimestamp(NamedTuple):
    """An answer of offsets_for_times: the first offset whose timestamp is >= the target, and that timestamp."""

    offset: int
    timestamp: int
    leader_epoch: int = UNKNOWN_LEADER_EPOCH


class RecordMetadata(NamedTuple):
    """Where an acknowledged record landed. ``offset`` is -1 when acks=0 (the broker does not answer);
    ``timestamp`` is the broker's log append time for LogAppendTime topics, else the record's own timestamp."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    serialized_key_size: int
    serialized_value_size: int

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


class ConsumerRecord(NamedTuple):
    """One record returned by Consumer.poll. ``timestamp_type`` is 0 for CreateTime, 1 for LogAppendTime."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]
    leader_epoch: int = UNKNOWN_LEADER_EPOCH

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


# --- Admin ---------------------------------------------------------------------------------------------------------

DEFAULT_NUM_PARTITIONS = -1  # CreateTopics v4+: use the broker's num.partitions
DEFAULT_REPLICATION_FACTOR = -1  # ... and default.replication.factor


class AlterConfigOpType(IntEnum):
    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


class ConfigResource(NamedTuple):
    type: ConfigResourceType
    name: str


class AlterConfigOp(NamedTuple):
    name: str
    value: str | None
    op: AlterConfigOpType = AlterConfigOpType.SET


@dataclass(frozen=True)
class NewTopic:
    """A topic to create: -1 partitions / replication factor mean the broker's defaults (CreateTopics v4+)."""

    name: str
    num_partitions: int = DEFAULT_NUM_PARTITIONS
    replication_factor: int = DEFAULT_REPLICATION_FACTOR
    configs: Mapping[str, str] = field(default_factory=dict)
    replica_assignments: Mapping[int, list[int]] = field(default_factory=dict)


@dataclass(frozen=True)
class PartitionInfo:
    """A partition as Admin.describe_topics tells it. The eligible leader replicas (KIP-966) are None when the
    broker cannot tell them (no DescribeTopicPartitions), as Kafka's TopicPartitionInfo has them null."""

    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    in_sync_replicas: tuple[int, ...]
    offline_replicas: tuple[int, ...]
    eligible_leader_replicas: tuple[int, ...] | None = None
    last_known_elr: tuple[int, ...] | None = None

    @property
    def under_replicated(self) -> bool:
        return len(self.in_sync_replicas) < len(self.replicas)


@dataclass(frozen=True)
class TopicDescription:
    name: str
    topic_id: uuid.UUID
    is_internal: bool
    partitions: list[PartitionInfo]


@dataclass(frozen=True)
class ClusterDescription:
    cluster_id: str | None
    controller_id: int
    brokers: list[BrokerMetadata]


@dataclass(frozen=True)
class QuorumReplicaState:
    """One replica of the metadata log as the quorum leader sees it (Kafka's QuorumInfo.ReplicaState); the
    timestamps are None when the leader has not heard from it (-1 on the wire)."""

    replica_id: int
    replica_directory_id: uuid.UUID
    log_end_offset: int
    last_fetch_timestamp: int | None
    last_caught_up_timestamp: int | None


@dataclass(frozen=True)
class QuorumInfo:
    """The metadata quorum (Kafka's QuorumInfo): its leader and epoch, the high watermark, voters, observers, and
    each voter's endpoints (`LISTENER://host:port`, by node id; DescribeQuorum v2+)."""

    leader_id: int
    leader_epoch: int
    high_watermark: int
    voters: list[QuorumReplicaState]
    observers: list[QuorumReplicaState]
    nodes: dict[int, list[str]]


class UpgradeType(IntEnum):
    """How a feature update may move its level (Kafka's FeatureUpdate.UpgradeType; UpdateFeatures v1+)."""

    UPGRADE = 1
    SAFE_DOWNGRADE = 2
    UNSAFE_DOWNGRADE = 3


class FeatureUpdate(NamedTuple):
    """A finalized level to set (0: disable the feature), and how (Kafka's FeatureUpdate)."""

    max_version_level: int
    upgrade_type: UpgradeType = UpgradeType.UPGRADE


@dataclass(frozen=True)
class FeatureMetadata:
    """What a node says of the cluster's features (Kafka's FeatureMetadata, from ApiVersions): the finalized levels
    and their epoch (None when the node has none), and the (lowest, highest) level the node supports, by name."""

    finalized_features: dict[str, int]
    finalized_features_epoch: int | None
    supported_features: dict[str, tuple[int, int]]


@dataclass(frozen=True)
class ReplicaInfo:
    """A replica in a log directory (Kafka's ReplicaInfo): its size on disk, how far it is behind the log end offset
    (a future replica being moved by kafka-reassign-partitions), and whether it is that future replica."""

    size: int
    offset_lag: int
    is_future: bool


@dataclass(frozen=True)
class LogDirDescription:
    """One log directory of a broker (Kafka's LogDirDescription): its error (an offline directory), its replicas,
    and the volume's total and usable bytes (None before DescribeLogDirs v4, or when the broker does not know)."""

    error: Exception | None
    replicas: dict[TopicPartition, ReplicaInfo]
    total_bytes: int | None
    usable_bytes: int | None


class GroupListing(NamedTuple):
    group_id: str
    protocol_type: str
    state: str
    group_type: str


@dataclass(frozen=True)
class MemberDescription:
    member_id: str
    group_instance_id: str | None
    client_id: str
    host: str
    assignment: list[TopicPartition]
    #: Of a consumer protocol group's member (ConsumerGroupDescribe): its epoch, its target assignment, and whether
    #: it uses the consumer protocol (False for a classic member of a group being migrated); None otherwise.
    member_epoch: int | None = None
    target_assignment: list[TopicPartition] | None = None
    upgraded: bool | None = None


#: The protocol type ListGroups and ShareGroupDescribe give a share group (KIP-932).
SHARE_PROTOCOL_TYPE = "share"


@dataclass(frozen=True)
class ConsumerGroupDescription:
    group_id: str
    state: str
    protocol_type: str
    partition_assignor: str
    members: list[MemberDescription]
    coordinator: int
    #: Of a consumer protocol group: its epoch and its target assignment's; None for a classic group.
    group_epoch: int | None = None
    target_assignment_epoch: int | None = None


class NewPartitionReassignment(NamedTuple):
    """The replicas a partition should move to (alter_partition_reassignments); the first is the preferred leader."""

    target_replicas: list[int]


class PartitionReassignment(NamedTuple):
    """A reassignment in progress (list_partition_reassignments): the partition's replicas during the move (old and
    new together), those being added and those to remove once the new ones are in sync."""

    replicas: list[int]
    adding_replicas: list[int]
    removing_replicas: list[int]


class ElectionType(IntEnum):
    """ElectLeaders' election_type (Kafka's ElectionType ids)."""

    PREFERRED = 0
    UNCLEAN = 1


class ConsumerGroupMetadata(NamedTuple):
    """A consumer's standing in its group (Consumer.group_metadata()), for Producer.send_offsets_to_transaction: the
    group coordinator accepts a transactional offset commit only from the current generation's member, so a zombie
    that was rebalanced out cannot commit offsets for partitions that now belong to another member (KIP-447)."""

    group_id: str
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None


# --- transactions (Admin.list_transactions ... abort_transaction, as Java's Admin) ----------------------------------


class TransactionListing(NamedTuple):
    """One transactional id a coordinator knows (list_transactions). ``state`` is Kafka's name for it (Ongoing,
    PrepareCommit, CompleteAbort, Empty...). Unlike Java's listing it carries the coordinator that answered, which
    Java keeps in the result's by-broker map: kafka-transactions.sh list prints it."""

    transactional_id: str
    producer_id: int
    state: str
    coordinator_id: int


@dataclass(frozen=True)
class TransactionDescription:
    """A transactional id's state at its coordinator (describe_transactions). ``transaction_start_time_ms`` is None
    when no transaction is open; ``topic_partitions`` are those in the open (or not yet completed) transaction."""

    coordinator_id: int
    state: str
    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    transaction_start_time_ms: int | None
    topic_partitions: frozenset[TopicPartition]


class ProducerState(NamedTuple):
    """A producer a partition's replica remembers (describe_producers). ``coordinator_epoch`` is None until a
    transaction marker was written for it; ``current_transaction_start_offset`` is the first offset of its open
    transaction on the partition, None when it has none."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int | None
    current_transaction_start_offset: int | None


class PartitionProducerState(NamedTuple):
    active_producers: list[ProducerState]


class AbortTransactionSpec(NamedTuple):
    """Which transaction abort_transaction ends on one partition: the producer, its epoch, and a coordinator epoch
    at least the one of any marker already written there (the partition fences lower ones)."""

    topic_partition: TopicPartition
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int


class OpenTransaction(NamedTuple):
    """A transaction open on a partition (find_hanging_transactions): the partition and its producer's state."""

    topic_partition: TopicPartition
    producer_state: ProducerState


class ClientQuotaFilterComponent(NamedTuple):
    """One component of a DescribeClientQuotas filter (Java's ClientQuotaFilterComponent): an entity type and what
    its name must be. Build it with of_entity (that name), of_default_entity (the type's <default>) or
    of_entity_type (any entity of that type)."""

    entity_type: str
    match: str | None
    #: DescribeClientQuotas' match_type: 0 exact name, 1 the <default> entity, 2 any entity of the type.
    match_type: int

    @classmethod
    def of_entity(cls, entity_type: str, name: str) -> ClientQuotaFilterComponent:
        return cls(entity_type, name, 0)

    @classmethod
    def of_default_entity(cls, entity_type: str) -> ClientQuotaFilterComponent:
        return cls(entity_type, None, 1)

    @classmethod
    def of_entity_type(cls, entity_type: str) -> ClientQuotaFilterComponent:
        return cls(entity_type, None, 2)


class ClientQuotaAlteration(NamedTuple):
    """The changes to one entity's quotas (Java's ClientQuotaAlteration): key -> new value, None to remove it."""

    entity: ClientQuotaEntity
    ops: Mapping[str, float | None]
@dataclass(frozen=True)
class ScramCredentialInfo:
    """One SCRAM credential of a user, as DescribeUserScramCredentials tells it (never the password or keys)."""

    mechanism: str  # SCRAM-SHA-256 or SCRAM-SHA-512
    iterations: int


@dataclass(frozen=True)
class UserScramCredentialUpsertion:
    """Set `user`'s credential for `mechanism` from `password` (the admin client salts it: the password itself never
    leaves the client). `salt` defaults to a random one."""

    user: str
    mechanism: str
    iterations: int
    password: str = field(repr=False)
    salt: bytes | None = field(default=None, repr=False)


@dataclass(frozen=True)
class DelegationToken:
    """A delegation token (Java's DelegationToken: its TokenInformation and HMAC). A client authenticates with it
    over SASL/SCRAM: user name `token_id`, password the HMAC in base64, JAAS option tokenauth="true"."""

    token_id: str
    hmac: bytes = field(repr=False)
    owner: KafkaPrincipal
    token_requester: KafkaPrincipal
    renewers: tuple[KafkaPrincipal, ...]
    issue_timestamp_ms: int
    expiry_timestamp_ms: int
    max_timestamp_ms: int


@dataclass(frozen=True)
class UserScramCredentialDeletion:
    user: str
    mechanism: str
