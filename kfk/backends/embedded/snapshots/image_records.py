"""The metadata records that rebuild a MetadataImage from nothing: what a snapshot holds.

Applying `image_records(image)` to an empty image gives back an equal image (tests/backends/test_snapshots.py).
Records that only *change* something (PartitionChangeRecord, RemoveTopicRecord, fencing and unregistration...)
never appear: their effect is already in the state written. The order is Kafka's MetadataImage.write order:
features first (metadata.version decides how the rest is read), then brokers, topics with their partitions,
configs, client quotas, producer ids, ACLs and SCRAM credentials.

Whoever teaches MetadataImage a new kind of state (ACLs, quotas, SCRAM credentials...) writes it here too: the
test fails for any record type the image applies that is neither written here nor listed in CHANGE_RECORDS.
"""

from __future__ import annotations

from kfk.common.features import METADATA_VERSION_FEATURE_NAME
from kfk.metadata import acls, delegation_tokens
from kfk.metadata.image import MetadataImage
from kfk.protocol.message import Message
from kfk.protocol.metadata_records import schema_class

FeatureLevelRecord = schema_class("FeatureLevelRecord")
RegisterBrokerRecord = schema_class("RegisterBrokerRecord")
TopicRecord = schema_class("TopicRecord")
PartitionRecord = schema_class("PartitionRecord")
ConfigRecord = schema_class("ConfigRecord")
ProducerIdsRecord = schema_class("ProducerIdsRecord")
ClientQuotaRecord = schema_class("ClientQuotaRecord")
UserScramCredentialRecord = schema_class("UserScramCredentialRecord")

#: What image_records writes.
SNAPSHOT_RECORDS = frozenset({"FeatureLevelRecord", "RegisterBrokerRecord", "TopicRecord", "PartitionRecord",
                              "ConfigRecord", "ProducerIdsRecord", "ClientQuotaRecord", "AccessControlEntryRecord",
                              "UserScramCredentialRecord", "DelegationTokenRecord"})
#: Records whose effect the records above carry.
CHANGE_RECORDS = frozenset({"PartitionChangeRecord", "RemoveTopicRecord", "UnregisterBrokerRecord",
                            "FenceBrokerRecord", "UnfenceBrokerRecord", "BrokerRegistrationChangeRecord",
                            "RemoveAccessControlEntryRecord", "RemoveUserScramCredentialRecord",
                            "RemoveDelegationTokenRecord", "ClearElrRecord"})


def image_records(image: MetadataImage) -> list[Message]:
    records: list[Message] = []
    for name in sorted(image.features, key=lambda feature: (feature != METADATA_VERSION_FEATURE_NAME, feature)):
        records.append(FeatureLevelRecord(name=name, feature_level=image.features[name]))
    for broker_id in sorted(image.brokers):
        broker = image.brokers[broker_id]
        records.append(RegisterBrokerRecord(
            broker_id=broker.broker_id, incarnation_id=broker.incarnation_id, broker_epoch=broker.broker_epoch,
            end_points=[RegisterBrokerRecord.BrokerEndpoint(name=endpoint.listener_name, host=endpoint.host,
                                                            port=endpoint.port,
                                                            security_protocol=endpoint.security_protocol)
                        for endpoint in broker.endpoints],
            features=[RegisterBrokerRecord.BrokerFeature(name=name, min_supported_version=low,
                                                         max_supported_version=high)
                      for name, (low, high) in sorted(broker.supported_features.items())],
            rack=broker.rack, fenced=broker.fenced, in_controlled_shutdown=broker.in_controlled_shutdown,
            log_dirs=list(broker.log_dirs)))
    for name in sorted(image.topics_by_name):
        topic = image.topics_by_name[name]
        records.append(TopicRecord(name=topic.name, topic_id=topic.topic_id))
        for partition_id in sorted(topic.partitions):
            partition = topic.partitions[partition_id]
            records.append(PartitionRecord(
                partition_id=partition_id, topic_id=topic.topic_id, replicas=list(partition.replicas),
                isr=list(partition.isr), removing_replicas=list(partition.removing_replicas),
                adding_replicas=list(partition.adding_replicas), leader=partition.leader,
                leader_epoch=partition.leader_epoch, partition_epoch=partition.partition_epoch,
                directories=list(partition.directories),  # none recorded: Kafka reads MIGRATING for each
                eligible_leader_replicas=list(partition.elr) or None,
                last_known_elr=list(partition.last_known_elr) or None))
    for resource_type, resource_name in sorted(image.configs):
        values = image.configs[(resource_type, resource_name)]
        for name in sorted(values):
            records.append(ConfigRecord(resource_type=int(resource_type), resource_name=resource_name, name=name,
                                        value=values[name]))
    for entity in sorted(image.client_quotas, key=lambda entity: entity.sort_key()):
        quotas = image.client_quotas[entity]
        for key in sorted(quotas):
            records.append(ClientQuotaRecord(
                entity=[ClientQuotaRecord.EntityData(entity_type=kind, entity_name=name) for kind, name in entity.parts],
                key=key, value=quotas[key], remove=False))
    if image.next_producer_id > 0:  # the image holds the next id only: no broker owns the block any more
        records.append(ProducerIdsRecord(broker_id=-1, broker_epoch=-1, next_producer_id=image.next_producer_id))
    for acl_id in sorted(image.acls):
        records.append(acls.record_of(acl_id, image.acls[acl_id]))
    for (user, mechanism) in sorted(image.scram_credentials):
        credential = image.scram_credentials[(user, mechanism)]
        records.append(UserScramCredentialRecord(name=user, mechanism=mechanism, salt=credential.salt,
                                                 stored_key=credential.stored_key, server_key=credential.server_key,
                                                 iterations=credential.iterations))
    for token_id in sorted(image.delegation_tokens):
        records.append(delegation_tokens.record_of(image.delegation_tokens[token_id]))
    return records
