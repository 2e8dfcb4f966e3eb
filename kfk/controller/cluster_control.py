"""Brokers joining the cluster: registration, unfencing, endpoints (Kafka's ClusterControlManager).

A broker registers with the listeners it really bound (after `advertised.listeners` is applied: an advertised
listener keeps its host but takes the bound port when it says 0 or names a listener bound to an ephemeral port),
its rack and the features it supports. It is registered fenced — it serves no partition yet — and is unfenced once
it has caught up with the metadata log. Unfencing also gives a leader to every partition that has none and has the
broker in its ISR (Kafka's handleBrokerUnfenced), so a restarted single node leads its partitions again.

The broker epoch is a number above every earlier epoch of that broker: Kafka takes the metadata offset of the
registration record; kfk takes the next offset after the image it decided on, which is at least as large.
"""

from __future__ import annotations

import socket
import uuid
from typing import Iterable, Mapping, Sequence

from kfk import config
from kfk.common.features import METADATA_VERSION_FEATURE_NAME
from kfk.common.uuids import uuid_to_base64
from kfk.controller.features import DIRECTORY_ASSIGNMENT_LEVEL
from kfk.controller.partition_change import PartitionChange
from kfk.controller.result import ControllerResult
from kfk.errors import (
    BrokerIdNotRegisteredError,
    InvalidRegistrationError,
    StaleBrokerEpochError,
    UnsupportedVersionError,
)
from kfk.metadata.directories import is_reserved
from kfk.metadata.image import NO_LEADER, Endpoint, MetadataImage
from kfk.protocol.message import Message
from kfk.protocol.metadata_records import schema_class

RegisterBrokerRecord = schema_class("RegisterBrokerRecord")
BrokerRegistrationChangeRecord = schema_class("BrokerRegistrationChangeRecord")
PartitionChangeRecord = schema_class("PartitionChangeRecord")

#: Kafka's SecurityProtocol ids: a protocol's id is its place in Kafka's list.
SECURITY_PROTOCOLS = {name: protocol_id for protocol_id, name in enumerate(config.SECURITY_PROTOCOLS)}
#: BrokerRegistrationChangeRecord.Fenced values.
UNFENCE, FENCE = -1, 1


def _parse_listener(text: str) -> tuple[str, str, int]:
    name, _, address = text.strip().partition("://")
    host, _, port = address.rpartition(":")
    return name.strip().upper(), host.strip("[]"), int(port)


def broker_endpoints(bound: Iterable, advertised_listeners: Sequence[str] | None,
                     security_protocol_map: Sequence[str], controller_listener_names: Sequence[str]) -> list[Endpoint]:
    """The endpoints a broker registers: its advertised listeners (default: the bound ones), ports taken from the
    bound sockets where the configuration left them open, controller listeners left out (clients never see them),
    an empty host replaced by this machine's name (as Kafka does)."""
    bound_by_name = {listener.name: listener for listener in bound}
    protocols = dict(entry.split(":", 1) for entry in security_protocol_map)
    controller_names = {name.upper() for name in controller_listener_names}
    if advertised_listeners:
        wanted = [_parse_listener(text) for text in advertised_listeners]
    else:
        wanted = [(listener.name, listener.host, listener.port) for listener in bound]
    endpoints = []
    for name, host, port in wanted:
        if name in controller_names:
            continue
        listener = bound_by_name.get(name)
        if listener is not None and (port == 0 or not advertised_listeners):
            port = listener.port
        if host in ("", "0.0.0.0", "::"):
            host = socket.getfqdn()
        protocol = protocols.get(name, name)
        endpoints.append(Endpoint(name, host, port, SECURITY_PROTOCOLS.get(protocol, 0)))
    return endpoints


def _feature_records(supported_features: Mapping[str, tuple[int, int]]) -> list:
    return [RegisterBrokerRecord.BrokerFeature(name=name, min_supported_version=low, max_supported_version=high)
            for name, (low, high) in sorted(supported_features.items())]


def check_supported_features(image: MetadataImage, supported_features: Mapping[str, tuple[int, int]]) -> None:
    """Refuse (UNSUPPORTED_VERSION, Kafka's words) a broker that does not support a finalized level: it could not
    read the cluster's metadata, or would speak an older protocol than the cluster finalized."""
    for name, level in sorted(image.features.items()):
        low, high = supported_features.get(name, (0, 0))
        if not low <= level <= high:
            raise UnsupportedVersionError(
                f"Unable to register because the broker does not support finalized version {level} of {name}. "
                f"The broker wants a version between {low} and {high}, inclusive.")


def check_log_dirs(image: MetadataImage, broker_id: int, log_dirs: Sequence[uuid.UUID]) -> None:
    """From metadata.version 3.7-IV2 on a broker registers its log dirs' ids: at least one, none of Kafka's
    reserved ids, no id twice, and none another broker registered (Kafka's checks and messages)."""
    if not log_dirs:
        raise InvalidRegistrationError("No directories specified in request")
    if any(is_reserved(directory) for directory in log_dirs):
        raise InvalidRegistrationError("Reserved directory ID in request")
    if len(set(log_dirs)) != len(log_dirs):
        raise InvalidRegistrationError("Duplicate directory ID in request")
    for other in image.brokers.values():
        if other.broker_id != broker_id:
            for directory in log_dirs:
                if directory in other.log_dirs:
                    raise InvalidRegistrationError(f"Broker {other.broker_id} is already registered with directory "
                                                   f"{uuid_to_base64(directory)}")


def register_broker(image: MetadataImage, broker_id: int, incarnation_id: uuid.UUID, endpoints: Sequence[Endpoint],
                    rack: str | None, supported_features: Mapping[str, tuple[int, int]],
                    log_dirs: Sequence[uuid.UUID] = ()) -> ControllerResult[int]:
    """A RegisterBrokerRecord (fenced) replacing any earlier registration of the id, with the feature levels the
    broker supports (refused when a finalized level is not among them) and, from metadata.version 3.7-IV2 on, its
    log dirs; the response is the new broker epoch. The same incarnation registering again (a running broker adding
    its log dirs after an upgrade) amends its registration: same broker epoch, fencing and shutdown state."""
    check_supported_features(image, supported_features)
    records_log_dirs = image.feature_level(METADATA_VERSION_FEATURE_NAME) >= DIRECTORY_ASSIGNMENT_LEVEL
    if records_log_dirs:
        check_log_dirs(image, broker_id, log_dirs)
    broker_epoch = image.offset + 1
    previous = image.brokers.get(broker_id)
    amending = previous is not None and previous.incarnation_id == incarnation_id
    if amending:
        broker_epoch = previous.broker_epoch
    elif previous is not None and previous.broker_epoch >= broker_epoch:
        broker_epoch = previous.broker_epoch + 1
    record = RegisterBrokerRecord(
        broker_id=broker_id,
        incarnation_id=incarnation_id,
        broker_epoch=broker_epoch,
        end_points=[RegisterBrokerRecord.BrokerEndpoint(name=e.listener_name, host=e.host, port=e.port,
                                                        security_protocol=e.security_protocol) for e in endpoints],
        features=_feature_records(supported_features),
        rack=rack,
        fenced=previous.fenced if amending else True,
        in_controlled_shutdown=previous.in_controlled_shutdown if amending else False,
        log_dirs=list(log_dirs) if records_log_dirs else [],
    )
    return ControllerResult(broker_epoch, [record])


def update_broker_endpoints(image: MetadataImage, broker_id: int, endpoints: Sequence[Endpoint]
                            ) -> ControllerResult[None]:
    """The broker's registration with new endpoints (a dynamic `listeners` added or removed one): a
    RegisterBrokerRecord repeating its incarnation, epoch, rack and fencing, so nothing else about it changes."""
    current = image.brokers.get(broker_id)
    if current is None:
        raise BrokerIdNotRegisteredError(f"No broker with id {broker_id} is registered.")
    record = RegisterBrokerRecord(
        broker_id=broker_id,
        incarnation_id=current.incarnation_id,
        broker_epoch=current.broker_epoch,
        end_points=[RegisterBrokerRecord.BrokerEndpoint(name=e.listener_name, host=e.host, port=e.port,
                                                        security_protocol=e.security_protocol) for e in endpoints],
        features=_feature_records(current.supported_features),
        rack=current.rack,
        fenced=current.fenced,
        in_controlled_shutdown=current.in_controlled_shutdown,
        log_dirs=list(current.log_dirs),
    )
    return ControllerResult(None, [record])


def check_broker_epoch(image: MetadataImage, broker_id: int, broker_epoch: int) -> None:
    registration = image.brokers.get(broker_id)
    if registration is None:
        raise BrokerIdNotRegisteredError(f"No broker with id {broker_id} is registered.")
    if registration.broker_epoch != broker_epoch:
        raise StaleBrokerEpochError(f"Expected broker epoch {registration.broker_epoch}, but got {broker_epoch}")


def unfence_broker(image: MetadataImage, broker_id: int, broker_epoch: int) -> ControllerResult[None]:
    """Unfence the broker and make it the leader of every leaderless partition whose ISR holds it, or whose ISR is
    empty and whose eligible leader replicas hold it (KIP-966: it then leads alone)."""
    check_broker_epoch(image, broker_id, broker_epoch)
    records: list[Message] = [
        BrokerRegistrationChangeRecord(broker_id=broker_id, broker_epoch=broker_epoch, fenced=UNFENCE)]
    for topic in image.topics_by_id.values():
        for partition_id, partition in topic.partitions.items():
            if partition.leader != NO_LEADER:
                continue
            if broker_id in partition.isr:
                records.append(PartitionChangeRecord(partition_id=partition_id, topic_id=topic.topic_id,
                                                     leader=broker_id))
            elif not partition.isr and broker_id in partition.elr:
                records.append(PartitionChange(
                    leader=broker_id, isr=(broker_id,), elr=tuple(r for r in partition.elr if r != broker_id),
                    last_known_elr=() if partition.last_known_elr else None).record(topic.topic_id, partition_id))
    return ControllerResult(None, records)


def fence_broker(image: MetadataImage, broker_id: int, broker_epoch: int, partition_changes: list[Message]
                 ) -> ControllerResult[None]:
    """Fence the broker (its session expired, it asked to be, or its controlled shutdown is over) together with the
    partition changes that take it out of the ISRs and move its leaderships (computed by the caller with the broker
    no longer live): one atomic write, so no image ever shows a fenced broker still leading."""
    check_broker_epoch(image, broker_id, broker_epoch)
    return ControllerResult(None, [BrokerRegistrationChangeRecord(broker_id=broker_id, broker_epoch=broker_epoch,
                                                                  fenced=FENCE), *partition_changes])


def endpoints_of(listeners: Iterable) -> list[Endpoint]:
    """The endpoints a BrokerRegistration request lists (its Listener entries)."""
    return [Endpoint(listener.name, listener.host, listener.port, listener.security_protocol)
            for listener in listeners]
