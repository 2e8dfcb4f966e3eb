"""Admin: topics, partitions, configs, the cluster, consumer groups, offsets, record deletion and transactions
(Java's Admin).

Each method is synchronous and bounded by default.api.timeout.ms (or its ``timeout_ms`` argument). Requests go where
Kafka sends them: topic and config changes to the controller the Metadata response names (in KRaft any broker
forwards them), broker configs to that broker, group calls to the group's coordinator, ListOffsets and DeleteRecords
to partition leaders, ListGroups and ListTransactions to every broker, DescribeTransactions to the transactional
ids' coordinators, DescribeProducers and an admin's WriteTxnMarkers (abort_transaction) to partition leaders.
Retriable failures (NOT_CONTROLLER, a coordinator moving, a lost connection) are retried after a metadata refresh
until the deadline.

Batch operations return one outcome per item, ``None`` for success or the KafkaError, because partial failure is
normal (creating three topics of which one exists). Lookups raise the error of what they could not find.

One exception to "retry until the deadline": when no bootstrap server has ever answered and every one refuses the
connection, the call fails at once with NetworkError. A typo in --bootstrap-server should say so in a second, not
after a minute (Java's AdminClient waits the whole timeout).
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import time
import uuid
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from kfk.client.cluster import BrokerMetadata, ClusterMetadata, TopicMetadata
from kfk.client.config import ADMIN_CONFIG_DEF, CLIENT_SOFTWARE_NAME, CLIENT_SOFTWARE_VERSION, ClientConfig
from kfk.client.event_loop import ClientLoop
from kfk.client.network_client import COORDINATOR_ID_BASE, NetworkClient, monotonic_ms
from kfk.client.offsets import (
    COORDINATOR_TYPE_TRANSACTION,
    READ_UNCOMMITTED,
    commit_offsets,
    fetch_committed,
    find_coordinator,
    find_coordinators,
    list_offsets,
)
from kfk.client.response_errors import response_error
from kfk.client.structs import (
    SHARE_PROTOCOL_TYPE,
    AbortTransactionSpec,
    AlterConfigOp,
    ClientQuotaAlteration,
    ClientQuotaFilterComponent,
    ClusterDescription,
    ConfigResource,
    ConsumerGroupDescription,
    DelegationToken,
    ElectionType,
    FeatureMetadata,
    FeatureUpdate,
    GroupListing,
    LogDirDescription,
    MemberDescription,
    NewPartitionReassignment,
    NewTopic,
    OffsetAndTimestamp,
    OpenTransaction,
    PartitionInfo,
    PartitionProducerState,
    PartitionReassignment,
    ProducerState,
    ScramCredentialInfo,
    QuorumInfo,
    QuorumReplicaState,
    ReplicaInfo,
    TopicDescription,
    TransactionDescription,
    TransactionListing,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from kfk.common.client_quotas import ClientQuotaEntity
from kfk.common.config_types import ConfigEntry, ConfigResourceType, ConfigSource, ConfigSynonym, WireConfigType
from kfk.common.constants import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, NO_NODE
from kfk.common.internal_topics import CLUSTER_METADATA_TOPIC_NAME
from kfk.common.structs import OffsetAndMetadata, TopicPartition
from kfk.errors import (
    BrokerNotAvailableError,
    ErrorCode,
    KafkaError,
    KafkaTimeoutError,
    NetworkError,
    NotControllerError,
    TransactionalIdNotFoundError,
    UnknownTopicOrPartitionError,
    error_for_code,
)
from kfk.protocol.message import Message
from kfk.protocol.messages import ApiKey
from kfk.protocol.messages.add_raft_voter import AddRaftVoterRequest
from kfk.protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from kfk.protocol.messages.update_features import UpdateFeaturesRequest, UpdateFeaturesResponse
from kfk.protocol.messages.alter_client_quotas import AlterClientQuotasRequest, AlterClientQuotasResponse
from kfk.protocol.messages.alter_partition_reassignments import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
)
from kfk.protocol.messages.alter_share_group_offsets import (AlterShareGroupOffsetsRequest,
                                                             AlterShareGroupOffsetsResponse)
from kfk.protocol.messages.alter_user_scram_credentials import (AlterUserScramCredentialsRequest,
                                                                 AlterUserScramCredentialsResponse)
from kfk.protocol.messages.create_acls import CreateAclsRequest, CreateAclsResponse
from kfk.protocol.messages.create_delegation_token import (CreateDelegationTokenRequest,
                                                            CreateDelegationTokenResponse)
from kfk.protocol.messages.create_partitions import CreatePartitionsRequest, CreatePartitionsResponse
from kfk.protocol.messages.create_topics import CreateTopicsRequest, CreateTopicsResponse
from kfk.protocol.messages.delete_acls import DeleteAclsRequest, DeleteAclsResponse
from kfk.protocol.messages.delete_groups import DeleteGroupsRequest, DeleteGroupsResponse
from kfk.protocol.messages.delete_share_group_offsets import (DeleteShareGroupOffsetsRequest,
                                                              DeleteShareGroupOffsetsResponse)
from kfk.protocol.messages.delete_records import DeleteRecordsRequest, DeleteRecordsResponse
from kfk.protocol.messages.delete_topics import DeleteTopicsRequest, DeleteTopicsResponse
from kfk.protocol.messages.describe_acls import DescribeAclsRequest, DescribeAclsResponse
from kfk.protocol.messages.describe_client_quotas import DescribeClientQuotasRequest, DescribeClientQuotasResponse
from kfk.protocol.messages.describe_cluster import DescribeClusterRequest, DescribeClusterResponse
from kfk.protocol.messages.describe_configs import DescribeConfigsRequest, DescribeConfigsResponse
from kfk.protocol.messages.describe_delegation_token import (DescribeDelegationTokenRequest,
                                                              DescribeDelegationTokenResponse)
from kfk.protocol.messages.consumer_group_describe import ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse
from kfk.protocol.messages.describe_log_dirs import DescribeLogDirsRequest, DescribeLogDirsResponse
from kfk.protocol.messages.describe_groups import DescribeGroupsRequest, DescribeGroupsResponse
from kfk.protocol.messages.describe_share_group_offsets import (DescribeShareGroupOffsetsRequest,
                                                                DescribeShareGroupOffsetsResponse)
from kfk.protocol.messages.share_group_describe import ShareGroupDescribeRequest, ShareGroupDescribeResponse
from kfk.protocol.messages.describe_producers import DescribeProducersRequest, DescribeProducersResponse
from kfk.protocol.messages.describe_quorum import DescribeQuorumRequest, DescribeQuorumResponse
from kfk.protocol.messages.remove_raft_voter import RemoveRaftVoterRequest
from kfk.protocol.messages.renew_delegation_token import RenewDelegationTokenRequest
from kfk.protocol.messages.describe_user_scram_credentials import (DescribeUserScramCredentialsRequest,
                                                                    DescribeUserScramCredentialsResponse)
from kfk.protocol.messages.describe_topic_partitions import (
    DescribeTopicPartitionsRequest,
    DescribeTopicPartitionsResponse,
)
from kfk.protocol.messages.describe_transactions import DescribeTransactionsRequest, DescribeTransactionsResponse
from kfk.protocol.messages.elect_leaders import ElectLeadersRequest, ElectLeadersResponse
from kfk.protocol.messages.expire_delegation_token import ExpireDelegationTokenRequest
from kfk.protocol.messages.incremental_alter_configs import (
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from kfk.protocol.messages.list_groups import ListGroupsRequest, ListGroupsResponse
from kfk.protocol.messages.list_partition_reassignments import (
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
)
from kfk.protocol.messages.list_transactions import ListTransactionsRequest, ListTransactionsResponse
from kfk.protocol.messages.offset_delete import OffsetDeleteRequest, OffsetDeleteResponse
from kfk.protocol.messages.unregister_broker import UnregisterBrokerRequest
from kfk.protocol.messages.write_txn_markers import WriteTxnMarkersRequest, WriteTxnMarkersResponse
from kfk.security.acl import AclBinding, AclBindingFilter
from kfk.security.principal import KafkaPrincipal
from kfk.security.sasl.scram import ScramMechanism, salted_password

__all__ = ["Admin"]

T = TypeVar("T")


class _FinalError(Exception):
    """Carries an error out of the retry loop even though its code is retriable: describing a topic that does not
    exist should say so now, not after retrying UNKNOWN_TOPIC_OR_PARTITION until the timeout."""

    def __init__(self, error: KafkaError) -> None:
        super().__init__(str(error))
        self.error = error


class Admin:
    """An admin client. ``config`` takes Kafka's property names; keyword arguments the same in snake_case."""

    def __init__(self, config: Mapping[str, Any] | None = None, **overrides: Any) -> None:
        self.config = ClientConfig(ADMIN_CONFIG_DEF, "admin", config, **overrides)
        self._timeout_ms = self.config.default_api_timeout_ms
        self._loop = ClientLoop(f"kfk-admin-client-thread | {self.config.client_id}")
        self._network = NetworkClient(self.config)
        self._closed = False

    def __enter__(self) -> Admin:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self._loop.run(self._network.close(), 5)
        finally:
            self._loop.close()

    # --- plumbing ----------------------------------------------------------------------------------------------------

    def _run(self, make: Callable[[float], Awaitable[T]], timeout_ms: float | None) -> T:
        """Run ``make(deadline)`` on the loop, retrying retriable errors until the deadline."""
        timeout_ms = self._timeout_ms if timeout_ms is None else timeout_ms
        return self._loop.run(self._retrying(make, timeout_ms), timeout_ms / 1000 + 1)

    async def _retrying(self, make: Callable[[float], Awaitable[T]], timeout_ms: float) -> T:
        deadline = monotonic_ms() + timeout_ms
        attempts = 0
        network = self._network
        while True:
            try:
                return await asyncio.wait_for(make(deadline), max(deadline - monotonic_ms(), 1) / 1000)
            except asyncio.TimeoutError:
                raise KafkaTimeoutError(f"the call did not complete within {timeout_ms:.0f} ms") from None
            except _FinalError as final:
                raise final.error from None
            except KafkaError as error:
                if not error.retriable:
                    raise
                if isinstance(error, NetworkError) and network.bootstrap_unreachable():
                    raise network.unreachable_error(error) from None
                attempts += 1
                wait = network.retry_backoff.backoff_ms(attempts)
                if monotonic_ms() + wait >= deadline:
                    raise KafkaTimeoutError(f"the call did not complete within {timeout_ms:.0f} ms: "
                                            f"{error}") from None
                network.request_metadata_update()
                await asyncio.sleep(wait / 1000)

    async def _metadata(self, topics: Collection[str] | None, deadline: float) -> ClusterMetadata:
        return await self._network.refresh_metadata(topics, timeout_ms=max(deadline - monotonic_ms(), 1),
                                                    allow_auto_topic_creation=False)

    async def _require_broker(self, node: int, deadline: float) -> None:
        """Broker configs go to that broker: it must be in the metadata (fetched now if it is not yet)."""
        if node == NO_NODE or node in self._network.cluster.brokers:
            return
        cluster = await self._metadata((), deadline)
        if node not in cluster.brokers:
            raise _FinalError(BrokerNotAvailableError(f"broker {node} is not in the cluster (brokers: "
                                                      f"{', '.join(map(str, sorted(cluster.brokers)))})"))

    async def _controller(self, deadline: float) -> int:
        cluster = await self._metadata((), deadline)
        if cluster.controller_id in cluster.brokers:
            return cluster.controller_id
        return self._network.least_loaded_node()

    async def _send_to_controller(self, request: Message, deadline: float) -> Any:
        """Send to the controller; a request-level error raises (NOT_CONTROLLER retriably, so the call goes again
        to the controller the refreshed metadata names)."""
        response = await self._network.send(await self._controller(deadline), request)
        if response.error_code != ErrorCode.NONE:
            raise response_error(response.error_code, type(request).__name__.removesuffix("Request"),
                                 getattr(response, "error_message", None))
        return response

    # --- cluster -----------------------------------------------------------------------------------------------------

    def describe_cluster(self, timeout_ms: float | None = None) -> ClusterDescription:
        async def call(deadline: float) -> ClusterDescription:
            cluster = await self._metadata((), deadline)
            node = self._network.least_loaded_node()
            connection = await self._network.connect(node)
            if connection.supports(ApiKey.DESCRIBE_CLUSTER):
                response = await self._network.send(node, DescribeClusterRequest())
                assert isinstance(response, DescribeClusterResponse)
                if response.error_code != ErrorCode.NONE:
                    raise response_error(response.error_code, "DescribeCluster", response.error_message)
                brokers = [BrokerMetadata(b.broker_id, b.host, b.port, b.rack) for b in response.brokers]
                return ClusterDescription(response.cluster_id, response.controller_id,
                                          sorted(brokers, key=lambda b: b.node_id))
            return ClusterDescription(cluster.cluster_id, cluster.controller_id,
                                      sorted(cluster.brokers.values(), key=lambda b: b.node_id))

        return self._run(call, timeout_ms)

    def describe_cluster_id(self, *, controllers: bool = False, timeout_ms: float | None = None) -> str | None:
        """The cluster id from any node, by DescribeCluster alone (no Metadata first): what a tool given
        `--bootstrap-controller` can ask a controller listener, which serves no Metadata. A controller is asked for
        CONTROLLER endpoints; a kfk node that answers MISMATCHED_ENDPOINT_TYPE (broker and controller on one
        listener) is asked again as a broker."""
        async def call(deadline: float) -> str | None:
            timeout = max(deadline - monotonic_ms(), 1)
            response = await self._network.send_to_any(
                DescribeClusterRequest(endpoint_type=2 if controllers else 1), timeout_ms=timeout)
            if response.error_code == ErrorCode.MISMATCHED_ENDPOINT_TYPE and controllers:
                response = await self._network.send_to_any(DescribeClusterRequest(endpoint_type=1),
                                                            timeout_ms=timeout)
            if response.error_code != ErrorCode.NONE:
                raise response_error(response.error_code, "DescribeCluster", response.error_message)
            return response.cluster_id

        return self._run(call, timeout_ms)

    def describe_metadata_quorum(self, timeout_ms: float | None = None) -> QuorumInfo:
        """The KRaft metadata quorum (DescribeQuorum on __cluster_metadata-0), from any node; a node that does not
        lead the quorum answers NOT_LEADER_OR_FOLLOWER, which is retried."""
        request = DescribeQuorumRequest(topics=[DescribeQuorumRequest.TopicData(
            topic_name=CLUSTER_METADATA_TOPIC_NAME,
            partitions=[DescribeQuorumRequest.PartitionData(partition_index=0)])])

        def not_leader(response: Message) -> bool:
            return bool(response.topics) and bool(response.topics[0].partitions) \
                and response.topics[0].partitions[0].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER

        async def call(deadline: float) -> QuorumInfo:
            response = await self._send_to_quorum_leader(request, not_leader)
            assert isinstance(response, DescribeQuorumResponse)
            if response.error_code != ErrorCode.NONE:
                raise response_error(response.error_code, "DescribeQuorum", response.error_message)
            partition = response.topics[0].partitions[0]
            if partition.error_code != ErrorCode.NONE:
                raise response_error(partition.error_code, "DescribeQuorum", partition.error_message)

            def replicas(states) -> list[QuorumReplicaState]:
                return [QuorumReplicaState(state.replica_id, state.replica_directory_id, state.log_end_offset,
                                           None if state.last_fetch_timestamp < 0 else state.last_fetch_timestamp,
                                           None if state.last_caught_up_timestamp < 0
                                           else state.last_caught_up_timestamp) for state in states]

            return QuorumInfo(partition.leader_id, partition.leader_epoch, partition.high_watermark,
                              replicas(partition.current_voters), replicas(partition.observers),
                              {node.node_id: [f"{listener.name}://{listener.host}:{listener.port}"
                                              for listener in node.listeners] for node in response.nodes})

        return self._run(call, timeout_ms)

    def add_raft_voter(self, voter_id: int, voter_directory_id: uuid.UUID,
                       endpoints: Sequence[tuple[str, str, int]], timeout_ms: float | None = None) -> None:
        """Add a controller to a dynamic KRaft quorum (AddRaftVoter, KIP-853): `endpoints` are its controller
        listeners (name, host, port). The leader answers once the new voter set is committed; a controller that
        has not caught up with the log yet (REQUEST_TIMED_OUT) is asked again until the timeout."""
        request = AddRaftVoterRequest(
            cluster_id=None, timeout_ms=int(timeout_ms if timeout_ms is not None else self._timeout_ms),
            voter_id=voter_id, voter_directory_id=voter_directory_id,
            listeners=[AddRaftVoterRequest.Listener(name=name, host=host, port=port) for name, host, port in endpoints])
        self._run(lambda deadline: self._voter_change(request, "AddRaftVoter", deadline), timeout_ms)

    def remove_raft_voter(self, voter_id: int, voter_directory_id: uuid.UUID, timeout_ms: float | None = None) -> None:
        """Remove a controller from a dynamic KRaft quorum (RemoveRaftVoter, KIP-853), once the leader commits it."""
        request = RemoveRaftVoterRequest(cluster_id=None, voter_id=voter_id, voter_directory_id=voter_directory_id)
        self._run(lambda deadline: self._voter_change(request, "RemoveRaftVoter", deadline), timeout_ms)

    async def _voter_change(self, request: Message, name: str, deadline: float) -> None:
        response = await self._send_to_quorum_leader(
            request, lambda answer: answer.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER)
        if response.error_code != ErrorCode.NONE:
            raise response_error(response.error_code, name, response.error_message)

    async def _send_to_quorum_leader(self, request: Message, not_leader: Callable[[Message], bool]) -> Message:
        """Send a request only the metadata quorum's leader answers: any broker does (it forwards to the active
        controller), but with --bootstrap-controller only the leading controller does, so each node is asked in
        turn until one answers as leader; else the last answer (or connection failure) is the caller's to retry."""
        answer: Message | None = None
        failure: KafkaError | None = None
        for node_id in self._network.known_nodes():
            try:
                answer = await self._network.send(node_id, request)
            except (NetworkError, KafkaTimeoutError) as error:
                failure = error
                continue
            if not not_leader(answer):
                return answer
        if answer is None:
            raise failure or NetworkError("no node to send to")
        return answer

    # --- topics ------------------------------------------------------------------------------------------------------

    def list_topics(self, include_internal: bool = False, timeout_ms: float | None = None) -> list[str]:
        async def call(deadline: float) -> list[str]:
            cluster = await self._metadata(None, deadline)
            return sorted(name for name, topic in cluster.topics.items()
                          if topic.error_code == ErrorCode.NONE and (include_internal or not topic.is_internal))

        return self._run(call, timeout_ms)

    def describe_topics(self, topics: Iterable[str] | None = None, include_internal: bool = False,
                        timeout_ms: float | None = None) -> dict[str, TopicDescription]:
        """Describe ``topics`` (None: every topic). An unknown topic raises UnknownTopicOrPartitionError."""
        wanted = None if topics is None else sorted(set(topics))

        async def call(deadline: float) -> dict[str, TopicDescription]:
            cluster = await self._metadata(wanted, deadline)
            result: dict[str, TopicDescription] = {}
            names = wanted if wanted is not None else sorted(
                name for name, topic in cluster.topics.items() if include_internal or not topic.is_internal)
            for name in names:
                topic = cluster.topic(name)
                if topic is None:
                    raise _FinalError(UnknownTopicOrPartitionError(f"topic {name!r} does not exist"))
                if topic.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                    raise _FinalError(UnknownTopicOrPartitionError(f"topic {name!r} does not exist"))
                if topic.error_code != ErrorCode.NONE:
                    raise response_error(topic.error_code, f"topic {name!r}")
                result[name] = _describe(topic)
            elr = await self._eligible_leader_replicas(names)
            return {name: dataclasses.replace(description, partitions=[
                        dataclasses.replace(p, eligible_leader_replicas=elr[name, p.partition][0],
                                            last_known_elr=elr[name, p.partition][1])
                        if (name, p.partition) in elr else p for p in description.partitions])
                    for name, description in result.items()}

        return self._run(call, timeout_ms)

    async def _eligible_leader_replicas(self, names: list[str]
                                        ) -> dict[tuple[str, int], tuple[tuple[int, ...], tuple[int, ...]]]:
        """Each partition's eligible leader replicas and last known ELR (KIP-966), which only
        DescribeTopicPartitions carries (Kafka's Admin describes topics with it too); empty when the broker
        predates it. Read a page at a time, following the response's cursor."""
        node = self._network.least_loaded_node()
        if not names or not (await self._network.connect(node)).supports(ApiKey.DESCRIBE_TOPIC_PARTITIONS):
            return {}
        result: dict[tuple[str, int], tuple[tuple[int, ...], tuple[int, ...]]] = {}
        cursor = None
        while True:
            response = await self._network.send(node, DescribeTopicPartitionsRequest(
                topics=[DescribeTopicPartitionsRequest.TopicRequest(name=name) for name in names], cursor=cursor))
            assert isinstance(response, DescribeTopicPartitionsResponse)
            for topic in response.topics:
                for p in topic.partitions:
                    if topic.error_code == ErrorCode.NONE and p.eligible_leader_replicas is not None:
                        result[topic.name, p.partition_index] = (tuple(p.eligible_leader_replicas),
                                                                 tuple(p.last_known_elr or ()))
            if response.next_cursor is None:
                return result
            cursor = DescribeTopicPartitionsRequest.Cursor(topic_name=response.next_cursor.topic_name,
                                                           partition_index=response.next_cursor.partition_index)

    def create_topics(self, new_topics: Iterable[NewTopic], *, validate_only: bool = False,
                      timeout_ms: float | None = None) -> dict[str, KafkaError | None]:
        new_topics = list(new_topics)

        async def call(deadline: float) -> dict[str, KafkaError | None]:
            controller = await self._controller(deadline)
            version = await self._network.api_version(controller, ApiKey.CREATE_TOPICS)
            topics = []
            for topic in new_topics:
                partitions, replication = topic.num_partitions, topic.replication_factor
                if version < 4 and not topic.replica_assignments and (partitions < 0 or replication < 0):
                    raise KafkaError("the broker's CreateTopics (v<4) needs explicit partitions and replication")
                topics.append(CreateTopicsRequest.CreatableTopic(
                    name=topic.name,
                    num_partitions=-1 if topic.replica_assignments else partitions,
                    replication_factor=-1 if topic.replica_assignments else replication,
                    assignments=[CreateTopicsRequest.CreatableReplicaAssignment(partition_index=index,
                                                                                broker_ids=list(brokers))
                                 for index, brokers in sorted(topic.replica_assignments.items())],
                    configs=[CreateTopicsRequest.CreatableTopicConfig(name=key, value=str(value))
                             for key, value in topic.configs.items()]))
            request = CreateTopicsRequest(topics=topics, timeout_ms=int(max(deadline - monotonic_ms(), 0)),
                                          validate_only=validate_only)
            response = await self._network.send(controller, request, version=version)
            assert isinstance(response, CreateTopicsResponse)
            results = {result.name: _topic_error(result.error_code, result.error_message, result.name)
                       for result in response.topics}
            _raise_if_not_controller(results.values())
            return results

        return self._run(call, timeout_ms)

    def delete_topics(self, topics: Iterable[str], timeout_ms: float | None = None) -> dict[str, KafkaError | None]:
        names = list(topics)

        async def call(deadline: float) -> dict[str, KafkaError | None]:
            controller = await self._controller(deadline)
            version = await self._network.api_version(controller, ApiKey.DELETE_TOPICS)
            budget = int(max(deadline - monotonic_ms(), 0))
            if version >= 6:
                request = DeleteTopicsRequest(topics=[DeleteTopicsRequest.DeleteTopicState(name=name)
                                                      for name in names], timeout_ms=budget)
            else:
                request = DeleteTopicsRequest(topic_names=names, timeout_ms=budget)
            response = await self._network.send(controller, request, version=version)
            assert isinstance(response, DeleteTopicsResponse)
            results = {result.name: _topic_error(result.error_code, result.error_message, result.name)
                       for result in response.responses}
            _raise_if_not_controller(results.values())
            return results

        return self._run(call, timeout_ms)

    def create_partitions(self, new_totals: Mapping[str, int], *, validate_only: bool = False,
                          timeout_ms: float | None = None) -> dict[str, KafkaError | None]:
        """Grow topics to ``new_totals[topic]`` partitions."""

        async def call(deadline: float) -> dict[str, KafkaError | None]:
            controller = await self._controller(deadline)
            request = CreatePartitionsRequest(
                topics=[CreatePartitionsRequest.CreatePartitionsTopic(name=name, count=count, assignments=None)
                        for name, count in new_totals.items()],
                timeout_ms=int(max(deadline - monotonic_ms(), 0)), validate_only=validate_only)
            response = await self._network.send(controller, request)
            assert isinstance(response, CreatePartitionsResponse)
            results = {result.name: _topic_error(result.error_code, result.error_message, result.name)
                       for result in response.results}
            _raise_if_not_controller(results.values())
            return results

        return self._run(call, timeout_ms)

    # --- configs -----------------------------------------------------------------------------------------------------

    def describe_configs(self, resources: Iterable[ConfigResource], *, include_synonyms: bool = False,
                         include_documentation: bool = False, timeout_ms: float | None = None
                         ) -> dict[ConfigResource, dict[str, ConfigEntry]]:
        resources = list(resources)

        async def call(deadline: float) -> dict[ConfigResource, dict[str, ConfigEntry]]:
            groups = self._by_target_node(resources)
            result: dict[ConfigResource, dict[str, ConfigEntry]] = {}
            for node, items in groups.items():
                await self._require_broker(node, deadline)
                request = DescribeConfigsRequest(
                    resources=[DescribeConfigsRequest.DescribeConfigsResource(
                        resource_type=resource.type, resource_name=resource.name, configuration_keys=None)
                        for resource in items],
                    include_synonyms=include_synonyms, include_documentation=include_documentation)
                target = node if node != NO_NODE else self._network.least_loaded_node()
                response = await self._network.send(target, request)
                assert isinstance(response, DescribeConfigsResponse)
                for entry in response.results:
                    resource = ConfigResource(ConfigResourceType(entry.resource_type), entry.resource_name)
                    if entry.error_code != ErrorCode.NONE:
                        raise response_error(entry.error_code, f"{resource.type.name.lower()} {resource.name!r}",
                                             entry.error_message)
                    result[resource] = {config.name: _config_entry(config) for config in entry.configs}
            return result

        return self._run(call, timeout_ms)

    def incremental_alter_configs(self, changes: Mapping[ConfigResource, Iterable[AlterConfigOp]], *,
                                  validate_only: bool = False, timeout_ms: float | None = None
                                  ) -> dict[ConfigResource, KafkaError | None]:
        changes = {resource: list(ops) for resource, ops in changes.items()}

        async def call(deadline: float) -> dict[ConfigResource, KafkaError | None]:
            result: dict[ConfigResource, KafkaError | None] = {}
            # Every change goes to the controller, which applies it (Kafka's brokers forward there too; kfk's
            # brokers in ZooKeeper mode answer NOT_CONTROLLER instead of writing their own configs).
            for node, items in self._by_target_node(list(changes)).items():
                await self._require_broker(node, deadline)
                target = await self._controller(deadline)
                request = IncrementalAlterConfigsRequest(
                    resources=[IncrementalAlterConfigsRequest.AlterConfigsResource(
                        resource_type=resource.type, resource_name=resource.name,
                        configs=[IncrementalAlterConfigsRequest.AlterableConfig(
                            name=op.name, config_operation=op.op, value=op.value) for op in changes[resource]])
                        for resource in items],
                    validate_only=validate_only)
                response = await self._network.send(target, request)
                assert isinstance(response, IncrementalAlterConfigsResponse)
                for entry in response.responses:
                    resource = ConfigResource(ConfigResourceType(entry.resource_type), entry.resource_name)
                    result[resource] = (None if entry.error_code == ErrorCode.NONE else response_error(
                        entry.error_code, f"{resource.type.name.lower()} {resource.name!r}", entry.error_message))
            _raise_if_not_controller(result.values())
            return result

        return self._run(call, timeout_ms)

    # --- client quotas ------------------------------------------------------------------------------------------------

    def describe_client_quotas(self, components: Iterable[ClientQuotaFilterComponent] = (), *, strict: bool = False,
                               timeout_ms: float | None = None) -> dict[ClientQuotaEntity, dict[str, float]]:
        """The quotas of the entities the filter matches (no components: every entity), from any broker."""
        request = DescribeClientQuotasRequest(components=[
            DescribeClientQuotasRequest.ComponentData(entity_type=c.entity_type, match_type=c.match_type,
                                                      match=c.match) for c in components], strict=strict)

        async def call(deadline: float) -> dict[ClientQuotaEntity, dict[str, float]]:
            response = await self._network.send(self._network.least_loaded_node(), request)
            assert isinstance(response, DescribeClientQuotasResponse)
            if response.error_code != ErrorCode.NONE:
                raise _FinalError(response_error(response.error_code, "describe client quotas",
                                                 response.error_message))
            return {ClientQuotaEntity.of((part.entity_type, part.entity_name) for part in entry.entity):
                    {value.key: value.value for value in entry.values} for entry in response.entries or ()}

        return self._run(call, timeout_ms)

    def alter_client_quotas(self, alterations: Iterable[ClientQuotaAlteration], *, validate_only: bool = False,
                            timeout_ms: float | None = None) -> dict[ClientQuotaEntity, KafkaError | None]:
        """Set or remove quota keys of entities, through the controller; one outcome per entity."""
        request = AlterClientQuotasRequest(entries=[AlterClientQuotasRequest.EntryData(
            entity=[AlterClientQuotasRequest.EntityData(entity_type=kind, entity_name=name)
                    for kind, name in alteration.entity.parts],
            ops=[AlterClientQuotasRequest.OpData(key=key, value=0.0 if value is None else value,
                                                 remove=value is None) for key, value in alteration.ops.items()])
            for alteration in alterations], validate_only=validate_only)

        async def call(deadline: float) -> dict[ClientQuotaEntity, KafkaError | None]:
            response = await self._network.send(await self._controller(deadline), request)
            assert isinstance(response, AlterClientQuotasResponse)
            result: dict[ClientQuotaEntity, KafkaError | None] = {}
            for entry in response.entries:
                entity = ClientQuotaEntity.of((part.entity_type, part.entity_name) for part in entry.entity)
                result[entity] = None if entry.error_code == ErrorCode.NONE else response_error(
                    entry.error_code, f"client quotas of {entity}", entry.error_message)
            _raise_if_not_controller(result.values())
            return result

        return self._run(call, timeout_ms)

    @staticmethod
    def _by_target_node(resources: Iterable[ConfigResource]) -> dict[int, list[ConfigResource]]:
        """Broker (and broker logger) resources go to that broker; the rest to any broker (NO_NODE)."""
        groups: dict[int, list[ConfigResource]] = {}
        for resource in resources:
            node = NO_NODE
            if resource.type in (ConfigResourceType.BROKER, ConfigResourceType.BROKER_LOGGER) and resource.name:
                try:
                    node = int(resource.name)
                except ValueError:
                    raise KafkaError(f"broker config names are broker ids, not {resource.name!r}") from None
            groups.setdefault(node, []).append(resource)
        return groups

    # --- partitions: reassignments and leader elections ---------------------------------------------------------------

    def alter_partition_reassignments(
            self, reassignments: Mapping[TopicPartition, NewPartitionReassignment | None], *,
            timeout_ms: float | None = None) -> dict[TopicPartition, KafkaError | None]:
        """Start moving each partition to its target replicas (None: cancel the reassignment in progress); per
        partition None once the controller accepted it, or the error. The move itself completes later (see
        list_partition_reassignments)."""
        by_topic = _by_topic(reassignments)

        async def call(deadline: float) -> dict[TopicPartition, KafkaError | None]:
            request = AlterPartitionReassignmentsRequest(
                timeout_ms=int(max(deadline - monotonic_ms(), 0)),
                topics=[AlterPartitionReassignmentsRequest.ReassignableTopic(name=topic, partitions=[
                    AlterPartitionReassignmentsRequest.ReassignablePartition(
                        partition_index=tp.partition,
                        replicas=None if target is None else list(target.target_replicas))
                    for tp, target in entries]) for topic, entries in by_topic.items()])
            response = await self._send_to_controller(request, deadline)
            assert isinstance(response, AlterPartitionReassignmentsResponse)
            return {TopicPartition(topic.name, p.partition_index): _partition_error(
                        p.error_code, TopicPartition(topic.name, p.partition_index), p.error_message)
                    for topic in response.responses for p in topic.partitions}

        return self._run(call, timeout_ms)

    def list_partition_reassignments(self, partitions: Iterable[TopicPartition] | None = None, *,
                                     timeout_ms: float | None = None) -> dict[TopicPartition, PartitionReassignment]:
        """The reassignments in progress, of ``partitions`` (None: of every partition)."""
        by_topic = None if partitions is None else _by_topic(dict.fromkeys(partitions))

        async def call(deadline: float) -> dict[TopicPartition, PartitionReassignment]:
            request = ListPartitionReassignmentsRequest(
                timeout_ms=int(max(deadline - monotonic_ms(), 0)),
                topics=None if by_topic is None else [
                    ListPartitionReassignmentsRequest.ListPartitionReassignmentsTopics(
                        name=topic, partition_indexes=[tp.partition for tp, _ in entries])
                    for topic, entries in by_topic.items()])
            response = await self._send_to_controller(request, deadline)
            assert isinstance(response, ListPartitionReassignmentsResponse)
            return {TopicPartition(topic.name, p.partition_index): PartitionReassignment(
                        list(p.replicas), list(p.adding_replicas), list(p.removing_replicas))
                    for topic in response.topics for p in topic.partitions}

        return self._run(call, timeout_ms)

    def elect_leaders(self, election_type: ElectionType, partitions: Iterable[TopicPartition] | None = None, *,
                      timeout_ms: float | None = None) -> dict[TopicPartition, KafkaError | None]:
        """Elect the preferred replica (or, unclean, any live replica) leader of ``partitions`` (None: of every
        partition); per partition None if elected, else the error (ElectionNotNeededError: the right leader
        already leads)."""
        by_topic = None if partitions is None else _by_topic(dict.fromkeys(partitions))

        async def call(deadline: float) -> dict[TopicPartition, KafkaError | None]:
            request = ElectLeadersRequest(
                election_type=election_type, timeout_ms=int(max(deadline - monotonic_ms(), 0)),
                topic_partitions=None if by_topic is None else [
                    ElectLeadersRequest.TopicPartitions(topic=topic, partitions=[tp.partition for tp, _ in entries])
                    for topic, entries in by_topic.items()])
            response = await self._send_to_controller(request, deadline)
            assert isinstance(response, ElectLeadersResponse)
            return {TopicPartition(result.topic, p.partition_id): _partition_error(
                        p.error_code, TopicPartition(result.topic, p.partition_id), p.error_message)
                    for result in response.replica_election_results for p in result.partition_result}

        return self._run(call, timeout_ms)

    # --- records and offsets -----------------------------------------------------------------------------------------

    def list_offsets(self, specs: Mapping[TopicPartition, int], *, isolation_level: int = READ_UNCOMMITTED,
                     timeout_ms: float | None = None) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """Offsets by timestamp, or the EARLIEST_TIMESTAMP / LATEST_TIMESTAMP / MAX_TIMESTAMP sentinels."""

        async def call(deadline: float) -> dict[TopicPartition, OffsetAndTimestamp | None]:
            return await list_offsets(self._network, specs, isolation_level=isolation_level,
                                      timeout_ms=max(deadline - monotonic_ms(), 1))

        return self._run(call, timeout_ms)

    def beginning_offsets(self, partitions: Iterable[TopicPartition], timeout_ms: float | None = None
                          ) -> dict[TopicPartition, int]:
        found = self.list_offsets(dict.fromkeys(partitions, EARLIEST_TIMESTAMP), timeout_ms=timeout_ms)
        return {tp: value.offset if value is not None else 0 for tp, value in found.items()}

    def end_offsets(self, partitions: Iterable[TopicPartition], timeout_ms: float | None = None
                    ) -> dict[TopicPartition, int]:
        found = self.list_offsets(dict.fromkeys(partitions, LATEST_TIMESTAMP), timeout_ms=timeout_ms)
        return {tp: value.offset if value is not None else 0 for tp, value in found.items()}

    def delete_records(self, before_offsets: Mapping[TopicPartition, int], timeout_ms: float | None = None
                       ) -> dict[TopicPartition, int | KafkaError]:
        """Move each partition's log start offset up to the given offset (-1: the high watermark); per partition
        the new low watermark or the error."""

        async def call(deadline: float) -> dict[TopicPartition, int | KafkaError]:
            cluster = await self._metadata({tp.topic for tp in before_offsets}, deadline)
            by_leader: dict[int, dict[TopicPartition, int]] = {}
            result: dict[TopicPartition, int | KafkaError] = {}
            for tp, offset in before_offsets.items():
                leader = cluster.leader_for(tp)
                if leader == NO_NODE:
                    result[tp] = UnknownTopicOrPartitionError(f"{tp}: no such partition, or it has no leader")
                    continue
                by_leader.setdefault(leader, {})[tp] = offset
            for leader, partitions in by_leader.items():
                topics: dict[str, list] = {}
                for tp, offset in partitions.items():
                    topics.setdefault(tp.topic, []).append(
                        DeleteRecordsRequest.DeleteRecordsPartition(partition_index=tp.partition, offset=offset))
                request = DeleteRecordsRequest(
                    topics=[DeleteRecordsRequest.DeleteRecordsTopic(name=name, partitions=parts)
                            for name, parts in topics.items()],
                    timeout_ms=int(max(deadline - monotonic_ms(), 0)))
                response = await self._network.send(leader, request)
                assert isinstance(response, DeleteRecordsResponse)
                for topic in response.topics:
                    for partition in topic.partitions:
                        tp = TopicPartition(topic.name, partition.partition_index)
                        result[tp] = (partition.low_watermark if partition.error_code == ErrorCode.NONE
                                      else response_error(partition.error_code, f"DeleteRecords for {tp}"))
            return result

        return self._run(call, timeout_ms)

    # --- ACLs --------------------------------------------------------------------------------------------------------

    async def _any_broker(self, deadline: float) -> int:
        """ACL requests go to any broker (one that is not the controller forwards Create/DeleteAcls)."""
        await self._metadata((), deadline)
        return self._network.least_loaded_node()

    def create_acls(self, bindings: Iterable[AclBinding], timeout_ms: float | None = None
                    ) -> dict[AclBinding, KafkaError | None]:
        """Create ACLs (creating one that exists succeeds)."""
        wanted = list(dict.fromkeys(bindings))

        async def call(deadline: float) -> dict[AclBinding, KafkaError | None]:
            request = CreateAclsRequest(creations=[CreateAclsRequest.AclCreation(
                resource_type=b.pattern.resource_type, resource_name=b.pattern.name,
                resource_pattern_type=b.pattern.pattern_type, principal=b.entry.principal, host=b.entry.host,
                operation=b.entry.operation, permission_type=b.entry.permission_type) for b in wanted])
            response = await self._network.send(await self._any_broker(deadline), request)
            assert isinstance(response, CreateAclsResponse)
            results = {binding: None if result.error_code == ErrorCode.NONE else
                       response_error(result.error_code, "CreateAcls", result.error_message)
                       for binding, result in zip(wanted, response.results)}
            _raise_if_not_controller(results.values())
            return results

        return self._run(call, timeout_ms)

    def describe_acls(self, acl_filter: AclBindingFilter = AclBindingFilter(), timeout_ms: float | None = None
                      ) -> list[AclBinding]:
        """The ACLs the filter matches (every ACL by default)."""

        async def call(deadline: float) -> list[AclBinding]:
            request = DescribeAclsRequest(
                resource_type_filter=acl_filter.resource_type, resource_name_filter=acl_filter.name,
                pattern_type_filter=acl_filter.pattern_type, principal_filter=acl_filter.principal,
                host_filter=acl_filter.host, operation=acl_filter.operation,
                permission_type=acl_filter.permission_type)
            response = await self._network.send(await self._any_broker(deadline), request)
            assert isinstance(response, DescribeAclsResponse)
            if response.error_code != ErrorCode.NONE:
                raise _FinalError(response_error(response.error_code, "DescribeAcls", response.error_message))
            return [AclBinding.of(resource.resource_type, resource.resource_name, resource.pattern_type,
                                  acl.principal, acl.host, acl.operation, acl.permission_type)
                    for resource in response.resources for acl in resource.acls]

        return self._run(call, timeout_ms)

    def delete_acls(self, filters: Iterable[AclBindingFilter], timeout_ms: float | None = None
                    ) -> dict[AclBindingFilter, list[AclBinding] | KafkaError]:
        """Delete every ACL each filter matches; per filter, the ACLs deleted (or the error)."""
        wanted = list(dict.fromkeys(filters))

        async def call(deadline: float) -> dict[AclBindingFilter, list[AclBinding] | KafkaError]:
            request = DeleteAclsRequest(filters=[DeleteAclsRequest.DeleteAclsFilter(
                resource_type_filter=f.resource_type, resource_name_filter=f.name, pattern_type_filter=f.pattern_type,
                principal_filter=f.principal, host_filter=f.host, operation=f.operation,
                permission_type=f.permission_type) for f in wanted])
            response = await self._network.send(await self._any_broker(deadline), request)
            assert isinstance(response, DeleteAclsResponse)
            results: dict[AclBindingFilter, list[AclBinding] | KafkaError] = {}
            for acl_filter, result in zip(wanted, response.filter_results):
                if result.error_code != ErrorCode.NONE:
                    results[acl_filter] = response_error(result.error_code, "DeleteAcls", result.error_message)
                    continue
                results[acl_filter] = [AclBinding.of(acl.resource_type, acl.resource_name, acl.pattern_type,
                                                     acl.principal, acl.host, acl.operation, acl.permission_type)
                                       for acl in result.matching_acls]
            _raise_if_not_controller(value for value in results.values() if isinstance(value, KafkaError))
            return results

        return self._run(call, timeout_ms)

    # --- consumer groups ---------------------------------------------------------------------------------------------

    def list_consumer_groups(self, timeout_ms: float | None = None) -> list[GroupListing]:
        """Groups of every broker (each coordinator lists its own)."""

        async def call(deadline: float) -> list[GroupListing]:
            cluster = await self._metadata((), deadline)
            responses = await asyncio.gather(*(self._network.send(node, ListGroupsRequest())
                                               for node in sorted(cluster.brokers)))
            groups: dict[str, GroupListing] = {}
            for response in responses:
                assert isinstance(response, ListGroupsResponse)
                if response.error_code != ErrorCode.NONE:
                    raise response_error(response.error_code, "ListGroups")
                for group in response.groups:
                    groups[group.group_id] = GroupListing(group.group_id, group.protocol_type, group.group_state,
                                                          group.group_type)
            return sorted(groups.values())

        return self._run(call, timeout_ms)

    def describe_consumer_groups(self, group_ids: Iterable[str], timeout_ms: float | None = None
                                 ) -> dict[str, ConsumerGroupDescription]:
        """As Java's Admin: ConsumerGroupDescribe for consumer-protocol groups (KIP-848), DescribeGroups for the
        others (classic groups answer GROUP_ID_NOT_FOUND to the former, and brokers before 4.0 do not have it)."""
        group_ids = list(group_ids)

        async def call(deadline: float) -> dict[str, ConsumerGroupDescription]:
            result: dict[str, ConsumerGroupDescription] = {}
            for group_id in group_ids:
                coordinator = await find_coordinator(self._network, group_id,
                                                     timeout_ms=max(deadline - monotonic_ms(), 1))
                described = await self._describe_consumer_protocol_group(coordinator, group_id)
                result[group_id] = described or await self._describe_classic_group(coordinator, group_id)
            return result

        return self._run(call, timeout_ms)

    async def _describe_consumer_protocol_group(self, coordinator: int, group_id: str
                                                ) -> ConsumerGroupDescription | None:
        """The group as ConsumerGroupDescribe tells it; None when it is not a consumer-protocol group (or the
        broker does not know the API)."""
        if not (await self._network.connect(coordinator)).supports(ApiKey.CONSUMER_GROUP_DESCRIBE):
            return None
        response = await self._network.send(coordinator, ConsumerGroupDescribeRequest(group_ids=[group_id]))
        assert isinstance(response, ConsumerGroupDescribeResponse)
        group = response.groups[0]
        if group.error_code == ErrorCode.GROUP_ID_NOT_FOUND:
            return None
        if group.error_code != ErrorCode.NONE:
            raise response_error(group.error_code, f"group {group_id!r}", group.error_message)
        def partitions(assignment: ConsumerGroupDescribeResponse.Assignment) -> list[TopicPartition]:
            return sorted(TopicPartition(topic.topic_name, partition) for topic in assignment.topic_partitions
                          for partition in topic.partitions)

        # MemberType (v1+): 0 a classic member, 1 a consumer-protocol member, -1 unknown (Java's upgraded()).
        members = [MemberDescription(member.member_id, member.instance_id, member.client_id, member.client_host,
                                     partitions(member.assignment), member.member_epoch,
                                     partitions(member.target_assignment),
                                     None if member.member_type == -1 else member.member_type == 1)
                   for member in group.members]
        return ConsumerGroupDescription(group.group_id, group.group_state, "consumer", group.assignor_name, members,
                                        COORDINATOR_ID_BASE - coordinator, group.group_epoch, group.assignment_epoch)

    async def _describe_classic_group(self, coordinator: int, group_id: str) -> ConsumerGroupDescription:
        from kfk.client.consumer.assignors import decode_assignment

        response = await self._network.send(coordinator, DescribeGroupsRequest(groups=[group_id]))
        assert isinstance(response, DescribeGroupsResponse)
        group = response.groups[0]
        if group.error_code != ErrorCode.NONE:
            raise response_error(group.error_code, f"group {group.group_id!r}")
        members = []
        for member in group.members:
            assignment = (decode_assignment(member.member_assignment)
                          if group.protocol_type == "consumer" and member.member_assignment else [])
            members.append(MemberDescription(member.member_id, member.group_instance_id,
                                             member.client_id, member.client_host, assignment))
        return ConsumerGroupDescription(group.group_id, group.group_state, group.protocol_type, group.protocol_data,
                                        members, COORDINATOR_ID_BASE - coordinator)

    # --- share groups (KIP-932) --------------------------------------------------------------------------------------

    def describe_share_groups(self, group_ids: Iterable[str], timeout_ms: float | None = None
                              ) -> dict[str, ConsumerGroupDescription]:
        """ShareGroupDescribe of each group at its coordinator (protocol type "share"); GroupIdNotFoundError for a
        group that is not a share group."""
        group_ids = list(group_ids)

        async def call(deadline: float) -> dict[str, ConsumerGroupDescription]:
            result: dict[str, ConsumerGroupDescription] = {}
            for group_id in group_ids:
                coordinator = await find_coordinator(self._network, group_id,
                                                     timeout_ms=max(deadline - monotonic_ms(), 1))
                response = await self._network.send(coordinator, ShareGroupDescribeRequest(group_ids=[group_id]))
                assert isinstance(response, ShareGroupDescribeResponse)
                group = response.groups[0]
                if group.error_code != ErrorCode.NONE:
                    raise response_error(group.error_code, f"group {group_id!r}", group.error_message)
                members = [MemberDescription(member.member_id, None, member.client_id, member.client_host,
                                             sorted(TopicPartition(topic.topic_name, partition)
                                                    for topic in member.assignment.topic_partitions
                                                    for partition in topic.partitions))
                           for member in group.members]
                result[group_id] = ConsumerGroupDescription(group.group_id, group.group_state, SHARE_PROTOCOL_TYPE,
                                                            group.assignor_name, members,
                                                            COORDINATOR_ID_BASE - coordinator)
            return result

        return self._run(call, timeout_ms)

    def list_share_group_offsets(self, group_id: str, partitions: Iterable[TopicPartition] | None = None,
                                 timeout_ms: float | None = None) -> dict[TopicPartition, tuple[int, int, int]]:
        """DescribeShareGroupOffsets of `partitions` (as Kafka's ListShareGroupOffsetsSpec names them), or of every
        partition the group has state for: (share-partition start offset, leader epoch, lag) per partition, -1
        where unknown."""
        Request = DescribeShareGroupOffsetsRequest
        topics = None if partitions is None else [
            Request.DescribeShareGroupOffsetsRequestTopic(topic_name=topic, partitions=[tp.partition for tp, _ in tps])
            for topic, tps in _by_topic(dict.fromkeys(partitions)).items()]

        async def call(deadline: float) -> dict[TopicPartition, tuple[int, int, int]]:
            coordinator = await find_coordinator(self._network, group_id, timeout_ms=max(deadline - monotonic_ms(), 1))
            response = await self._network.send(coordinator, Request(
                groups=[Request.DescribeShareGroupOffsetsRequestGroup(group_id=group_id, topics=topics)]))
            assert isinstance(response, DescribeShareGroupOffsetsResponse)
            group = response.groups[0]
            if group.error_code != ErrorCode.NONE:
                raise response_error(group.error_code, f"group {group_id!r}", group.error_message)
            return {TopicPartition(topic.topic_name, partition.partition_index):
                    (partition.start_offset, partition.leader_epoch, partition.lag)
                    for topic in group.topics for partition in topic.partitions
                    if partition.error_code == ErrorCode.NONE}

        return self._run(call, timeout_ms)

    def alter_share_group_offsets(self, group_id: str, start_offsets: Mapping[TopicPartition, int],
                                  timeout_ms: float | None = None) -> dict[TopicPartition, KafkaError | None]:
        """Set an empty share group's share-partition start offsets (AlterShareGroupOffsets; the group is created
        if missing): the outcome per partition. An error for the whole group (NON_EMPTY_GROUP...) is raised, with
        the broker's message."""
        by_topic = _by_topic(start_offsets)

        async def call(deadline: float) -> dict[TopicPartition, KafkaError | None]:
            coordinator = await find_coordinator(self._network, group_id, timeout_ms=max(deadline - monotonic_ms(), 1))
            Request = AlterShareGroupOffsetsRequest
            response = await self._network.send(coordinator, Request(group_id=group_id, topics=[
                Request.AlterShareGroupOffsetsRequestTopic(topic_name=topic, partitions=[
                    Request.AlterShareGroupOffsetsRequestPartition(partition_index=tp.partition, start_offset=offset)
                    for tp, offset in entries]) for topic, entries in by_topic.items()]))
            assert isinstance(response, AlterShareGroupOffsetsResponse)
            if response.error_code != ErrorCode.NONE:
                raise error_for_code(response.error_code)(response.error_message or None)
            return {TopicPartition(topic.topic_name, partition.partition_index):
                    None if partition.error_code == ErrorCode.NONE
                    else error_for_code(partition.error_code)(partition.error_message or None)
                    for topic in response.responses for partition in topic.partitions}

        return self._run(call, timeout_ms)

    def delete_share_group_offsets(self, group_id: str, topics: Iterable[str], timeout_ms: float | None = None
                                   ) -> dict[str, KafkaError | None]:
        """Forget an empty share group's state of whole topics (DeleteShareGroupOffsets): the outcome per topic. An
        error for the whole group (GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP...) is raised, with the broker's message."""
        names = list(dict.fromkeys(topics))

        async def call(deadline: float) -> dict[str, KafkaError | None]:
            coordinator = await find_coordinator(self._network, group_id, timeout_ms=max(deadline - monotonic_ms(), 1))
            response = await self._network.send(coordinator, DeleteShareGroupOffsetsRequest(group_id=group_id, topics=[
                DeleteShareGroupOffsetsRequest.DeleteShareGroupOffsetsRequestTopic(topic_name=name) for name in names]))
            assert isinstance(response, DeleteShareGroupOffsetsResponse)
            if response.error_code != ErrorCode.NONE:
                raise error_for_code(response.error_code)(response.error_message or None)
            return {topic.topic_name: None if topic.error_code == ErrorCode.NONE
                    else error_for_code(topic.error_code)(topic.error_message or None)
                    for topic in response.responses}

        return self._run(call, timeout_ms)

    def list_consumer_group_offsets(self, group_id: str, partitions: Iterable[TopicPartition] | None = None,
                                    timeout_ms: float | None = None) -> dict[TopicPartition, OffsetAndMetadata]:
        """The group's committed offsets (only partitions that have one)."""
        wanted = None if partitions is None else list(partitions)

        async def call(deadline: float) -> dict[TopicPartition, OffsetAndMetadata]:
            coordinator = await find_coordinator(self._network, group_id,
                                                 timeout_ms=max(deadline - monotonic_ms(), 1))
            committed = await fetch_committed(self._network, coordinator, group_id, wanted, require_stable=False)
            return {tp: offset for tp, offset in committed.items() if offset is not None}

        return self._run(call, timeout_ms)

    def alter_consumer_group_offsets(self, group_id: str, offsets: Mapping[TopicPartition, OffsetAndMetadata],
                                     timeout_ms: float | None = None) -> dict[TopicPartition, KafkaError | None]:
        """Commit offsets for a group as an outside tool (the group must have no active members)."""

        async def call(deadline: float) -> dict[TopicPartition, KafkaError | None]:
            coordinator = await find_coordinator(self._network, group_id,
                                                 timeout_ms=max(deadline - monotonic_ms(), 1))
            return await commit_offsets(self._network, coordinator, group_id, offsets)

        return self._run(call, timeout_ms)

    def delete_consumer_group_offsets(self, group_id: str, partitions: Iterable[TopicPartition],
                                      timeout_ms: float | None = None) -> dict[TopicPartition, KafkaError | None]:
        """Delete a group's committed offsets of ``partitions`` (OffsetDelete): the outcome per partition; an error
        for the whole group (GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP...) is raised. A partition the group still
        subscribes to is refused with GROUP_SUBSCRIBED_TO_TOPIC, as Kafka's coordinator does."""
        by_topic = _by_topic(dict.fromkeys(partitions))

        async def call(deadline: float) -> dict[TopicPartition, KafkaError | None]:
            coordinator = await find_coordinator(self._network, group_id,
                                                 timeout_ms=max(deadline - monotonic_ms(), 1))
            request = OffsetDeleteRequest(group_id=group_id, topics=[
                OffsetDeleteRequest.OffsetDeleteRequestTopic(name=topic, partitions=[
                    OffsetDeleteRequest.OffsetDeleteRequestPartition(partition_index=tp.partition)
                    for tp, _ in entries])
                for topic, entries in by_topic.items()])
            response = await self._network.send(coordinator, request)
            assert isinstance(response, OffsetDeleteResponse)
            if response.error_code != ErrorCode.NONE:
                raise response_error(response.error_code, f"group {group_id!r}")
            return {TopicPartition(topic.name, p.partition_index):
                    _partition_error(p.error_code, TopicPartition(topic.name, p.partition_index), None)
                    for topic in response.topics for p in topic.partitions}

        return self._run(call, timeout_ms)

    def delete_consumer_groups(self, group_ids: Iterable[str], timeout_ms: float | None = None
                               ) -> dict[str, KafkaError | None]:
        group_ids = list(group_ids)

        async def call(deadline: float) -> dict[str, KafkaError | None]:
            result: dict[str, KafkaError | None] = {}
            for group_id in group_ids:
                coordinator = await find_coordinator(self._network, group_id,
                                                     timeout_ms=max(deadline - monotonic_ms(), 1))
                response = await self._network.send(coordinator, DeleteGroupsRequest(groups_names=[group_id]))
                assert isinstance(response, DeleteGroupsResponse)
                for entry in response.results:
                    result[entry.group_id] = (None if entry.error_code == ErrorCode.NONE
                                              else response_error(entry.error_code, f"group {entry.group_id!r}"))
            return result

        return self._run(call, timeout_ms)

    # --- transactions ------------------------------------------------------------------------------------------------

    def list_transactions(self, state_filters: Iterable[str] = (), producer_id_filters: Iterable[int] = (),
                          duration_filter_ms: int = -1, timeout_ms: float | None = None) -> list[TransactionListing]:
        """The transactional ids of every broker's transaction coordinator, optionally only those in the given
        states (Kafka's names: Ongoing, PrepareCommit...), of the given producer ids, or whose transaction has run
        longer than ``duration_filter_ms`` (ListTransactions v1+, KIP-994)."""
        states, producer_ids = list(state_filters), list(producer_id_filters)

        async def call(deadline: float) -> list[TransactionListing]:
            cluster = await self._metadata((), deadline)
            nodes = sorted(cluster.brokers)
            request = ListTransactionsRequest(state_filters=states, producer_id_filters=producer_ids,
                                              duration_filter=duration_filter_ms)
            responses = await asyncio.gather(*(self._network.send(node, request) for node in nodes))
            listings: list[TransactionListing] = []
            for node, response in zip(nodes, responses):
                assert isinstance(response, ListTransactionsResponse)
                if response.error_code != ErrorCode.NONE:
                    raise response_error(response.error_code, f"ListTransactions on broker {node}")
                listings.extend(TransactionListing(state.transactional_id, state.producer_id,
                                                   state.transaction_state, node)
                                for state in response.transaction_states)
            return sorted(listings)

        return self._run(call, timeout_ms)

    def describe_transactions(self, transactional_ids: Iterable[str], timeout_ms: float | None = None
                              ) -> dict[str, TransactionDescription | KafkaError]:
        """Each transactional id's state at its coordinator (one batched FindCoordinator, then DescribeTransactions
        to each coordinator); per id the description or the error (TransactionalIdNotFoundError: no such id)."""
        ids = list(dict.fromkeys(transactional_ids))

        async def call(deadline: float) -> dict[str, TransactionDescription | KafkaError]:
            await self._metadata((), deadline)  # an unreachable cluster fails now, not at the deadline
            located = await find_coordinators(self._network, ids, timeout_ms=max(deadline - monotonic_ms(), 1),
                                              key_type=COORDINATOR_TYPE_TRANSACTION)
            result: dict[str, TransactionDescription | KafkaError] = {
                key: error for key, error in located.items() if isinstance(error, KafkaError)}
            by_coordinator: dict[int, list[str]] = {}
            for key, connection_id in located.items():
                if not isinstance(connection_id, KafkaError):
                    by_coordinator.setdefault(connection_id, []).append(key)
            for connection_id, keys in by_coordinator.items():
                response = await self._network.send(connection_id, DescribeTransactionsRequest(transactional_ids=keys))
                assert isinstance(response, DescribeTransactionsResponse)
                for state in response.transaction_states:
                    if state.error_code != ErrorCode.NONE:
                        error = response_error(state.error_code, f"transactional id {state.transactional_id!r}")
                        if error.retriable:  # the coordinator moved or is loading: look it up again
                            raise error
                        result[state.transactional_id] = error
                        continue
                    result[state.transactional_id] = TransactionDescription(
                        COORDINATOR_ID_BASE - connection_id, state.transaction_state, state.producer_id,
                        state.producer_epoch, state.transaction_timeout_ms,
                        None if state.transaction_start_time_ms < 0 else state.transaction_start_time_ms,
                        frozenset(TopicPartition(topic.topic, partition)
                                  for topic in state.topics for partition in topic.partitions))
            return result

        return self._run(call, timeout_ms)

    def describe_user_scram_credentials(self, users: Iterable[str] | None = None, timeout_ms: float | None = None
                                        ) -> dict[str, list[ScramCredentialInfo] | KafkaError]:
        """Each user's SCRAM mechanisms and iterations (every user that has one when `users` is None); per user the
        credentials or the error (ResourceNotFoundError: the user has none)."""
        wanted = None if users is None else list(users)

        async def call(deadline: float) -> dict[str, list[ScramCredentialInfo] | KafkaError]:
            await self._metadata((), deadline)
            response = await self._network.send(self._network.least_loaded_node(), DescribeUserScramCredentialsRequest(
                users=None if wanted is None else [DescribeUserScramCredentialsRequest.UserName(name=name)
                                                   for name in wanted]))
            assert isinstance(response, DescribeUserScramCredentialsResponse)
            if response.error_code != ErrorCode.NONE:
                raise response_error(response.error_code, "DescribeUserScramCredentials", response.error_message)
            return {result.user: (response_error(result.error_code, f"user {result.user!r}", result.error_message)
                                  if result.error_code != ErrorCode.NONE else
                                  [ScramCredentialInfo(ScramMechanism(info.mechanism).mechanism_name, info.iterations)
                                   for info in result.credential_infos])
                    for result in response.results}

        return self._run(call, timeout_ms)

    def alter_user_scram_credentials(
            self, alterations: Iterable[UserScramCredentialUpsertion | UserScramCredentialDeletion],
            timeout_ms: float | None = None) -> dict[str, KafkaError | None]:
        """Set or delete SCRAM credentials through the controller; per user None or the error. A password is salted
        here (PBKDF2 with the mechanism's hash): the broker only sees the salted form."""
        Deletion = AlterUserScramCredentialsRequest.ScramCredentialDeletion
        Upsertion = AlterUserScramCredentialsRequest.ScramCredentialUpsertion
        deletions, upsertions = [], []
        for alteration in alterations:
            mechanism = ScramMechanism.from_mechanism_name(alteration.mechanism)
            if isinstance(alteration, UserScramCredentialDeletion):
                deletions.append(Deletion(name=alteration.user, mechanism=mechanism))
                continue
            salt = alteration.salt if alteration.salt is not None else os.urandom(32)
            salted = (salted_password(mechanism, alteration.password.encode(), salt, alteration.iterations)
                      if mechanism != ScramMechanism.UNKNOWN and alteration.iterations > 0 else b"")
            upsertions.append(Upsertion(name=alteration.user, mechanism=mechanism, iterations=alteration.iterations,
                                        salt=salt, salted_password=salted))
        request = AlterUserScramCredentialsRequest(deletions=deletions, upsertions=upsertions)

        async def call(deadline: float) -> dict[str, KafkaError | None]:
            response = await self._network.send(await self._controller(deadline), request)
            assert isinstance(response, AlterUserScramCredentialsResponse)
            result: dict[str, KafkaError | None] = {}
            for entry in response.results:
                error = (response_error(entry.error_code, f"user {entry.user!r}", entry.error_message)
                         if entry.error_code != ErrorCode.NONE else None)
                if error is not None and error.retriable:  # NOT_CONTROLLER: find the controller again
                    raise error
                result[entry.user] = error
            return result

        return self._run(call, timeout_ms)

    def unregister_broker(self, broker_id: int, timeout_ms: float | None = None) -> None:
        """Drop the registration of a broker that is gone for good (KRaft: any broker forwards it to the active
        controller). BrokerIdNotRegisteredError: no such broker; UnsupportedVersionError: the cluster has no such
        request (ZooKeeper mode)."""
        async def call(deadline: float) -> None:
            await self._metadata((), deadline)
            response = await self._network.send(self._network.least_loaded_node(),
                                                UnregisterBrokerRequest(broker_id=broker_id))
            if response.error_code != ErrorCode.NONE:
                raise response_error(response.error_code, f"UnregisterBroker of broker {broker_id}",
                                     response.error_message)

        return self._run(call, timeout_ms)

    # -- feature versions (KIP-584) ---------------------------------------------------------------------------------

    def describe_features(self, timeout_ms: float | None = None) -> FeatureMetadata:
        """The cluster's finalized feature levels and the levels one node supports, from its ApiVersions answer (as
        Java's describeFeatures: there is no other request for them); a broker or a controller."""
        async def call(deadline: float) -> FeatureMetadata:
            request = ApiVersionsRequest(client_software_name=CLIENT_SOFTWARE_NAME,
                                         client_software_version=CLIENT_SOFTWARE_VERSION)
            response: ApiVersionsResponse = await self._network.send_to_any(
                request, timeout_ms=max(deadline - monotonic_ms(), 1))
            if response.error_code != ErrorCode.NONE:
                raise response_error(response.error_code, "ApiVersions")
            return FeatureMetadata(
                finalized_features={feature.name: feature.max_version_level for feature in response.finalized_features},
                finalized_features_epoch=None if response.finalized_features_epoch < 0
                else response.finalized_features_epoch,
                supported_features={feature.name: (feature.min_version, feature.max_version)
                                    for feature in response.supported_features})

        return self._run(call, timeout_ms)

    def update_features(self, updates: Mapping[str, FeatureUpdate], *, validate_only: bool = False,
                        timeout_ms: float | None = None) -> dict[str, KafkaError | None]:
        """Set finalized feature levels (UpdateFeatures, decided by the active controller; any KRaft broker forwards
        it). The controller decides the request as a whole: every feature gets the same outcome, None or the
        error, whose message is the controller's own (InvalidUpdateVersionError: "Invalid update version ...")."""
        timeout = self._timeout_ms if timeout_ms is None else timeout_ms
        Key = UpdateFeaturesRequest.FeatureUpdateKey
        request = UpdateFeaturesRequest(timeout_ms=int(timeout), validate_only=validate_only, feature_updates=[
            Key(feature=name, max_version_level=update.max_version_level, upgrade_type=int(update.upgrade_type))
            for name, update in updates.items()])

        def not_controller(response: Message) -> bool:
            return response.error_code == ErrorCode.NOT_CONTROLLER

        async def call(deadline: float) -> dict[str, KafkaError | None]:
            # Any KRaft broker forwards it; through controllers (bootstrap.servers naming controller listeners)
            # the active one answers; in ZooKeeper mode only the controller the Metadata names does.
            response: UpdateFeaturesResponse = await self._send_to_quorum_leader(request, not_controller)
            if not_controller(response):
                response = await self._network.send(await self._controller(deadline), request)
            error = None if response.error_code == ErrorCode.NONE else \
                error_for_code(response.error_code)(response.error_message or None)
            if error is not None and error.retriable:
                raise error
            outcomes: dict[str, KafkaError | None] = {name: error for name in updates}
            for result in response.results:
                if result.feature in outcomes and error is None and result.error_code != ErrorCode.NONE:
                    outcomes[result.feature] = error_for_code(result.error_code)(result.error_message or None)
            return outcomes

        return self._run(call, timeout_ms)

    # -- delegation tokens (KIP-48) ---------------------------------------------------------------------------------

    def create_delegation_token(self, *, renewers: Iterable[KafkaPrincipal] = (), owner: KafkaPrincipal | None = None,
                                max_lifetime_ms: int = -1, timeout_ms: float | None = None) -> DelegationToken:
        """A new token owned by this client's principal (or `owner`, which needs CREATE_TOKENS on that user), that
        `renewers` may renew too; `max_lifetime_ms` -1: the broker's delegation.token.max.lifetime.ms."""
        Renewer = CreateDelegationTokenRequest.CreatableRenewers
        request = CreateDelegationTokenRequest(
            owner_principal_type=None if owner is None else owner.principal_type,
            owner_principal_name=None if owner is None else owner.name,
            renewers=[Renewer(principal_type=r.principal_type, principal_name=r.name) for r in renewers],
            max_lifetime_ms=max_lifetime_ms)

        async def call(deadline: float) -> DelegationToken:
            await self._metadata((), deadline)
            response = await self._network.send(self._network.least_loaded_node(), request)
            assert isinstance(response, CreateDelegationTokenResponse)
            if response.error_code != ErrorCode.NONE:
                raise response_error(response.error_code, "CreateDelegationToken")
            return DelegationToken(
                response.token_id, bytes(response.hmac),
                KafkaPrincipal(response.principal_type, response.principal_name),
                KafkaPrincipal(response.token_requester_principal_type or response.principal_type,
                               response.token_requester_principal_name or response.principal_name),
                tuple(renewers), response.issue_timestamp_ms, response.expiry_timestamp_ms,
                response.max_timestamp_ms)

        return self._run(call, timeout_ms)

    def renew_delegation_token(self, hmac: bytes, *, renew_time_period_ms: int = -1,
                               timeout_ms: float | None = None) -> int:
        """Renew the token with this HMAC; its new expiry time (epoch ms). -1: the broker's
        delegation.token.expiry.time.ms."""
        request = RenewDelegationTokenRequest(hmac=hmac, renew_period_ms=renew_time_period_ms)
        return self._token_expiry(request, "RenewDelegationToken", timeout_ms)

    def expire_delegation_token(self, hmac: bytes, *, expiry_time_period_ms: int = -1,
                                timeout_ms: float | None = None) -> int:
        """Expire the token with this HMAC that many ms from now (negative: at once, and the token is gone); its
        new expiry time."""
        request = ExpireDelegationTokenRequest(hmac=hmac, expiry_time_period_ms=expiry_time_period_ms)
        return self._token_expiry(request, "ExpireDelegationToken", timeout_ms)

    def _token_expiry(self, request: RenewDelegationTokenRequest | ExpireDelegationTokenRequest, what: str,
                      timeout_ms: float | None) -> int:
        async def call(deadline: float) -> int:
            await self._metadata((), deadline)
            response = await self._network.send(self._network.least_loaded_node(), request)
            if response.error_code != ErrorCode.NONE:
                raise response_error(response.error_code, what)
            return response.expiry_timestamp_ms

        return self._run(call, timeout_ms)

    def describe_delegation_token(self, owners: Iterable[KafkaPrincipal] | None = None,
                                  timeout_ms: float | None = None) -> list[DelegationToken]:
        """The tokens this client may see (owned, requested or renewable by it, or allowed by ACLs), of `owners`
        only when given."""
        Owner = DescribeDelegationTokenRequest.DescribeDelegationTokenOwner
        request = DescribeDelegationTokenRequest(owners=None if owners is None else [
            Owner(principal_type=owner.principal_type, principal_name=owner.name) for owner in owners])

        async def call(deadline: float) -> list[DelegationToken]:
            await self._metadata((), deadline)
            response = await self._network.send(self._network.least_loaded_node(), request)
            assert isinstance(response, DescribeDelegationTokenResponse)
            if response.error_code != ErrorCode.NONE:
                raise response_error(response.error_code, "DescribeDelegationToken")
            return [DelegationToken(
                token.token_id, bytes(token.hmac), KafkaPrincipal(token.principal_type, token.principal_name),
                KafkaPrincipal(token.token_requester_principal_type or token.principal_type,
                               token.token_requester_principal_name or token.principal_name),
                tuple(KafkaPrincipal(r.principal_type, r.principal_name) for r in token.renewers),
                token.issue_timestamp, token.expiry_timestamp, token.max_timestamp) for token in response.tokens]

        return self._run(call, timeout_ms)

    def describe_producers(self, partitions: Iterable[TopicPartition], *, broker_id: int | None = None,
                           timeout_ms: float | None = None
                           ) -> dict[TopicPartition, PartitionProducerState | KafkaError]:
        """The producers each partition's leader (or, with ``broker_id``, that replica) remembers, with their open
        transactions; per partition the state or the error."""
        wanted = list(dict.fromkeys(partitions))

        async def call(deadline: float) -> dict[TopicPartition, PartitionProducerState | KafkaError]:
            cluster = await self._metadata({tp.topic for tp in wanted}, deadline)
            if broker_id is not None:
                await self._require_broker(broker_id, deadline)
            result: dict[TopicPartition, PartitionProducerState | KafkaError] = {}
            by_node: dict[int, dict[TopicPartition, None]] = {}
            for tp in wanted:
                node = broker_id if broker_id is not None else cluster.leader_for(tp)
                if node == NO_NODE:
                    result[tp] = UnknownTopicOrPartitionError(f"{tp}: no such partition, or it has no leader")
                    continue
                by_node.setdefault(node, {})[tp] = None
            for node, entries in by_node.items():
                request = DescribeProducersRequest(topics=[
                    DescribeProducersRequest.TopicRequest(name=topic, partition_indexes=[tp.partition
                                                                                         for tp, _ in items])
                    for topic, items in _by_topic(entries).items()])
                response = await self._network.send(node, request)
                assert isinstance(response, DescribeProducersResponse)
                for topic in response.topics:
                    for partition in topic.partitions:
                        tp = TopicPartition(topic.name, partition.partition_index)
                        if partition.error_code != ErrorCode.NONE:
                            error = response_error(partition.error_code, f"DescribeProducers for {tp}",
                                                   partition.error_message)
                            if error.retriable and broker_id is None:  # the leader moved: ask the new one
                                raise error
                            result[tp] = error
                            continue
                        result[tp] = PartitionProducerState([
                            ProducerState(p.producer_id, p.producer_epoch, p.last_sequence, p.last_timestamp,
                                          None if p.coordinator_epoch < 0 else p.coordinator_epoch,
                                          None if p.current_txn_start_offset < 0 else p.current_txn_start_offset)
                            for p in partition.active_producers])
            return result

        return self._run(call, timeout_ms)

    def describe_log_dirs(self, broker_ids: Iterable[int], timeout_ms: float | None = None
                          ) -> dict[int, dict[str, LogDirDescription] | KafkaError]:
        """Every log directory of each broker with the replicas in it and their sizes (kafka-log-dirs.sh
        --describe); per broker its directories by path, or the error that broker answered with."""
        wanted = list(dict.fromkeys(broker_ids))

        async def call(deadline: float) -> dict[int, dict[str, LogDirDescription] | KafkaError]:
            result: dict[int, dict[str, LogDirDescription] | KafkaError] = {}
            for node in wanted:
                await self._require_broker(node, deadline)
                response = await self._network.send(node, DescribeLogDirsRequest(topics=None))
                assert isinstance(response, DescribeLogDirsResponse)
                if response.error_code != ErrorCode.NONE:
                    result[node] = response_error(response.error_code, f"DescribeLogDirs of broker {node}")
                    continue
                result[node] = {
                    entry.log_dir: LogDirDescription(
                        None if entry.error_code == ErrorCode.NONE else response_error(
                            entry.error_code, f"log directory {entry.log_dir} of broker {node}"),
                        {TopicPartition(topic.name, partition.partition_index): ReplicaInfo(
                            partition.partition_size, partition.offset_lag, partition.is_future_key)
                         for topic in entry.topics for partition in topic.partitions},
                        None if entry.total_bytes < 0 else entry.total_bytes,
                        None if entry.usable_bytes < 0 else entry.usable_bytes)
                    for entry in response.results}
            return result

        return self._run(call, timeout_ms)

    def abort_transaction(self, spec: AbortTransactionSpec, timeout_ms: float | None = None) -> None:
        """Write an ABORT marker for ``spec``'s producer on its partition, as the coordinator would (WriteTxnMarkers
        to the partition's leader): the repair for a hanging transaction that no coordinator will ever end."""
        tp = spec.topic_partition

        async def call(deadline: float) -> None:
            cluster = await self._metadata({tp.topic}, deadline)
            leader = cluster.leader_for(tp)
            if leader == NO_NODE:
                raise UnknownTopicOrPartitionError(f"{tp}: no such partition, or it has no leader")
            request = WriteTxnMarkersRequest(markers=[WriteTxnMarkersRequest.WritableTxnMarker(
                producer_id=spec.producer_id, producer_epoch=spec.producer_epoch, transaction_result=False,
                coordinator_epoch=spec.coordinator_epoch,
                topics=[WriteTxnMarkersRequest.WritableTxnMarkerTopic(name=tp.topic,
                                                                      partition_indexes=[tp.partition])])])
            response = await self._network.send(leader, request)
            assert isinstance(response, WriteTxnMarkersResponse)
            for marker in response.markers:
                for topic in marker.topics:
                    for partition in topic.partitions:
                        if partition.error_code != ErrorCode.NONE:
                            raise response_error(partition.error_code, f"aborting the transaction of producer "
                                                 f"{spec.producer_id} on {tp}")

        return self._run(call, timeout_ms)

    def find_hanging_transactions(self, *, broker_id: int | None = None, topic: str | None = None,
                                  partition: int | None = None, max_transaction_timeout_ms: int = 15 * 60_000,
                                  now_ms: int | None = None) -> list[OpenTransaction]:
        """Transactions open on partitions that their coordinator will never end (kafka-transactions.sh
        find-hanging): open longer than ``max_transaction_timeout_ms`` (the longest timeout any producer may have,
        so a live transaction would have been aborted by now) and either of a producer id no coordinator lists, or
        of a transactional id whose current transaction does not include the partition. The search covers
        ``topic`` (one ``partition`` of it), or every partition with a replica on ``broker_id`` (whose own producer
        state is then read)."""
        if topic is None and broker_id is None:
            raise ValueError("finding hanging transactions needs a topic or a broker id to limit the search")
        if partition is not None and topic is None:
            raise ValueError("a partition needs its topic")
        if topic is not None and partition is not None:
            partitions = [TopicPartition(topic, partition)]
        else:
            descriptions = self.describe_topics([topic] if topic is not None else None)
            partitions = [TopicPartition(name, info.partition) for name, description in sorted(descriptions.items())
                          for info in description.partitions if broker_id is None or broker_id in info.replicas]
        now_ms = int(time.time() * 1000) if now_ms is None else now_ms
        candidates: list[OpenTransaction] = []
        for tp, state in sorted(self.describe_producers(partitions, broker_id=broker_id).items()):
            if isinstance(state, KafkaError):
                raise state
            candidates.extend(OpenTransaction(tp, producer) for producer in state.active_producers
                              if producer.current_transaction_start_offset is not None
                              and now_ms - producer.last_timestamp > max_transaction_timeout_ms)
        if not candidates:
            return []
        transactional_ids = {listing.producer_id: listing.transactional_id for listing in self.list_transactions(
            producer_id_filters={open_txn.producer_state.producer_id for open_txn in candidates})}
        descriptions_by_id = self.describe_transactions(transactional_ids.values()) if transactional_ids else {}
        hanging = []
        for open_txn in candidates:
            transactional_id = transactional_ids.get(open_txn.producer_state.producer_id)
            description = descriptions_by_id.get(transactional_id) if transactional_id is not None else None
            if isinstance(description, KafkaError) and not isinstance(description, TransactionalIdNotFoundError):
                raise description
            # The coordinator still owns a partition of its current (or completing) transaction: it will write the
            # marker. Anything else open is hanging.
            if not isinstance(description, TransactionDescription) or \
                    open_txn.topic_partition not in description.topic_partitions:
                hanging.append(open_txn)
        return hanging


def _describe(topic: TopicMetadata) -> TopicDescription:
    partitions = [PartitionInfo(p.partition, p.leader, p.leader_epoch, p.replicas, p.in_sync_replicas,
                                p.offline_replicas) for _, p in sorted(topic.partitions.items())]
    return TopicDescription(topic.name, topic.topic_id, topic.is_internal, partitions)


def _topic_error(code: int, message: str | None, name: str) -> KafkaError | None:
    return None if code == ErrorCode.NONE else response_error(code, f"topic {name!r}", message)


def _partition_error(code: int, tp: TopicPartition, message: str | None) -> KafkaError | None:
    return None if code == ErrorCode.NONE else response_error(code, str(tp), message)


def _by_topic(items: Mapping[TopicPartition, T]) -> dict[str, list[tuple[TopicPartition, T]]]:
    """Requests list partitions under their topic, in a stable order."""
    grouped: dict[str, list[tuple[TopicPartition, T]]] = {}
    for tp, value in sorted(items.items()):
        grouped.setdefault(tp.topic, []).append((tp, value))
    return grouped


def _raise_if_not_controller(outcomes: Iterable[KafkaError | None]) -> None:
    """NOT_CONTROLLER on any item: the whole call goes again to the new controller (it is retriable)."""
    for outcome in outcomes:
        if isinstance(outcome, NotControllerError):
            raise outcome


def _config_entry(config: DescribeConfigsResponse.DescribeConfigsResourceResult) -> ConfigEntry:
    source = _config_source(config.config_source)
    if source == ConfigSource.UNKNOWN and config.is_default:
        source = ConfigSource.DEFAULT_CONFIG  # v0 has only is_default
    return ConfigEntry(
        config.name, config.value, source, config.read_only, config.is_sensitive,
        _config_type(config.config_type), config.documentation,
        tuple(ConfigSynonym(synonym.name, synonym.value, _config_source(synonym.source))
              for synonym in config.synonyms))


def _config_source(value: int) -> ConfigSource:
    try:
        return ConfigSource(value)
    except ValueError:
        return ConfigSource.UNKNOWN


def _config_type(value: int) -> WireConfigType:
    try:
        return WireConfigType(value)
    except ValueError:
        return WireConfigType.UNKNOWN
