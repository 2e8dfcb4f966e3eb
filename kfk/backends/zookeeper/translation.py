"""Between Kafka's metadata records and Kafka's znodes, both ways (pure: no ZooKeeper client here).

kfk's controller and brokers speak metadata records (TopicRecord, PartitionRecord, PartitionChangeRecord...) and
keep a MetadataImage; ZooKeeper holds Kafka's znodes. So:
- writing (`operations_for`): the controller's records are applied to the image they were computed from, and the
  difference between the two images becomes one ZooKeeper multi-op: create/set/delete of Kafka's znodes, with a
  version check on /controller_epoch first (a deposed controller's multi fails as a whole: Kafka's
  checkVersion(controllerEpochPath) fencing) and a version check on every partition state znode it rewrites (the
  zkVersion is the partition epoch, so a write computed from a stale state fails instead of clobbering a leader's
  concurrent ISR change);
- reading (`records_for`): a ZooKeeperSnapshot of the znodes is compared with the image a listener holds, and the
  difference comes out as records (whole PartitionRecords for changed partitions, RemoveTopicRecord for gone
  topics, RegisterBrokerRecord / fenced BrokerRegistrationChangeRecord for brokers whose ephemeral znode appeared /
  vanished). Applying them to that image yields the snapshot's state, whoever wrote the znodes (this controller,
  another one, a leader shrinking its ISR, Kafka's own tools).

SCRAM credentials live in /config/users/<user> as Kafka keeps them (an entry per mechanism, Kafka's text form), and
client quotas in /config/users, /config/users/<user>/clients and /config/clients (a user's quotas beside its
credentials), each write with a config change notification (`users/<user>`, `clients/<client-id>`...), so Kafka's own
brokers on the same ZooKeeper see them too.
ACLs: ZooKeeper keeps one znode per resource pattern with all its entries, as Kafka's AclAuthorizer wrote them; the
image keeps each ACL under an id. The id of an ACL read from ZooKeeper is derived from its content (`zk_acl_id`), so
every broker names it alike and a DeleteAcls computed on one image removes it on all; written ACLs are compared
by content too, pattern by pattern, each changed znode with its change notification for Kafka's brokers.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

from kfk.backends.zookeeper import znodes
from kfk.common.client_quotas import USER, ClientQuotaEntity
from kfk.common.config_types import ConfigResourceType
from kfk.metadata.acls import RemoveAccessControlEntryRecord, acl_ids, record_of
from kfk.metadata.image import BrokerRegistration, MetadataImage, PartitionRegistration
from kfk.metadata.scram import ScramCredentialData
from kfk.protocol.message import Message
from kfk.protocol.metadata_records import schema_class
from kfk.security.acl import AccessControlEntry, AclBinding, ResourcePattern
from kfk.security.sasl.scram import ScramCredential, ScramMechanism, format_credential, parse_credential

log = logging.getLogger("kfk.backends.zookeeper")

TopicRecord = schema_class("TopicRecord")
PartitionRecord = schema_class("PartitionRecord")
RemoveTopicRecord = schema_class("RemoveTopicRecord")
ConfigRecord = schema_class("ConfigRecord")
RegisterBrokerRecord = schema_class("RegisterBrokerRecord")
BrokerRegistrationChangeRecord = schema_class("BrokerRegistrationChangeRecord")
FeatureLevelRecord = schema_class("FeatureLevelRecord")
ProducerIdsRecord = schema_class("ProducerIdsRecord")
ClientQuotaRecord = schema_class("ClientQuotaRecord")
UserScramCredentialRecord = schema_class("UserScramCredentialRecord")
RemoveUserScramCredentialRecord = schema_class("RemoveUserScramCredentialRecord")

#: BrokerRegistrationChangeRecord.Fenced: 1 fenced.
FENCED = 1
_CONFIG_PARENTS = {ConfigResourceType.TOPIC: znodes.CONFIG_TOPICS_PATH,
                   ConfigResourceType.BROKER: znodes.CONFIG_BROKERS_PATH}
_CONFIG_ENTITY = {ConfigResourceType.TOPIC: "topics", ConfigResourceType.BROKER: "brokers"}


@dataclass
class ZooKeeperSnapshot:
    """The znodes kfk reads, decoded. `offset` is the largest zxid seen while reading them."""

    cluster_id: str | None = None
    controller_id: int | None = None
    controller_epoch: int = 0
    brokers: dict[int, znodes.BrokerZnode] = field(default_factory=dict)
    topics: dict[str, znodes.TopicZnode] = field(default_factory=dict)
    partition_states: dict[tuple[str, int], znodes.PartitionStateZnode] = field(default_factory=dict)
    configs: dict[tuple[ConfigResourceType, str], dict[str, str]] = field(default_factory=dict)
    client_quotas: dict[ClientQuotaEntity, dict[str, float]] = field(default_factory=dict)
    #: /config/users/<user> by user name: SCRAM credentials under their mechanism's name (scram_credentials).
    user_configs: dict[str, dict[str, str]] = field(default_factory=dict)
    features: dict[str, int] = field(default_factory=dict)
    producer_id_block_end: int | None = None
    offset: int = -1
    #: Requests left by Kafka's ZooKeeper-based tools for the controller: /admin/delete_topics/<topic> markers and
    #: the /admin/reassign_partitions plan.
    delete_topic_requests: list[str] = field(default_factory=list)
    reassignment_request: dict[tuple[str, int], list[int]] = field(default_factory=dict)
    #: The ACLs of /kafka-acl and /kafka-acl-extended, by resource pattern.
    acls: dict[ResourcePattern, frozenset[AccessControlEntry]] = field(default_factory=dict)


def incarnation_id(broker_id: int, broker_epoch: int) -> uuid.UUID:
    """ZooKeeper registrations have no incarnation id; one per (broker, registration znode) stands in for it."""
    return uuid.UUID(int=(broker_id & 0xFFFFFFFF) << 64 | (broker_epoch & 0xFFFFFFFFFFFFFFFF))


#: The namespace of the ids of ACLs read from ZooKeeper.
_ZK_ACL_NAMESPACE = uuid.UUID("5f0c6c8e-6b0e-4d0e-9a59-6b6166ab6163")


def zk_acl_id(binding: AclBinding) -> uuid.UUID:
    """An ACL's id in the image of a ZooKeeper cluster: the same on every broker, from the ACL itself."""
    pattern, entry = binding.pattern, binding.entry
    return uuid.uuid5(_ZK_ACL_NAMESPACE, "\0".join(map(str, (
        int(pattern.resource_type), pattern.name, int(pattern.pattern_type), entry.principal, entry.host,
        int(entry.operation), int(entry.permission_type)))))


def _acls_by_pattern(acls: Mapping[uuid.UUID, AclBinding]) -> dict[ResourcePattern, frozenset[AccessControlEntry]]:
    grouped: dict[ResourcePattern, set[AccessControlEntry]] = {}
    for binding in acls.values():
        grouped.setdefault(binding.pattern, set()).add(binding.entry)
    return {pattern: frozenset(entries) for pattern, entries in grouped.items()}


def _acl_records(image: MetadataImage, snapshot: ZooKeeperSnapshot) -> list[Message]:
    wanted = {AclBinding(pattern, entry) for pattern, entries in snapshot.acls.items() for entry in entries}
    current = acl_ids(image.acls)
    records: list[Message] = [RemoveAccessControlEntryRecord(id=acl_id)
                              for binding, acl_id in current.items() if binding not in wanted]
    records.extend(record_of(zk_acl_id(binding), binding) for binding in wanted if binding not in current)
    return records


def records_for(image: MetadataImage, snapshot: ZooKeeperSnapshot) -> list[Message]:
    """The records that turn `image` into the state of `snapshot`."""
    records: list[Message] = []
    for broker_id, broker in sorted(snapshot.brokers.items()):
        wanted = BrokerRegistration(broker_id, broker.broker_epoch, incarnation_id(broker_id, broker.broker_epoch),
                                    broker.endpoints, broker.rack, fenced=False,
                                    supported_features=broker.supported_features)
        current = image.brokers.get(broker_id)
        if current is None or current != wanted:
            records.append(RegisterBrokerRecord(
                broker_id=broker_id, incarnation_id=wanted.incarnation_id, broker_epoch=broker.broker_epoch,
                end_points=[RegisterBrokerRecord.BrokerEndpoint(name=e.listener_name, host=e.host, port=e.port,
                                                                security_protocol=e.security_protocol)
                            for e in broker.endpoints],
                features=[RegisterBrokerRecord.BrokerFeature(name=name, min_supported_version=low,
                                                             max_supported_version=high)
                          for name, (low, high) in sorted(broker.supported_features.items())],
                rack=broker.rack, fenced=False, in_controlled_shutdown=False))
    for broker_id, current in sorted(image.brokers.items()):
        if broker_id not in snapshot.brokers and not current.fenced:
            records.append(BrokerRegistrationChangeRecord(broker_id=broker_id, broker_epoch=current.broker_epoch,
                                                          fenced=FENCED))
    removed_topics: set[str] = set()
    for name, topic in image.topics_by_name.items():
        wanted = snapshot.topics.get(name)
        if wanted is None or wanted.topic_id != topic.topic_id:
            records.append(RemoveTopicRecord(topic_id=topic.topic_id))
            removed_topics.add(name)
    for name in sorted(snapshot.topics):
        wanted = snapshot.topics[name]
        if wanted.topic_id is None:
            continue  # created by a pre-2.8 tool: kfk serves topics with ids only
        current = image.topics_by_name.get(name)
        if current is None or name in removed_topics:
            records.append(TopicRecord(name=name, topic_id=wanted.topic_id))
            current_partitions = {}
        else:
            current_partitions = current.partitions
        for partition_id in sorted(wanted.partitions):
            state = snapshot.partition_states.get((name, partition_id))
            if state is None:
                continue  # the state znode is not written yet
            registration = PartitionRegistration(
                replicas=wanted.partitions[partition_id], isr=state.isr, leader=state.leader,
                leader_epoch=state.leader_epoch, partition_epoch=state.partition_epoch,
                removing_replicas=wanted.removing_replicas.get(partition_id, ()),
                adding_replicas=wanted.adding_replicas.get(partition_id, ()))
            if current_partitions.get(partition_id) != registration:
                records.append(PartitionRecord(
                    partition_id=partition_id, topic_id=wanted.topic_id, replicas=list(registration.replicas),
                    isr=list(registration.isr), removing_replicas=list(registration.removing_replicas),
                    adding_replicas=list(registration.adding_replicas), leader=registration.leader,
                    leader_epoch=registration.leader_epoch, partition_epoch=registration.partition_epoch))
    for key in sorted(set(image.configs) | set(snapshot.configs)):
        resource_type, resource_name = key
        current = {} if resource_type == ConfigResourceType.TOPIC and resource_name in removed_topics \
            else image.configs.get(key, {})
        wanted = snapshot.configs.get(key, {})
        for name in sorted(set(current) | set(wanted)):
            if current.get(name) != wanted.get(name):
                records.append(ConfigRecord(resource_type=resource_type, resource_name=resource_name, name=name,
                                            value=wanted.get(name)))
    for entity in sorted(set(image.client_quotas) | set(snapshot.client_quotas), key=ClientQuotaEntity.sort_key):
        current, wanted = image.client_quotas.get(entity, {}), snapshot.client_quotas.get(entity, {})
        parts = [ClientQuotaRecord.EntityData(entity_type=kind, entity_name=name) for kind, name in entity.parts]
        for key in sorted(set(current) | set(wanted)):
            if key not in wanted:
                records.append(ClientQuotaRecord(entity=parts, key=key, remove=True))
            elif current.get(key) != wanted[key]:
                records.append(ClientQuotaRecord(entity=parts, key=key, value=wanted[key]))
    wanted_credentials = scram_credentials(snapshot.user_configs)
    for key in sorted(set(image.scram_credentials) | set(wanted_credentials)):
        wanted_credential = wanted_credentials.get(key)
        if wanted_credential is None:
            records.append(RemoveUserScramCredentialRecord(name=key[0], mechanism=key[1]))
        elif image.scram_credentials.get(key) != wanted_credential:
            records.append(UserScramCredentialRecord(
                name=key[0], mechanism=key[1], salt=wanted_credential.salt, stored_key=wanted_credential.stored_key,
                server_key=wanted_credential.server_key, iterations=wanted_credential.iterations))
    for name, level in sorted(snapshot.features.items()):
        if image.features.get(name) != level:
            records.append(FeatureLevelRecord(name=name, feature_level=level))
    if snapshot.producer_id_block_end is not None and snapshot.producer_id_block_end + 1 > image.next_producer_id:
        records.append(ProducerIdsRecord(broker_id=-1, broker_epoch=-1,
                                         next_producer_id=snapshot.producer_id_block_end + 1))
    records.extend(_acl_records(image, snapshot))
    return records


# -- writing ---------------------------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Operation:
    """One operation of a ZooKeeper multi: kind is "check", "create", "set" or "delete"; version -1 is any."""

    kind: str
    path: str
    data: bytes = b""
    version: int = -1
    sequential: bool = False


def operations_for(before: MetadataImage, after: MetadataImage, records: Sequence[Message], controller_epoch: int,
                   controller_epoch_version: int, exists: Callable[[str], bool],
                   config_of: Callable[[str], Mapping[str, str]] = lambda path: {}) -> list[Operation]:
    """The multi-op that makes ZooKeeper hold `after`, given that it holds `before` (the image `records` were
    computed from). `exists(path)` answers for znodes whose presence the images do not tell (configs);
    `config_of(path)` gives a config znode's keys as last read, so that keys kfk does not model there survive."""
    operations = [Operation("check", znodes.CONTROLLER_EPOCH_PATH, version=controller_epoch_version)]
    removed = [topic for topic_id, topic in before.topics_by_id.items() if topic_id not in after.topics_by_id]
    for topic in removed:
        for partition_id in topic.partitions:
            operations.append(Operation("delete", znodes.partition_state_path(topic.name, partition_id)))
            operations.append(Operation("delete", znodes.partition_path(topic.name, partition_id)))
        if exists(znodes.partitions_path(topic.name)) or topic.partitions:
            operations.append(Operation("delete", znodes.partitions_path(topic.name)))
        operations.append(Operation("delete", znodes.topic_path(topic.name)))
        if exists(znodes.topic_config_path(topic.name)):
            operations.append(Operation("delete", znodes.topic_config_path(topic.name)))
    for topic_id, topic in after.topics_by_id.items():
        previous = before.topics_by_id.get(topic_id)
        if previous is topic:
            continue
        previous_partitions = previous.partitions if previous is not None else {}
        assignment = znodes.encode_topic(znodes.TopicZnode(
            topic_id, {p: r.replicas for p, r in topic.partitions.items()},
            {p: r.adding_replicas for p, r in topic.partitions.items()},
            {p: r.removing_replicas for p, r in topic.partitions.items()}))
        if previous is None:
            operations.append(Operation("create", znodes.topic_path(topic.name), assignment))
            operations.append(Operation("create", znodes.partitions_path(topic.name)))
        elif any(_assignment(previous_partitions.get(p)) != _assignment(r) for p, r in topic.partitions.items()):
            operations.append(Operation("set", znodes.topic_path(topic.name), assignment))
        for partition_id, registration in sorted(topic.partitions.items()):
            old = previous_partitions.get(partition_id)
            state = znodes.encode_partition_state(registration.leader, registration.leader_epoch, registration.isr,
                                                  controller_epoch)
            if old is None:
                operations.append(Operation("create", znodes.partition_path(topic.name, partition_id)))
                operations.append(Operation("create", znodes.partition_state_path(topic.name, partition_id), state))
            elif old != registration:
                # Any change bumps the partition epoch, and the zkVersion must follow it.
                operations.append(Operation("set", znodes.partition_state_path(topic.name, partition_id), state,
                                            version=old.partition_epoch))
    removed_names = {topic.name for topic in removed}
    for key in sorted(set(before.configs) | set(after.configs)):
        resource_type, resource_name = key
        parent = _CONFIG_PARENTS.get(resource_type)
        if parent is None or before.configs.get(key, {}) == after.configs.get(key, {}):
            continue
        if resource_type == ConfigResourceType.TOPIC and resource_name in removed_names:
            continue
        entity = resource_name or znodes.DEFAULT_BROKER_CONFIG_ENTITY
        path = f"{parent}/{entity}"
        data = znodes.encode_config(after.configs.get(key, {}))
        operations.append(Operation("set" if exists(path) else "create", path, data))
        operations.append(Operation("create", f"{znodes.CONFIG_CHANGES_PATH}/{znodes.CONFIG_CHANGE_PREFIX}",
                                    znodes.encode_config_change(f"{_CONFIG_ENTITY[resource_type]}/{entity}"),
                                    sequential=True))
    operations.extend(_user_and_client_operations(before, after, exists, config_of))
    for topic in after.topics_by_id.values():
        if topic.topic_id not in before.topics_by_id and not exists(znodes.topic_config_path(topic.name)) \
                and not after.configs.get((ConfigResourceType.TOPIC, topic.name)):
            operations.append(Operation("create", znodes.topic_config_path(topic.name), znodes.encode_config({})))
    if after.features != before.features:
        operations.append(Operation("set" if exists(znodes.FEATURE_PATH) else "create", znodes.FEATURE_PATH,
                                    znodes.encode_features(after.features)))
    if after.next_producer_id != before.next_producer_id:
        broker_id = next((record.broker_id for record in records if record.NAME == "ProducerIdsRecord"), -1)
        operations.append(Operation(
            "set" if exists(znodes.PRODUCER_ID_BLOCK_PATH) else "create", znodes.PRODUCER_ID_BLOCK_PATH,
            znodes.encode_producer_id_block(broker_id, before.next_producer_id, after.next_producer_id - 1)))
    if after.acls is not before.acls:
        operations.extend(_acl_operations(before, after, exists))
    return operations


def _acl_operations(before: MetadataImage, after: MetadataImage, exists: Callable[[str], bool]) -> list[Operation]:
    """Each resource pattern whose ACLs changed: its znode written (or deleted with its last ACL), and the change
    notification Kafka's AclAuthorizer watches for."""
    operations = []
    old, new = _acls_by_pattern(before.acls), _acls_by_pattern(after.acls)
    for pattern in sorted(set(old) | set(new), key=znodes.acl_path):
        entries = new.get(pattern)
        if old.get(pattern) == entries:
            continue
        path = znodes.acl_path(pattern)
        if entries:
            ordered = sorted(entries, key=lambda e: (e.principal, e.host, e.operation, e.permission_type))
            operations.append(Operation("set" if exists(path) else "create", path, znodes.encode_acls(ordered)))
        elif exists(path):
            operations.append(Operation("delete", path))
        operations.append(Operation("create", znodes.acl_change_path(pattern), znodes.encode_acl_change(pattern),
                                    sequential=True))
    return operations


def _user_and_client_operations(before: MetadataImage, after: MetadataImage, exists: Callable[[str], bool],
                                 config_of: Callable[[str], Mapping[str, str]]) -> list[Operation]:
    """The /config/users, /config/clients and /config/ips znodes whose contents changed (client quotas; a user's
    SCRAM credentials share the user's znode), rewritten whole with the keys kfk does not model kept, each with its
    config change notification, as Kafka's ZooKeeper mode writes them. Parents (/config/users/<user> and its
    /clients) are created when missing; an entity whose last key goes keeps its znode with an empty config."""
    operations: list[Operation] = []
    created: set[str] = set()

    def ensure(path: str, data: bytes) -> None:
        if path not in created and not exists(path):
            operations.append(Operation("create", path, data))
            created.add(path)

    users = {ClientQuotaEntity.of([(USER, user)])
             for user, _ in set(before.scram_credentials) | set(after.scram_credentials)}
    for entity in sorted(set(before.client_quotas) | set(after.client_quotas) | users,
                         key=ClientQuotaEntity.sort_key):
        modelled = _entity_config(after, entity)
        if _entity_config(before, entity) == modelled:
            continue
        path = znodes.client_quota_path(entity)
        config = {key: value for key, value in config_of(path).items() if not _is_modelled(entity, key)}
        config.update(modelled)
        if path.count("/") == 5:  # /config/users/<user>/clients/<client-id>
            user_path = path.rsplit("/", 2)[0]
            ensure(user_path, znodes.encode_config({}))
            ensure(f"{user_path}/clients", b"")
        data = znodes.encode_config(config)
        if path in created or exists(path):
            operations.append(Operation("set", path, data))
        else:
            operations.append(Operation("create", path, data))
            created.add(path)
        operations.append(Operation("create", f"{znodes.CONFIG_CHANGES_PATH}/{znodes.CONFIG_CHANGE_PREFIX}",
                                    znodes.encode_config_change(path[len(znodes.CONFIG_PATH) + 1:]),
                                    sequential=True))
    return operations


def _entity_config(image: MetadataImage, entity: ClientQuotaEntity) -> dict[str, str]:
    """What kfk models of an entity's znode in `image`: its quotas, and a named user's SCRAM credentials."""
    keys = znodes.quota_keys(entity)
    config = {key: znodes.encode_quota_value(keys[key], value)
              for key, value in image.client_quotas.get(entity, {}).items()}
    user = entity.as_dict().get(USER) if len(entity.parts) == 1 else None
    if user is not None:
        config.update(_user_config(image, user))
    return config


def _is_modelled(entity: ClientQuotaEntity, key: str) -> bool:
    return key in znodes.quota_keys(entity) or (
        entity.parts[0][0] == USER and ScramMechanism.from_mechanism_name(key) != ScramMechanism.UNKNOWN)


def scram_credentials(user_configs: Mapping[str, Mapping[str, str]]) -> dict[tuple[str, int], ScramCredentialData]:
    """The SCRAM credentials /config/users/<user> znodes hold (entries named SCRAM-SHA-256 / SCRAM-SHA-512 in
    Kafka's text form); an entry that does not parse is logged and left out, as Kafka's broker skips it."""
    credentials: dict[tuple[str, int], ScramCredentialData] = {}
    for user, config in user_configs.items():
        for name, text in config.items():
            mechanism = ScramMechanism.from_mechanism_name(name)
            if mechanism == ScramMechanism.UNKNOWN:
                continue
            try:
                credential = parse_credential(text)
            except ValueError as error:
                log.warning("ignoring the %s credential of user %s in ZooKeeper: %s", name, user, error)
                continue
            credentials[(user, int(mechanism))] = ScramCredentialData(
                credential.salt, credential.stored_key, credential.server_key, credential.iterations)
    return credentials


def _user_config(image: MetadataImage, user: str) -> dict[str, str]:
    """What /config/users/<user> holds for `image`: the user's SCRAM credentials by mechanism name."""
    return {ScramMechanism(mechanism).mechanism_name: format_credential(ScramCredential(
                data.salt, data.stored_key, data.server_key, data.iterations))
            for (name, mechanism), data in sorted(image.scram_credentials.items()) if name == user}


def _assignment(registration: PartitionRegistration | None) -> tuple | None:
    if registration is None:
        return None
    return registration.replicas, registration.adding_replicas, registration.removing_replicas
