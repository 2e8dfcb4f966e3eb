"""Kafka's ZooKeeper layout: the znode paths and their JSON payloads (Kafka's ZkData.scala), pure functions only.

    /cluster/id                                  {"version":"1","id":"<cluster id>"}
    /controller                                  {"version":1,"brokerid":1,"timestamp":"<ms>"}          ephemeral
    /controller_epoch                            "<epoch>"
    /brokers/ids/<id>                            {"listener_security_protocol_map":{...},"endpoints":[...],
                                                  "rack":..., "jmx_port":-1,"host":...,"port":...,
                                                  "timestamp":"<ms>","version":5}                        ephemeral
    /brokers/topics/<topic>                      {"partitions":{"0":[1,2]},"topic_id":"<base64>",
                                                  "adding_replicas":{},"removing_replicas":{},"version":3}
    /brokers/topics/<topic>/partitions/<p>/state {"controller_epoch":1,"leader":1,"version":1,
                                                  "leader_epoch":0,"isr":[1,2]}
    /brokers/seqid                               (broker id generation)
    /config/topics/<topic>, /config/brokers/<id|<default>>   {"version":1,"config":{...}}
    /config/users/<user>                         {"version":1,"config":{"SCRAM-SHA-256":"salt=...,stored_key=...,
                                                  server_key=...,iterations=4096","producer_byte_rate":"1024"}}
    /config/users/<user|<default>>, /config/users/<user|<default>>/clients/<client-id|<default>>,
    /config/clients/<client-id|<default>>, /config/ips/<ip|<default>>   {"version":1,"config":{...}} (client quotas)
    /config/changes/config_change_<seq>          {"version":2,"entity_path":"topics/<topic>"}
    /admin/delete_topics/<topic>, /admin/reassign_partitions, /isr_change_notification/isr_change_<seq>
    /latest_producer_id_block                    {"version":1,"broker":1,"block_start":"0","block_end":"999"}
    /feature                                     {"features":{...},"version":2,"status":1}
    /kafka-acl/<Type>/<name>                     {"version":1,"acls":[{"principal":"User:alice",
                                                  "permissionType":"Allow","operation":"Read","host":"*"}]}
    /kafka-acl-extended/prefixed/<Type>/<prefix> (the same, for PREFIXED patterns)
    /kafka-acl-changes/acl_changes_<seq>         "Topic:<name>" (a literal pattern changed)
    /kafka-acl-extended-changes/acl_changes_<seq> {"version":1,"resourceType":"Topic","name":...,
                                                  "patternType":"PREFIXED"}

As in Kafka's ZooKeeper mode, a partition's epoch is the zkVersion of its state znode (every conditional update
bumps it) and a broker's epoch is the czxid of its registration znode (each new session's registration is newer).
"""

from __future__ import annotations

import json
import urllib.parse
import uuid
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Mapping, Sequence

from kfk.common.client_quotas import (
    CLIENT_ID,
    IP,
    IP_QUOTA_KEYS,
    USER,
    USER_CLIENT_QUOTA_KEYS,
    ClientQuotaEntity,
    QuotaValueType,
)
from kfk.common.uuids import uuid_from_base64, uuid_to_base64
from kfk.config import SECURITY_PROTOCOLS
from kfk.errors import CorruptRecordError
from kfk.metadata.image import Endpoint
from kfk.security.acl import (
    AccessControlEntry,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
    parse_title,
)

CLUSTER_ID_PATH = "/cluster/id"
CONTROLLER_PATH = "/controller"
CONTROLLER_EPOCH_PATH = "/controller_epoch"
BROKER_IDS_PATH = "/brokers/ids"
TOPICS_PATH = "/brokers/topics"
BROKER_SEQUENCE_ID_PATH = "/brokers/seqid"
CONFIG_PATH = "/config"
CONFIG_TOPICS_PATH = "/config/topics"
CONFIG_BROKERS_PATH = "/config/brokers"
CONFIG_USERS_PATH = "/config/users"
CONFIG_CHANGES_PATH = "/config/changes"
CONFIG_CHANGE_PREFIX = "config_change_"
DELETE_TOPICS_PATH = "/admin/delete_topics"
REASSIGN_PARTITIONS_PATH = "/admin/reassign_partitions"
ISR_CHANGE_NOTIFICATION_PATH = "/isr_change_notification"
ISR_CHANGE_PREFIX = "isr_change_"
PRODUCER_ID_BLOCK_PATH = "/latest_producer_id_block"
FEATURE_PATH = "/feature"
CONFIG_CLIENTS_PATH = "/config/clients"
CONFIG_IPS_PATH = "/config/ips"
#: The entity name of a default (Kafka's ZooKeeper-mode ConfigEntityName.DEFAULT): brokers and client quotas.
DEFAULT_BROKER_CONFIG_ENTITY = DEFAULT_ENTITY = "<default>"

#: Kafka's AclAuthorizer stores: literal patterns and their change notifications, prefixed ones and theirs.
ACL_PATH = "/kafka-acl"
ACL_PREFIXED_PATH = "/kafka-acl-extended/prefixed"
ACL_CHANGES_PATH = "/kafka-acl-changes"
ACL_EXTENDED_CHANGES_PATH = "/kafka-acl-extended-changes"
ACL_CHANGE_PREFIX = "acl_changes_"
#: The resource types ACLs are stored for, one znode directory each under both stores.
ACL_RESOURCE_TYPES = (ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER, ResourceType.TRANSACTIONAL_ID,
                      ResourceType.DELEGATION_TOKEN)
ACL_TYPE_PATHS = tuple(f"{store}/{kind.title}" for store in (ACL_PATH, ACL_PREFIXED_PATH)
                       for kind in ACL_RESOURCE_TYPES)

#: Persistent znodes every cluster has (Kafka's ZkData.PersistentZkPaths, and the ACL stores' directories that
#: Kafka's AclAuthorizer creates), created by the first broker.
PERSISTENT_PATHS = (CONFIG_CHANGES_PATH, CONFIG_TOPICS_PATH, CONFIG_BROKERS_PATH, CONFIG_USERS_PATH,
                    CONFIG_CLIENTS_PATH, CONFIG_IPS_PATH, BROKER_IDS_PATH, TOPICS_PATH, BROKER_SEQUENCE_ID_PATH,
                    DELETE_TOPICS_PATH, ISR_CHANGE_NOTIFICATION_PATH, "/cluster", ACL_CHANGES_PATH,
                    ACL_EXTENDED_CHANGES_PATH, *ACL_TYPE_PATHS)

#: SecurityProtocol names by Kafka's id, and back.
SECURITY_PROTOCOL_NAMES = dict(enumerate(SECURITY_PROTOCOLS))
SECURITY_PROTOCOL_IDS = {name: protocol_id for protocol_id, name in SECURITY_PROTOCOL_NAMES.items()}


def topic_path(topic: str) -> str:
    return f"{TOPICS_PATH}/{topic}"


def partitions_path(topic: str) -> str:
    return f"{TOPICS_PATH}/{topic}/partitions"


def partition_path(topic: str, partition: int) -> str:
    return f"{TOPICS_PATH}/{topic}/partitions/{partition}"


def partition_state_path(topic: str, partition: int) -> str:
    return f"{TOPICS_PATH}/{topic}/partitions/{partition}/state"


def broker_path(broker_id: int) -> str:
    return f"{BROKER_IDS_PATH}/{broker_id}"


def topic_config_path(topic: str) -> str:
    return f"{CONFIG_TOPICS_PATH}/{topic}"


def sanitize_entity(name: str) -> str:
    """A user or client-id as its znode names it (Kafka's Sanitizer: URL encoding, `*` too): `CN=a b` ->
    `CN%3Da%20b`."""
    return urllib.parse.quote(name, safe="").replace("~", "%7E")


def desanitize_entity(name: str) -> str:
    return urllib.parse.unquote(name)


def broker_config_path(entity: str) -> str:
    return f"{CONFIG_BROKERS_PATH}/{entity}"


def _entity_znode_name(name: str | None, sanitized: bool) -> str:
    if name is None:
        return DEFAULT_ENTITY
    return sanitize_entity(name) if sanitized else name


def _entity_name(znode_name: str, sanitized: bool) -> str | None:
    if znode_name == DEFAULT_ENTITY:
        return None
    return desanitize_entity(znode_name) if sanitized else znode_name


def client_quota_path(entity: ClientQuotaEntity) -> str:
    """The znode of a client quota entity, and its config change notification's entity_path is this path without
    the leading "/config/"."""
    parts = entity.as_dict()
    if IP in parts:
        return f"{CONFIG_IPS_PATH}/{_entity_znode_name(parts[IP], sanitized=False)}"
    if USER in parts:
        path = f"{CONFIG_USERS_PATH}/{_entity_znode_name(parts[USER], sanitized=True)}"
        if CLIENT_ID in parts:
            path += f"/clients/{_entity_znode_name(parts[CLIENT_ID], sanitized=True)}"
        return path
    return f"{CONFIG_CLIENTS_PATH}/{_entity_znode_name(parts[CLIENT_ID], sanitized=True)}"


def client_quota_entity(path: str) -> ClientQuotaEntity | None:
    """The entity whose quotas a znode holds (None: not a client quota znode)."""
    parts = path.split("/")  # ['', 'config', 'users', <user>, ('clients', <client>)]
    if len(parts) == 4 and parts[2] in ("users", "clients", "ips"):
        kind = {"users": USER, "clients": CLIENT_ID, "ips": IP}[parts[2]]
        return ClientQuotaEntity.of([(kind, _entity_name(parts[3], sanitized=kind != IP))])
    if len(parts) == 6 and parts[2] == "users" and parts[4] == "clients":
        return ClientQuotaEntity.of([(USER, _entity_name(parts[3], sanitized=True)),
                                     (CLIENT_ID, _entity_name(parts[5], sanitized=True))])
    return None


def _dumps(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode("utf-8")


def _loads(data: bytes | None, path: str) -> Any:
    if not data:
        raise CorruptRecordError(f"znode {path} is empty")
    try:
        return json.loads(data)
    except ValueError as error:
        raise CorruptRecordError(f"znode {path} does not hold JSON: {error}") from error


# -- /cluster/id, /controller, /controller_epoch ---------------------------------------------------------------------

def encode_cluster_id(cluster_id: str) -> bytes:
    return _dumps({"version": "1", "id": cluster_id})


def decode_cluster_id(data: bytes) -> str:
    return str(_loads(data, CLUSTER_ID_PATH)["id"])


def encode_controller(broker_id: int, timestamp_ms: int) -> bytes:
    return _dumps({"version": 1, "brokerid": broker_id, "timestamp": str(timestamp_ms)})


def decode_controller(data: bytes) -> int:
    return int(_loads(data, CONTROLLER_PATH)["brokerid"])


def encode_controller_epoch(epoch: int) -> bytes:
    return str(epoch).encode("ascii")


def decode_controller_epoch(data: bytes) -> int:
    try:
        return int(data.decode("ascii"))
    except (UnicodeDecodeError, ValueError) as error:
        raise CorruptRecordError(f"{CONTROLLER_EPOCH_PATH} holds {data!r}, not an epoch") from error


# -- /brokers/ids/<id> -----------------------------------------------------------------------------------------------

_NO_FEATURES: Mapping[str, tuple[int, int]] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class BrokerZnode:
    broker_id: int
    endpoints: tuple[Endpoint, ...]
    rack: str | None
    #: The czxid of the znode: Kafka's broker epoch in ZooKeeper mode.
    broker_epoch: int = -1
    #: The (lowest, highest) level of each feature the broker supports (the znode's "features").
    supported_features: Mapping[str, tuple[int, int]] = field(default_factory=lambda: _NO_FEATURES)


def encode_broker(endpoints: Sequence[Endpoint], rack: str | None, timestamp_ms: int,
                  supported_features: Mapping[str, tuple[int, int]] = _NO_FEATURES) -> bytes:
    """Kafka's BrokerIdZNode version 5 (the first endpoint also as the legacy host/port), with the features the
    broker supports as Kafka 3.x's ZooKeeper brokers list them."""
    plaintext = next((e for e in endpoints if e.security_protocol == 0), None)
    data: dict[str, Any] = {
        "listener_security_protocol_map": {e.listener_name: SECURITY_PROTOCOL_NAMES.get(e.security_protocol,
                                                                                         "PLAINTEXT")
                                           for e in endpoints},
        "endpoints": [f"{e.listener_name}://{e.host}:{e.port}" for e in endpoints],
        "jmx_port": -1,
        "features": {name: {"min_version": low, "max_version": high}
                     for name, (low, high) in sorted(supported_features.items())},
        "host": plaintext.host if plaintext else None,
        "port": plaintext.port if plaintext else -1,
        "timestamp": str(timestamp_ms),
        "version": 5,
    }
    if rack is not None:
        data["rack"] = rack
    return _dumps(data)


def decode_broker(broker_id: int, data: bytes, broker_epoch: int = -1) -> BrokerZnode:
    path = broker_path(broker_id)
    value = _loads(data, path)
    try:
        protocols = value.get("listener_security_protocol_map") or {}
        endpoints = []
        for text in value.get("endpoints") or []:
            name, _, address = text.partition("://")
            host, _, port = address.rpartition(":")
            protocol = protocols.get(name, name)
            endpoints.append(Endpoint(name, host.strip("[]"), int(port), SECURITY_PROTOCOL_IDS.get(protocol, 0)))
        if not endpoints and value.get("host"):
            endpoints.append(Endpoint("PLAINTEXT", value["host"], int(value["port"]), 0))
        features = {name: (int(levels["min_version"]), int(levels["max_version"]))
                    for name, levels in (value.get("features") or {}).items()}
        return BrokerZnode(broker_id, tuple(endpoints), value.get("rack"), broker_epoch, features)
    except (AttributeError, TypeError, ValueError) as error:
        raise CorruptRecordError(f"znode {path} is not a broker registration: {error}") from error


# -- /brokers/topics/<topic> -----------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class TopicZnode:
    topic_id: uuid.UUID | None
    partitions: Mapping[int, tuple[int, ...]]
    adding_replicas: Mapping[int, tuple[int, ...]]
    removing_replicas: Mapping[int, tuple[int, ...]]




def encode_topic(topic: TopicZnode) -> bytes:
    def by_partition(mapping: Mapping[int, Sequence[int]]) -> dict[str, list[int]]:
        return {str(partition): list(replicas) for partition, replicas in sorted(mapping.items()) if replicas}

    data: dict[str, Any] = {"partitions": by_partition(topic.partitions)}
    if topic.topic_id is not None:
        data["topic_id"] = uuid_to_base64(topic.topic_id)
    data["adding_replicas"] = by_partition(topic.adding_replicas)
    data["removing_replicas"] = by_partition(topic.removing_replicas)
    data["version"] = 3
    return _dumps(data)


def decode_topic(topic: str, data: bytes) -> TopicZnode:
    path = topic_path(topic)
    value = _loads(data, path)
    try:
        def by_partition(key: str) -> dict[int, tuple[int, ...]]:
            return {int(partition): tuple(int(r) for r in replicas)
                    for partition, replicas in (value.get(key) or {}).items()}

        topic_id = value.get("topic_id")
        return TopicZnode(uuid_from_base64(topic_id) if topic_id else None, by_partition("partitions"),
                          by_partition("adding_replicas"), by_partition("removing_replicas"))
    except (AttributeError, TypeError, ValueError) as error:
        raise CorruptRecordError(f"znode {path} is not a topic assignment: {error}") from error


# -- /brokers/topics/<topic>/partitions/<p>/state --------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class PartitionStateZnode:
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    #: The zkVersion of the znode: the partition epoch.
    partition_epoch: int = 0


def encode_partition_state(leader: int, leader_epoch: int, isr: Sequence[int], controller_epoch: int) -> bytes:
    return _dumps({"controller_epoch": controller_epoch, "leader": leader, "version": 1,
                   "leader_epoch": leader_epoch, "isr": list(isr)})


def decode_partition_state(path: str, data: bytes, zk_version: int) -> PartitionStateZnode:
    value = _loads(data, path)
    try:
        return PartitionStateZnode(int(value["leader"]), int(value["leader_epoch"]),
                                   tuple(int(r) for r in value["isr"]), int(value["controller_epoch"]), zk_version)
    except (KeyError, TypeError, ValueError) as error:
        raise CorruptRecordError(f"znode {path} is not a partition state: {error}") from error


# -- /config, /latest_producer_id_block, /feature, notifications -----------------------------------------------------

def encode_config(config: Mapping[str, str]) -> bytes:
    return _dumps({"version": 1, "config": dict(sorted(config.items()))})


def decode_config(path: str, data: bytes) -> dict[str, str]:
    value = _loads(data, path)
    try:
        return {str(name): str(setting) for name, setting in (value.get("config") or {}).items()}
    except AttributeError as error:
        raise CorruptRecordError(f"znode {path} is not a config: {error}") from error


def quota_keys(entity: ClientQuotaEntity) -> Mapping[str, QuotaValueType]:
    return IP_QUOTA_KEYS if entity.parts[0][0] == IP else USER_CLIENT_QUOTA_KEYS


def encode_quota_value(value_type: QuotaValueType, value: float) -> str:
    """A quota as Kafka's ZooKeeper mode stores it: whole numbers for LONG/INT keys, else a double."""
    return str(value) if value_type is QuotaValueType.DOUBLE else str(round(value))


def decode_client_quotas(entity: ClientQuotaEntity, config: Mapping[str, str]) -> dict[str, float]:
    """The quota keys of an entity's config (other keys, such as a user's SCRAM credentials, are not quotas)."""
    keys = quota_keys(entity)
    quotas = {}
    for key, text in config.items():
        if key in keys:
            try:
                quotas[key] = float(text)
            except ValueError:
                raise CorruptRecordError(f"quota {key} of {entity} is not a number: {text!r}") from None
    return quotas


def encode_config_change(entity_path: str) -> bytes:
    return _dumps({"version": 2, "entity_path": entity_path})


def encode_producer_id_block(broker_id: int, block_start: int, block_end: int) -> bytes:
    return _dumps({"version": 1, "broker": broker_id, "block_start": str(block_start), "block_end": str(block_end)})


def decode_producer_id_block_end(data: bytes) -> int:
    """The last producer id handed out (the next block starts after it)."""
    return int(_loads(data, PRODUCER_ID_BLOCK_PATH)["block_end"])


def encode_features(features: Mapping[str, int]) -> bytes:
    return _dumps({"features": {name: {"max_version_level": level, "min_version_level": level}
                                for name, level in sorted(features.items())},
                   "version": 2, "status": 1})


def decode_features(data: bytes) -> dict[str, int]:
    value = _loads(data, FEATURE_PATH)
    return {name: int(levels["max_version_level"]) for name, levels in (value.get("features") or {}).items()}


def encode_isr_change_notification(partitions: Sequence[tuple[str, int]]) -> bytes:
    return _dumps({"version": 1, "partitions": [{"topic": topic, "partition": partition}
                                                for topic, partition in partitions]})


def decode_reassignment(data: bytes) -> dict[tuple[str, int], list[int]]:
    value = _loads(data, REASSIGN_PARTITIONS_PATH)
    try:
        return {(entry["topic"], int(entry["partition"])): [int(r) for r in entry["replicas"]]
                for entry in value.get("partitions") or []}
    except (AttributeError, KeyError, TypeError, ValueError) as error:
        raise CorruptRecordError(f"{REASSIGN_PARTITIONS_PATH} is not a reassignment: {error}") from error


def encode_reassignment(partitions: Mapping[tuple[str, int], Sequence[int]]) -> bytes:
    return _dumps({"version": 1, "partitions": [{"topic": topic, "partition": partition, "replicas": list(replicas)}
                                                for (topic, partition), replicas in sorted(partitions.items())]})


# -- /kafka-acl, /kafka-acl-extended ---------------------------------------------------------------------------------

def acl_path(pattern: ResourcePattern) -> str:
    store = ACL_PREFIXED_PATH if pattern.pattern_type == PatternType.PREFIXED else ACL_PATH
    return f"{store}/{pattern.resource_type.title}/{pattern.name}"


def acl_change_path(pattern: ResourcePattern) -> str:
    """The sequential znode's path prefix that tells Kafka's brokers a pattern's ACLs changed."""
    store = ACL_EXTENDED_CHANGES_PATH if pattern.pattern_type == PatternType.PREFIXED else ACL_CHANGES_PATH
    return f"{store}/{ACL_CHANGE_PREFIX}"


def encode_acls(entries: Sequence[AccessControlEntry]) -> bytes:
    return _dumps({"version": 1, "acls": [
        {"principal": entry.principal, "permissionType": entry.permission_type.title,
         "operation": entry.operation.title, "host": entry.host} for entry in entries]})


def decode_acls(path: str, data: bytes) -> tuple[ResourcePattern, frozenset[AccessControlEntry]]:
    """An ACL znode's pattern (from its path) and entries."""
    prefixed = path.startswith(ACL_PREFIXED_PATH + "/")
    kind_text, _, name = path[len(ACL_PREFIXED_PATH if prefixed else ACL_PATH) + 1:].partition("/")
    try:
        kind = parse_title(ResourceType, kind_text)
    except ValueError as error:
        raise CorruptRecordError(f"znode {path}: {error}") from error
    pattern = ResourcePattern(kind, name, PatternType.PREFIXED if prefixed else PatternType.LITERAL)
    value = _loads(data, path)
    try:
        entries = frozenset(AccessControlEntry(
            str(acl["principal"]), str(acl["host"]), parse_title(AclOperation, acl["operation"]),
            parse_title(AclPermissionType, acl["permissionType"])) for acl in value.get("acls") or ())
    except (AttributeError, KeyError, TypeError, ValueError) as error:
        raise CorruptRecordError(f"znode {path} does not hold ACLs: {error}") from error
    return pattern, entries


def encode_acl_change(pattern: ResourcePattern) -> bytes:
    if pattern.pattern_type == PatternType.PREFIXED:
        return _dumps({"version": 1, "resourceType": pattern.resource_type.title, "name": pattern.name,
                       "patternType": pattern.pattern_type.name})
    return f"{pattern.resource_type.title}:{pattern.name}".encode("utf-8")
