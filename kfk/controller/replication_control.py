"""Topics and partitions: CreateTopics, DeleteTopics, CreatePartitions (Kafka's ReplicationControlManager, with the
request checks of its ControllerApis).

CreateTopics, per topic, in Kafka's order of checks: a name given twice in one request (INVALID_REQUEST, both
dropped), __cluster_metadata (refused as if unauthorized, as Kafka does: it is not a topic), an illegal name
(INVALID_TOPIC_EXCEPTION), an existing topic (TOPIC_ALREADY_EXISTS) or one that differs from an existing topic only
by '.' versus '_' (INVALID_TOPIC_EXCEPTION: their metric names would collide), configs (INVALID_CONFIG with the
validator's message), then the layout: either manual assignments (num_partitions and replication_factor must both
be -1; partitions 0..n-1, each replica list non-empty, the same length, brokers registered and not repeated), or a
count and a replication factor (-1: num.partitions / default.replication.factor) placed on the unfenced brokers
(placement.py). A new partition's ISR is its unfenced replicas and its leader the first of them, at leader epoch 0
and partition epoch 0.

Records, in Kafka's order: the topic's ConfigRecords, its TopicRecord (a random topic id), one PartitionRecord per
partition. One user operation may write at most MAX_RECORDS_PER_USER_OP records (Kafka's guard against a single
request producing an unbounded batch); beyond that the whole request fails with POLICY_VIOLATION.
"""

from __future__ import annotations

import random
import uuid
from typing import Callable, Mapping, Sequence

from kfk.common.config_types import ConfigResourceType
from kfk.common.internal_topics import CLUSTER_METADATA_TOPIC_ID, CLUSTER_METADATA_TOPIC_NAME
from kfk.common.topic_collisions import has_collision_chars, unify_collision_chars
from kfk.common.uuids import uuid_to_base64
from kfk.config import BrokerConfig
from kfk.controller.config_control import validate_topic_configs
from kfk.controller.partition_change import replica_directories
from kfk.controller.placement import BrokerPlacement, assign_replicas_to_brokers
from kfk.controller.result import ApiError, ControllerResult
from kfk.errors import ERROR_INFO, ErrorCode, InvalidConfigurationError, InvalidTopicError, KafkaError
from kfk.metadata.image import MetadataImage, PartitionRegistration
from kfk.metadata.topic_names import is_managed_by_the_cluster, validate_topic_name
from kfk.protocol.message import Message
from kfk.protocol.messages.create_partitions import CreatePartitionsRequest, CreatePartitionsResponse
from kfk.protocol.messages.create_topics import CreateTopicsRequest, CreateTopicsResponse
from kfk.protocol.messages.delete_topics import DeleteTopicsRequest, DeleteTopicsResponse
from kfk.protocol.metadata_records import schema_class

ConfigRecord = schema_class("ConfigRecord")
TopicRecord = schema_class("TopicRecord")
PartitionRecord = schema_class("PartitionRecord")
RemoveTopicRecord = schema_class("RemoveTopicRecord")

#: QuorumController.MAX_RECORDS_PER_USER_OP.
MAX_RECORDS_PER_USER_OP = 10_000
_TOO_LARGE = ApiError(ErrorCode.POLICY_VIOLATION, "Unable to perform excessively large batch operation.")
_ZERO_UUID = uuid.UUID(int=0)

#: Entries of a created topic's configs in CreateTopics v5+: name -> (value, read_only, source, is_sensitive).
ConfigDescriber = Callable[[Mapping[str, str]], list[CreateTopicsResponse.CreatableTopicConfigs]]


class _Failed(Exception):
    def __init__(self, error: ApiError) -> None:
        super().__init__(error.message)
        self.error = error


def random_topic_id(rng: random.Random) -> uuid.UUID:
    """Kafka's Uuid.randomUuid: never the zero id nor the metadata topic's, never a base64 form starting with '-'
    (it would read as a command-line flag)."""
    while True:
        topic_id = uuid.UUID(int=rng.getrandbits(128), version=4)
        if topic_id not in (_ZERO_UUID, CLUSTER_METADATA_TOPIC_ID) and not uuid_to_base64(topic_id).startswith("-"):
            return topic_id


def live_brokers(image: MetadataImage) -> list[BrokerPlacement]:
    """The brokers new replicas may go to: registered and unfenced."""
    return [BrokerPlacement(broker.broker_id, broker.rack) for broker in image.brokers.values() if not broker.fenced]


def _is_active(image: MetadataImage, broker_id: int) -> bool:
    broker = image.brokers.get(broker_id)
    return broker is not None and not broker.fenced and not broker.in_controlled_shutdown


def new_partition(image: MetadataImage, replicas: Sequence[int]) -> PartitionRegistration:
    """A new partition: the ISR is its active replicas, the leader the first of them."""
    isr = tuple(replica for replica in replicas if _is_active(image, replica))
    return PartitionRegistration(replicas=tuple(replicas), isr=isr, leader=isr[0] if isr else -1, leader_epoch=0,
                                 partition_epoch=0, directories=replica_directories(image, replicas) or ())


def partition_record(topic_id: uuid.UUID, partition_id: int, partition: PartitionRegistration) -> Message:
    return PartitionRecord(partition_id=partition_id, topic_id=topic_id, replicas=list(partition.replicas),
                           isr=list(partition.isr), leader=partition.leader, leader_epoch=partition.leader_epoch,
                           partition_epoch=partition.partition_epoch, directories=list(partition.directories))


def _validate_manual_assignment(image: MetadataImage, partition_id: int, broker_ids: Sequence[int],
                                replication_factor: int | None) -> None:
    if not broker_ids:
        raise _Failed(ApiError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                               "The manual partition assignment includes an empty replica list."))
    seen: set[int] = set()
    for broker_id in broker_ids:
        if broker_id in seen:
            raise _Failed(ApiError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                   f"The manual partition assignment includes the broker {broker_id} more than once."))
        seen.add(broker_id)
        if broker_id not in image.brokers:
            raise _Failed(ApiError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                   f"The manual partition assignment includes broker {broker_id}, but no such broker "
                                   "is registered."))
    if replication_factor is not None and replication_factor != len(broker_ids):
        raise _Failed(ApiError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            f"The manual partition assignment includes a partition with {len(broker_ids)} replica(s), but this is "
            f"not consistent with previous partitions, which have {replication_factor} replica(s)."))
    if not any(_is_active(image, broker_id) for broker_id in broker_ids):
        raise _Failed(ApiError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                               f"All brokers specified in the manual partition assignment for partition "
                               f"{partition_id} are fenced or in controlled shutdown."))


def _topic_layout(image: MetadataImage, topic: CreateTopicsRequest.CreatableTopic, config: BrokerConfig,
                  rng: random.Random, budget: int) -> dict[int, list[int]]:
    if topic.assignments:
        if topic.replication_factor != -1:
            raise _Failed(ApiError(ErrorCode.INVALID_REQUEST, "A manual partition assignment was specified, but "
                                                              "replication factor was not set to -1."))
        if topic.num_partitions != -1:
            raise _Failed(ApiError(ErrorCode.INVALID_REQUEST, "A manual partition assignment was specified, but "
                                                              "numPartitions was not set to -1."))
        if len(topic.assignments) > budget:
            raise _Failed(_TOO_LARGE)
        layout: dict[int, list[int]] = {}
        replication_factor = None
        for assignment in topic.assignments:
            if assignment.partition_index in layout:
                raise _Failed(ApiError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                       "Found multiple manual partition assignments for partition "
                                       f"{assignment.partition_index}"))
            _validate_manual_assignment(image, assignment.partition_index, assignment.broker_ids, replication_factor)
            replication_factor = len(assignment.broker_ids)
            layout[assignment.partition_index] = list(assignment.broker_ids)
        if sorted(layout) != list(range(len(layout))):
            raise _Failed(ApiError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                   "partitions should be a consecutive 0-based integer sequence"))
        return layout
    if topic.replication_factor < -1 or topic.replication_factor == 0:
        raise _Failed(ApiError(ErrorCode.INVALID_REPLICATION_FACTOR,
                               "Replication factor must be larger than 0, or -1 to use the default value."))
    if topic.num_partitions < -1 or topic.num_partitions == 0:
        raise _Failed(ApiError(ErrorCode.INVALID_PARTITIONS,
                               "Number of partitions was set to an invalid non-positive value."))
    num_partitions = config.num_partitions if topic.num_partitions == -1 else topic.num_partitions
    replication_factor = (config.default_replication_factor if topic.replication_factor == -1
                          else topic.replication_factor)
    if num_partitions > budget:
        raise _Failed(_TOO_LARGE)
    try:
        return assign_replicas_to_brokers(live_brokers(image), num_partitions, replication_factor, rng)
    except KafkaError as error:
        raise _Failed(ApiError(error.error_code,
                               f"Unable to replicate the partition {replication_factor} time(s): {error.message}"))


def create_topics(image: MetadataImage, request: CreateTopicsRequest, config: BrokerConfig, rng: random.Random,
                  describe_configs: ConfigDescriber) -> ControllerResult[CreateTopicsResponse]:
    Result = CreateTopicsResponse.CreatableTopicResult
    counts: dict[str, int] = {}
    for topic in request.topics:
        counts[topic.name] = counts.get(topic.name, 0) + 1
    existing_unified = {unify_collision_chars(name): name for name in image.topics_by_name
                        if has_collision_chars(name)}
    results: list[Result] = []
    records: list[Message] = []
    for topic in request.topics:
        if counts[topic.name] > 1:
            continue
        try:
            if topic.name == CLUSTER_METADATA_TOPIC_NAME:
                raise _Failed(ApiError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed."))
            try:
                validate_topic_name(topic.name)
            except InvalidTopicError as error:
                raise _Failed(ApiError.from_exception(error)) from None
            if topic.name in image.topics_by_name:
                raise _Failed(ApiError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{topic.name}' already exists."))
            if has_collision_chars(topic.name):
                colliding = existing_unified.get(unify_collision_chars(topic.name))
                if colliding is not None:
                    raise _Failed(ApiError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                                           f"Topic '{topic.name}' collides with existing topic: {colliding}"))
            overrides = {entry.name: entry.value for entry in topic.configs}
            try:
                validate_topic_configs(config, overrides)
            except InvalidConfigurationError as error:
                raise _Failed(ApiError.from_exception(error)) from None
            layout = _topic_layout(image, topic, config, rng, MAX_RECORDS_PER_USER_OP - len(records) - 1)
        except _Failed as failure:
            if failure.error is _TOO_LARGE:
                return _create_topics_failed(request, _TOO_LARGE)
            results.append(Result(name=topic.name, error_code=failure.error.error_code,
                                  error_message=failure.error.message))
            continue
        topic_id = random_topic_id(rng)
        records.extend(ConfigRecord(resource_type=ConfigResourceType.TOPIC, resource_name=topic.name, name=name,
                                    value=value) for name, value in overrides.items())
        records.append(TopicRecord(name=topic.name, topic_id=topic_id))
        for partition_id in sorted(layout):
            records.append(partition_record(topic_id, partition_id, new_partition(image, layout[partition_id])))
        results.append(Result(name=topic.name, topic_id=topic_id, error_code=ErrorCode.NONE, error_message=None,
                              num_partitions=len(layout), replication_factor=len(layout[0]),
                              configs=describe_configs(overrides)))
    for name, count in counts.items():
        if count > 1:
            results.append(Result(name=name, error_code=ErrorCode.INVALID_REQUEST,
                                  error_message="Duplicate topic name."))
    return ControllerResult(CreateTopicsResponse(topics=results), [] if request.validate_only else records)


def _create_topics_failed(request: CreateTopicsRequest, error: ApiError) -> ControllerResult[CreateTopicsResponse]:
    Result = CreateTopicsResponse.CreatableTopicResult
    names = dict.fromkeys(topic.name for topic in request.topics)
    return ControllerResult(CreateTopicsResponse(topics=[
        Result(name=name, error_code=error.error_code, error_message=error.message) for name in names]))


def create_topics_error(request: CreateTopicsRequest, error: ApiError) -> CreateTopicsResponse:
    """Every topic of the request answered with one error (no active controller, ...)."""
    return _create_topics_failed(request, error).response


def delete_topics(image: MetadataImage, request: DeleteTopicsRequest, api_version: int,
                  delete_topic_enable: bool) -> ControllerResult[DeleteTopicsResponse]:
    """By name (v0-v5 topic_names, v6 topics[].name) or by id (v6 topics[].topic_id). Deletion disabled answers
    INVALID_REQUEST before v3 and TOPIC_DELETION_DISABLED since, for every topic. The internal topics (and the
    metadata log's name) are refused with INVALID_REQUEST: the cluster manages them."""
    Result = DeleteTopicsResponse.DeletableTopicResult
    if not delete_topic_enable:
        error = (ApiError(ErrorCode.INVALID_REQUEST, "Topic deletion is disabled.") if api_version < 3
                 else ApiError(ErrorCode.TOPIC_DELETION_DISABLED, "Topic deletion is disabled."))
        return ControllerResult(delete_topics_error(request, error))
    results: list[Result] = []
    names: dict[str, int] = {}
    ids: dict[uuid.UUID, int] = {}
    for name in request.topic_names:
        names[name] = names.get(name, 0) + 1
    for state in request.topics:
        if state.name is None:
            if state.topic_id == _ZERO_UUID:
                results.append(Result(name=None, topic_id=_ZERO_UUID, error_code=ErrorCode.INVALID_REQUEST,
                                      error_message="Neither topic name nor id were specified."))
            else:
                ids[state.topic_id] = ids.get(state.topic_id, 0) + 1
        elif state.topic_id == _ZERO_UUID:
            names[state.name] = names.get(state.name, 0) + 1
        else:
            results.append(Result(name=state.name, topic_id=state.topic_id, error_code=ErrorCode.INVALID_REQUEST,
                                  error_message="You may not specify both topic name and topic id."))
    to_delete: dict[uuid.UUID, str] = {}
    for topic_id, count in ids.items():
        if count > 1:
            results.append(Result(name=None, topic_id=topic_id, error_code=ErrorCode.INVALID_REQUEST,
                                  error_message="Duplicate topic id."))
        elif topic_id not in image.topics_by_id:
            results.append(Result(name=None, topic_id=topic_id, error_code=ErrorCode.UNKNOWN_TOPIC_ID,
                                  error_message=_message(ErrorCode.UNKNOWN_TOPIC_ID)))
        elif is_managed_by_the_cluster(image.topics_by_id[topic_id].name):
            results.append(Result(name=None, topic_id=topic_id, error_code=ErrorCode.INVALID_REQUEST,
                                  error_message=_internal_deletion(image.topics_by_id[topic_id].name)))
        else:
            to_delete[topic_id] = image.topics_by_id[topic_id].name
    for name, count in names.items():
        topic = image.topics_by_name.get(name)
        if count > 1:
            results.append(Result(name=name, topic_id=_ZERO_UUID, error_code=ErrorCode.INVALID_REQUEST,
                                  error_message="Duplicate topic name."))
        elif is_managed_by_the_cluster(name):
            results.append(Result(name=name, topic_id=topic.topic_id if topic else _ZERO_UUID,
                                  error_code=ErrorCode.INVALID_REQUEST, error_message=_internal_deletion(name)))
        elif topic is None:
            results.append(Result(name=name, topic_id=_ZERO_UUID, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                  error_message=_message(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)))
        elif topic.topic_id in to_delete or topic.topic_id in ids:
            to_delete.pop(topic.topic_id, None)
            results.append(Result(name=name, topic_id=topic.topic_id, error_code=ErrorCode.INVALID_REQUEST,
                                  error_message="The provided topic name maps to an ID that was already supplied."))
        else:
            to_delete[topic.topic_id] = name
    records = [RemoveTopicRecord(topic_id=topic_id) for topic_id in to_delete]
    results.extend(Result(name=name, topic_id=topic_id, error_code=ErrorCode.NONE, error_message=None)
                   for topic_id, name in to_delete.items())
    return ControllerResult(DeleteTopicsResponse(responses=results), records)


def _internal_deletion(name: str) -> str:
    return f"Topic {name} is an internal topic and cannot be deleted."


def delete_topics_error(request: DeleteTopicsRequest, error: ApiError) -> DeleteTopicsResponse:
    Result = DeleteTopicsResponse.DeletableTopicResult
    results = [Result(name=name, error_code=error.error_code, error_message=error.message)
               for name in request.topic_names]
    results.extend(Result(name=state.name, topic_id=state.topic_id, error_code=error.error_code,
                          error_message=error.message) for state in request.topics)
    return DeleteTopicsResponse(responses=results)


def create_partitions(image: MetadataImage, request: CreatePartitionsRequest,
                      rng: random.Random) -> ControllerResult[CreatePartitionsResponse]:
    """Add partitions to existing topics. New partitions get the replication factor of partition 0 and continue
    its placement (the start index is partition 0's first replica), or the assignments given, one per new
    partition. validate_only checks everything and writes nothing."""
    Result = CreatePartitionsResponse.CreatePartitionsTopicResult
    counts: dict[str, int] = {}
    for topic in request.topics:
        counts[topic.name] = counts.get(topic.name, 0) + 1
    results: list[Result] = []
    records: list[Message] = []
    for topic in request.topics:
        if counts[topic.name] > 1:
            continue
        try:
            new_records = _create_partitions(image, topic, rng, MAX_RECORDS_PER_USER_OP - len(records))
        except _Failed as failure:
            if failure.error is _TOO_LARGE:
                return ControllerResult(create_partitions_error(request, _TOO_LARGE))
            results.append(Result(name=topic.name, error_code=failure.error.error_code,
                                  error_message=failure.error.message))
            continue
        records.extend(new_records)
        results.append(Result(name=topic.name, error_code=ErrorCode.NONE, error_message=None))
    for name, count in counts.items():
        if count > 1:
            results.append(Result(name=name, error_code=ErrorCode.INVALID_REQUEST,
                                  error_message="Duplicate topic name."))
    return ControllerResult(CreatePartitionsResponse(results=results), [] if request.validate_only else records)


def _create_partitions(image: MetadataImage, request: CreatePartitionsRequest.CreatePartitionsTopic,
                       rng: random.Random, budget: int) -> list[Message]:
    if is_managed_by_the_cluster(request.name):
        raise _Failed(ApiError(ErrorCode.INVALID_REQUEST,
                               f"The number of partitions of the internal topic {request.name} cannot be changed."))
    topic = image.topic(request.name)
    if topic is None:
        raise _Failed(ApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))  # Kafka's answer carries no message
    current = len(topic.partitions)
    if request.count == current:
        raise _Failed(ApiError(ErrorCode.INVALID_PARTITIONS, f"Topic already has {current} partition(s)."))
    if request.count < current:
        raise _Failed(ApiError(ErrorCode.INVALID_PARTITIONS,
                               f"The topic {request.name} currently has {current} partition(s); {request.count} "
                               "would not be an increase."))
    additional = request.count - current
    if additional > budget:
        raise _Failed(_TOO_LARGE)
    first_replicas = topic.partitions[0].replicas
    if request.assignments is not None:
        if len(request.assignments) != additional:
            raise _Failed(ApiError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                   f"Attempted to add {additional} additional partition(s), but only "
                                   f"{len(request.assignments)} assignment(s) were specified."))
        layout = {}
        for index, assignment in enumerate(request.assignments):
            _validate_manual_assignment(image, current + index, assignment.broker_ids, len(first_replicas))
            layout[current + index] = list(assignment.broker_ids)
    else:
        brokers = sorted(live_brokers(image), key=lambda broker: broker.broker_id)
        start_index = next((i for i, broker in enumerate(brokers) if broker.broker_id >= first_replicas[0]), 0)
        try:
            layout = assign_replicas_to_brokers(brokers, additional, len(first_replicas), rng,
                                                fixed_start_index=start_index, start_partition_id=current)
        except KafkaError as error:
            raise _Failed(ApiError(error.error_code,
                                   f"Unable to replicate the partition {len(first_replicas)} time(s): "
                                   f"{error.message}")) from None
    return [partition_record(topic.topic_id, partition_id, new_partition(image, layout[partition_id]))
            for partition_id in sorted(layout)]


def create_partitions_error(request: CreatePartitionsRequest, error: ApiError) -> CreatePartitionsResponse:
    Result = CreatePartitionsResponse.CreatePartitionsTopicResult
    return CreatePartitionsResponse(results=[
        Result(name=name, error_code=error.error_code, error_message=error.message)
        for name in dict.fromkeys(topic.name for topic in request.topics)])


def _message(code: ErrorCode) -> str:
    return ERROR_INFO[code].message
