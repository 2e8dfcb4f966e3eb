"""The cluster metadata image: brokers, topics, partitions, configs, as of one offset of the metadata log.

The image is immutable: `apply` returns a new image that shares every topic the records did not touch, so readers
(request handlers) can hold an image across awaits without locks and never see a half-applied change. Only the
active controller writes metadata records (through a MetadataBackend); every broker applies the committed records
in order, which is Kafka's KRaft model. The records are Kafka's own (kfk/protocol/metadata_records), so a
__cluster_metadata log written by kfk holds what Kafka would write.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Iterable, Mapping

from kfk.common.config_types import ConfigResourceType
from kfk.metadata import acls as acl_records
from kfk.metadata.client_quotas import ClientQuotas, apply_client_quota_record
from kfk.metadata import delegation_tokens, scram
from kfk.metadata.topic_names import is_internal
from kfk.protocol.message import Message
from kfk.security.acl import AclBinding

NO_LEADER = -1
#: PartitionChangeRecord.leader when the leader does not change.
NO_LEADER_CHANGE = -2


_EMPTY: Mapping = MappingProxyType({})


def _empty() -> Mapping:
    return _EMPTY


@dataclass(frozen=True, slots=True)
class Endpoint:
    listener_name: str
    host: str
    port: int
    security_protocol: int = 0  # PLAINTEXT


@dataclass(frozen=True, slots=True)
class BrokerRegistration:
    broker_id: int
    broker_epoch: int
    incarnation_id: uuid.UUID
    endpoints: tuple[Endpoint, ...]
    rack: str | None = None
    fenced: bool = True
    in_controlled_shutdown: bool = False
    #: The (lowest, highest) level of each feature the broker supports, from its registration: the controller
    #: finalizes no level a registered broker does not support.
    supported_features: Mapping[str, tuple[int, int]] = field(default_factory=_empty)
    #: The directory ids of the broker's online log dirs (metadata.version 3.7-IV2 on; empty before).
    log_dirs: tuple[uuid.UUID, ...] = ()

    def endpoint(self, listener_name: str) -> Endpoint | None:
        for endpoint in self.endpoints:
            if endpoint.listener_name == listener_name:
                return endpoint
        return None


@dataclass(frozen=True, slots=True)
class PartitionRegistration:
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int
    partition_epoch: int
    removing_replicas: tuple[int, ...] = ()
    adding_replicas: tuple[int, ...] = ()
    #: The log dir of each replica, in replica order (metadata.version 3.7-IV2 on; empty before, which Kafka reads as
    #: MIGRATING for each): a directory id, or one of Kafka's placeholders (kfk/metadata/directories.py).
    directories: tuple[uuid.UUID, ...] = ()
    #: Eligible leader replicas (KIP-966, eligible.leader.replicas.version 1): replicas that left the ISR while it
    #: was below min.insync.replicas, so still hold every committed record and may lead cleanly.
    elr: tuple[int, ...] = ()
    #: The ELR members last known before they all became ineligible: where an unclean recovery would look first.
    last_known_elr: tuple[int, ...] = ()

    @property
    def preferred_leader(self) -> int:
        return self.replicas[0] if self.replicas else NO_LEADER

    def merge(self, change: Message) -> PartitionRegistration:
        """Apply a PartitionChangeRecord: absent (null / -2) fields keep their value; a new leader starts a new
        leader epoch; every change starts a new partition epoch."""
        leader, leader_epoch = self.leader, self.leader_epoch
        if change.leader != NO_LEADER_CHANGE:
            leader, leader_epoch = change.leader, self.leader_epoch + 1
        return PartitionRegistration(
            replicas=self.replicas if change.replicas is None else tuple(change.replicas),
            isr=self.isr if change.isr is None else tuple(change.isr),
            leader=leader,
            leader_epoch=leader_epoch,
            partition_epoch=self.partition_epoch + 1,
            removing_replicas=self.removing_replicas
            if change.removing_replicas is None
            else tuple(change.removing_replicas),
            adding_replicas=self.adding_replicas if change.adding_replicas is None else tuple(change.adding_replicas),
            directories=self.directories if change.directories is None else tuple(change.directories),
            elr=self.elr if change.eligible_leader_replicas is None else tuple(change.eligible_leader_replicas),
            last_known_elr=self.last_known_elr if change.last_known_elr is None else tuple(change.last_known_elr),
        )


@dataclass(frozen=True, slots=True)
class TopicImage:
    name: str
    topic_id: uuid.UUID
    partitions: Mapping[int, PartitionRegistration]

    @property
    def is_internal(self) -> bool:
        """__consumer_offsets, __transaction_state, __share_group_state (Kafka's Topic.isInternal)."""
        return is_internal(self.name)


@dataclass(frozen=True)
class MetadataImage:
    cluster_id: str | None = None
    offset: int = -1  # the last metadata log offset applied
    brokers: Mapping[int, BrokerRegistration] = field(default_factory=_empty)
    topics_by_id: Mapping[uuid.UUID, TopicImage] = field(default_factory=_empty)
    topics_by_name: Mapping[str, TopicImage] = field(default_factory=_empty)
    configs: Mapping[tuple[ConfigResourceType, str], Mapping[str, str]] = field(default_factory=_empty)
    features: Mapping[str, int] = field(default_factory=_empty)
    next_producer_id: int = 0
    #: Every ACL by its id (kfk/metadata/acls.py).
    acls: Mapping[uuid.UUID, AclBinding] = field(default_factory=_empty)
    client_quotas: ClientQuotas = field(default_factory=_empty)
    #: SCRAM credentials by (user name, mechanism type): kfk/metadata/scram.py.
    scram_credentials: Mapping[tuple[str, int], scram.ScramCredentialData] = field(default_factory=_empty)
    #: Delegation tokens by token id: kfk/metadata/delegation_tokens.py.
    delegation_tokens: Mapping[str, delegation_tokens.DelegationTokenData] = field(default_factory=_empty)

    def topic(self, name: str) -> TopicImage | None:
        return self.topics_by_name.get(name)

    def feature_level(self, name: str) -> int:
        """A feature's finalized level, 0 when not finalized (kfk/common/features.py names the features): what a
        component gates on, e.g. the group coordinator on `image.feature_level(GROUP_VERSION_FEATURE_NAME)`. The
        quorum's kraft.version is not here (the embedded backend's `kraft_version`)."""
        return self.features.get(name, 0)

    def partition(self, topic: str, partition: int) -> PartitionRegistration | None:
        image = self.topics_by_name.get(topic)
        return None if image is None else image.partitions.get(partition)

    def topics_deleted_since(self, previous: MetadataImage) -> list[TopicImage]:
        """The topics of `previous` that this image no longer has, as they were (Kafka's deleted topic ids of a
        TopicsDelta). By topic id: a topic deleted and created again under its name between the two images is one."""
        if previous.topics_by_id is self.topics_by_id:
            return []
        return [topic for topic_id, topic in previous.topics_by_id.items() if topic_id not in self.topics_by_id]

    def config(self, resource_type: ConfigResourceType, name: str) -> Mapping[str, str]:
        return self.configs.get((resource_type, name), _EMPTY)

    def config_resource_names(self, resource_type: ConfigResourceType) -> list[str]:
        """The names of the resources of one type that have configs set, sorted."""
        return sorted(name for kind, name in self.configs if kind == resource_type)

    def alive_endpoint(self, broker_id: int, listener_name: str) -> Endpoint | None:
        """The endpoint of an unfenced broker on a listener (None: unknown, fenced, or no such listener)."""
        broker = self.brokers.get(broker_id)
        if broker is None or broker.fenced:
            return None
        return broker.endpoint(listener_name)

    def alive_brokers(self, listener_name: str) -> list[tuple[BrokerRegistration, Endpoint]]:
        """Unfenced brokers with an endpoint on the listener, by id: what clients of that listener are told."""
        return [(broker, endpoint) for broker, endpoint in self.registered_brokers(listener_name) if not broker.fenced]

    def registered_brokers(self, listener_name: str) -> list[tuple[BrokerRegistration, Endpoint]]:
        """Every registered broker with an endpoint on the listener, fenced ones too, by id (DescribeCluster v2+ with
        include_fenced_brokers)."""
        registered = []
        for broker_id in sorted(self.brokers):
            broker = self.brokers[broker_id]
            endpoint = broker.endpoint(listener_name)
            if endpoint is not None:
                registered.append((broker, endpoint))
        return registered

    def apply(self, records: Iterable[Message], offset: int) -> MetadataImage:
        """A new image with `records` applied in order; `offset` is the metadata log offset of the last one."""
        delta = _Delta(self)
        for record in records:
            handler = _HANDLERS.get(record.NAME)
            if handler is not None:  # records this version does not model are skipped
                handler(delta, record)
        return delta.build(offset)


class _Delta:
    """Mutable copies of the parts of an image that records touch; everything else stays shared."""

    def __init__(self, image: MetadataImage) -> None:
        self.image = image
        self.brokers: dict[int, BrokerRegistration] | None = None
        self.topics_by_id: dict[uuid.UUID, TopicImage] | None = None
        self.configs: dict | None = None
        self.features: dict[str, int] | None = None
        self.next_producer_id = image.next_producer_id
        self.acls: dict[uuid.UUID, AclBinding] | None = None
        self.client_quotas: dict | None = None
        self.scram_credentials: dict[tuple[str, int], scram.ScramCredentialData] | None = None
        self.delegation_tokens: dict[str, delegation_tokens.DelegationTokenData] | None = None
        #: The partitions of the topics records touched, by topic id: their TopicImages are rebuilt once, in build()
        #: (a batch creating 1,000 partitions must not copy a topic's partitions for each).
        self.partitions: dict[uuid.UUID, dict[int, PartitionRegistration]] = {}

    def mutable_partitions(self, topic_id: uuid.UUID) -> dict[int, PartitionRegistration]:
        partitions = self.partitions.get(topic_id)
        if partitions is None:
            partitions = self.partitions[topic_id] = dict(self.mutable_topics()[topic_id].partitions)
        return partitions

    def mutable_brokers(self) -> dict[int, BrokerRegistration]:
        if self.brokers is None:
            self.brokers = dict(self.image.brokers)
        return self.brokers

    def mutable_topics(self) -> dict[uuid.UUID, TopicImage]:
        if self.topics_by_id is None:
            self.topics_by_id = dict(self.image.topics_by_id)
        return self.topics_by_id

    def mutable_configs(self) -> dict:
        if self.configs is None:
            self.configs = dict(self.image.configs)
        return self.configs

    def mutable_acls(self) -> dict[uuid.UUID, AclBinding]:
        if self.acls is None:
            self.acls = dict(self.image.acls)
        return self.acls

    def build(self, offset: int) -> MetadataImage:
        image = self.image
        changes: dict = {"offset": offset, "next_producer_id": self.next_producer_id}
        if self.brokers is not None:
            changes["brokers"] = MappingProxyType(self.brokers)
        for topic_id, partitions in self.partitions.items():
            topic = self.topics_by_id.get(topic_id)
            if topic is not None:
                self.topics_by_id[topic_id] = replace(topic, partitions=MappingProxyType(partitions))
        if self.topics_by_id is not None:
            changes["topics_by_id"] = MappingProxyType(self.topics_by_id)
            changes["topics_by_name"] = MappingProxyType({t.name: t for t in self.topics_by_id.values()})
        if self.configs is not None:
            changes["configs"] = MappingProxyType(self.configs)
        if self.features is not None:
            changes["features"] = MappingProxyType(self.features)
        if self.acls is not None:
            changes["acls"] = MappingProxyType(self.acls)
        if self.client_quotas is not None:
            changes["client_quotas"] = MappingProxyType(self.client_quotas)
        if self.scram_credentials is not None:
            changes["scram_credentials"] = MappingProxyType(self.scram_credentials)
        if self.delegation_tokens is not None:
            changes["delegation_tokens"] = MappingProxyType(self.delegation_tokens)
        return replace(image, **changes)


def _topic_record(delta: _Delta, record: Message) -> None:
    delta.mutable_topics()[record.topic_id] = TopicImage(record.name, record.topic_id, MappingProxyType({}))
    delta.partitions.pop(record.topic_id, None)


def _partition_record(delta: _Delta, record: Message) -> None:
    delta.mutable_partitions(record.topic_id)[record.partition_id] = PartitionRegistration(
        replicas=tuple(record.replicas),
        isr=tuple(record.isr),
        leader=record.leader,
        leader_epoch=record.leader_epoch,
        partition_epoch=record.partition_epoch,
        removing_replicas=tuple(record.removing_replicas),
        adding_replicas=tuple(record.adding_replicas),
        directories=tuple(record.directories),
        elr=tuple(record.eligible_leader_replicas or ()),
        last_known_elr=tuple(record.last_known_elr or ()),
    )


def _partition_change_record(delta: _Delta, record: Message) -> None:
    partitions = delta.mutable_partitions(record.topic_id)
    partitions[record.partition_id] = partitions[record.partition_id].merge(record)


def _clear_elr_record(delta: _Delta, record: Message) -> None:
    """A min.insync.replicas change while ELR is on: the ELR and last known ELR of one topic (by name), or of every
    topic (empty name), start over."""
    for topic in list(delta.mutable_topics().values()):
        if record.topic_name and topic.name != record.topic_name:
            continue
        partitions = delta.mutable_partitions(topic.topic_id)
        for index, partition in partitions.items():
            if partition.elr or partition.last_known_elr:
                partitions[index] = replace(partition, elr=(), last_known_elr=())


def _remove_topic_record(delta: _Delta, record: Message) -> None:
    delta.partitions.pop(record.topic_id, None)
    topic = delta.mutable_topics().pop(record.topic_id, None)
    if topic is not None:
        delta.mutable_configs().pop((ConfigResourceType.TOPIC, topic.name), None)


def _config_record(delta: _Delta, record: Message) -> None:
    configs = delta.mutable_configs()
    key = (ConfigResourceType(record.resource_type), record.resource_name)
    values = dict(configs.get(key, {}))
    if record.value is None:
        values.pop(record.name, None)
    else:
        values[record.name] = record.value
    if values:
        configs[key] = MappingProxyType(values)
    else:  # as Kafka's image: a resource whose last config was deleted is no longer listed
        configs.pop(key, None)


def _register_broker_record(delta: _Delta, record: Message) -> None:
    delta.mutable_brokers()[record.broker_id] = BrokerRegistration(
        broker_id=record.broker_id,
        broker_epoch=record.broker_epoch,
        incarnation_id=record.incarnation_id,
        endpoints=tuple(Endpoint(e.name, e.host, e.port, e.security_protocol) for e in record.end_points),
        rack=record.rack,
        fenced=record.fenced,
        in_controlled_shutdown=record.in_controlled_shutdown,
        supported_features=MappingProxyType({feature.name: (feature.min_supported_version,
                                                            feature.max_supported_version)
                                             for feature in record.features}),
        log_dirs=tuple(record.log_dirs),
    )


def _unregister_broker_record(delta: _Delta, record: Message) -> None:
    delta.mutable_brokers().pop(record.broker_id, None)


def _set_fenced(fenced: bool):
    def handler(delta: _Delta, record: Message) -> None:
        brokers = delta.mutable_brokers()
        if record.id in brokers:
            brokers[record.id] = replace(brokers[record.id], fenced=fenced)

    return handler


def _broker_registration_change_record(delta: _Delta, record: Message) -> None:
    """Fenced: -1 unfenced, 1 fenced, 0 unchanged; InControlledShutdown: 1 yes, 0 unchanged (the record that
    replaces Fence/UnfenceBrokerRecord from metadata.version 3.3-IV2 on)."""
    brokers = delta.mutable_brokers()
    registration = brokers.get(record.broker_id)
    if registration is None:
        return
    if record.fenced != 0:
        registration = replace(registration, fenced=record.fenced > 0)
    if record.in_controlled_shutdown > 0:
        registration = replace(registration, in_controlled_shutdown=True)
    brokers[record.broker_id] = registration


def _feature_level_record(delta: _Delta, record: Message) -> None:
    if delta.features is None:
        delta.features = dict(delta.image.features)
    if record.feature_level == 0 and record.name != "metadata.version":
        delta.features.pop(record.name, None)  # level 0 is no finalized level: the feature is removed (Kafka's)
    else:
        delta.features[record.name] = record.feature_level


def _producer_ids_record(delta: _Delta, record: Message) -> None:
    delta.next_producer_id = record.next_producer_id


def _client_quota_record(delta: _Delta, record: Message) -> None:
    if delta.client_quotas is None:
        delta.client_quotas = dict(delta.image.client_quotas)
    apply_client_quota_record(delta.client_quotas, record)


_HANDLERS = {
    "TopicRecord": _topic_record,
    "PartitionRecord": _partition_record,
    "PartitionChangeRecord": _partition_change_record,
    "RemoveTopicRecord": _remove_topic_record,
    "ClearElrRecord": _clear_elr_record,
    "ConfigRecord": _config_record,
    "RegisterBrokerRecord": _register_broker_record,
    "UnregisterBrokerRecord": _unregister_broker_record,
    "FenceBrokerRecord": _set_fenced(True),
    "UnfenceBrokerRecord": _set_fenced(False),
    "BrokerRegistrationChangeRecord": _broker_registration_change_record,
    "FeatureLevelRecord": _feature_level_record,
    "ProducerIdsRecord": _producer_ids_record,
    "AccessControlEntryRecord": acl_records.access_control_entry_record,
    "RemoveAccessControlEntryRecord": acl_records.remove_access_control_entry_record,
    "ClientQuotaRecord": _client_quota_record,
    "UserScramCredentialRecord": scram.user_scram_credential_record,
    "RemoveUserScramCredentialRecord": scram.remove_user_scram_credential_record,
    "DelegationTokenRecord": delegation_tokens.delegation_token_record,
    "RemoveDelegationTokenRecord": delegation_tokens.remove_delegation_token_record,
}
