"""QuorumController: the active controller's shell around the pure control logic (Kafka's QuorumController).

Every write follows one path: under one lock, compute a ControllerResult from the controller's own image, append
its records through the MetadataBackend with the controller epoch this node won, and answer only after the append
returned, i.e. after the records are committed and every listener (this controller and the broker's MetadataCache)
has applied them. The lock makes writes linearizable: two CreateTopics for one name cannot both pass the "exists?"
check. The controller keeps its own image (it is a backend listener itself) so a controller-only node needs no
broker cache.

Works over any MetadataBackend (embedded Raft log, ZooKeeper). A node that did not win the controller election
answers NOT_CONTROLLER (clients send controller requests to the controller the Metadata response names).

Partition leadership (`manage_leadership`, on for backends that know broker liveness, i.e. ZooKeeper, whose
registrations vanish with a broker's session): after every committed change the active controller brings the
partitions in line with the live brokers (partition_change.handle_broker_changes: dead replicas leave the ISR,
leaderless partitions get the first live ISR member), moves leadership back to preferred leaders every
leader.imbalance.check.interval.seconds when auto.leader.rebalance.enable is set, and serves ElectLeaders and
ControlledShutdown. The embedded single-node quorum has no liveness to act on (its only broker is this node), so it
leaves leadership to registration and unfencing as before.

Broker liveness in KRaft (`broker_heartbeats`, on for the embedded quorum): brokers register with
BrokerRegistration and send BrokerHeartbeat every broker.heartbeat.interval.ms; the BrokerHeartbeatManager decides
when a fenced broker has caught up (unfenced), and the active controller fences every broker whose heartbeats stopped
for broker.session.timeout.ms (with `manage_leadership`, its partitions fail over in the same write). A broker's
controlled shutdown goes through its heartbeats too (want_shut_down: leaderships moved off, then should_shut_down).
"""

from __future__ import annotations

import asyncio
import logging
import random
import uuid
from typing import Awaitable, Callable, Mapping, Sequence, TypeVar

from kfk.common.clock import Clock, system_time_ms
from kfk.common.config_types import ConfigResourceType
from kfk.config import BrokerConfig
from kfk.controller import (
    acl_control,
    client_quota_control,
    cluster_control,
    config_control,
    delegation_token_control,
    feature_control,
    partition_change,
    reassignment,
    replication_control,
    scram_control,
)
from kfk.controller.auto_topic_creation import creatable_topic
from kfk.controller.backend import MetadataBackend
from kfk.controller.bootstrap_metadata import records_for_empty_log
from kfk.controller.broker_heartbeat_manager import BrokerControlState, BrokerHeartbeatManager
from kfk.controller.config_describer import describe_topic_configs
from kfk.common.features import METADATA_VERSION_FEATURE_NAME
from kfk.controller.features import DELEGATION_TOKENS_LEVEL, SCRAM_LEVEL
from kfk.controller.features import supported_features as kfk_supported_features
from kfk.controller.producer_ids import ProducerIdsBlock, generate_next_producer_ids
from kfk.controller.result import ApiError, ControllerResult
from kfk.errors import (
    ERROR_INFO,
    BrokerIdNotRegisteredError,
    ErrorCode,
    InvalidUpdateVersionError,
    KafkaError,
    NotControllerError,
    StaleBrokerEpochError,
)
from kfk.metadata.image import Endpoint, MetadataImage
from kfk.protocol.message import Message
from kfk.protocol.messages.alter_client_quotas import AlterClientQuotasRequest, AlterClientQuotasResponse
from kfk.protocol.messages.alter_configs import AlterConfigsRequest, AlterConfigsResponse
from kfk.protocol.messages.alter_user_scram_credentials import (AlterUserScramCredentialsRequest,
                                                                 AlterUserScramCredentialsResponse)
from kfk.protocol.messages.allocate_producer_ids import AllocateProducerIdsRequest, AllocateProducerIdsResponse
from kfk.protocol.messages.alter_partition import AlterPartitionRequest, AlterPartitionResponse
from kfk.protocol.messages.broker_heartbeat import BrokerHeartbeatRequest, BrokerHeartbeatResponse
from kfk.protocol.messages.broker_registration import BrokerRegistrationRequest, BrokerRegistrationResponse
from kfk.protocol.messages.alter_partition_reassignments import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
)
from kfk.protocol.messages.create_delegation_token import (CreateDelegationTokenRequest,
                                                            CreateDelegationTokenResponse)
from kfk.protocol.messages.expire_delegation_token import (ExpireDelegationTokenRequest,
                                                            ExpireDelegationTokenResponse)
from kfk.protocol.messages.renew_delegation_token import RenewDelegationTokenRequest, RenewDelegationTokenResponse
from kfk.protocol.messages.create_acls import CreateAclsRequest, CreateAclsResponse
from kfk.protocol.messages.delete_acls import DeleteAclsRequest, DeleteAclsResponse
from kfk.protocol.messages.create_partitions import CreatePartitionsRequest, CreatePartitionsResponse
from kfk.protocol.messages.create_topics import CreateTopicsRequest, CreateTopicsResponse
from kfk.protocol.messages.delete_topics import DeleteTopicsRequest, DeleteTopicsResponse
from kfk.protocol.messages.elect_leaders import ElectLeadersRequest, ElectLeadersResponse
from kfk.protocol.messages.incremental_alter_configs import (
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from kfk.protocol.messages.update_features import UpdateFeaturesRequest, UpdateFeaturesResponse
from kfk.protocol.messages.list_partition_reassignments import (
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
)
from kfk.protocol.metadata_records import schema_class
from kfk.security.principal import KafkaPrincipal

log = logging.getLogger("kfk.controller")

UnregisterBrokerRecord = schema_class("UnregisterBrokerRecord")
T = TypeVar("T")
_NOT_CONTROLLER = ApiError(ErrorCode.NOT_CONTROLLER, "This node is not the active controller.")


class QuorumController:
    def __init__(self, backend: MetadataBackend, config: BrokerConfig, node_id: int,
                 rng: random.Random | None = None, manage_leadership: bool = False, broker_heartbeats: bool = False,
                 time_ms: Clock = system_time_ms, bootstrap_records: Sequence[Message] | None = None) -> None:
        self.backend = backend
        #: The metadata log dir's bootstrap.checkpoint records (None: none), written when this controller first
        #: leads an empty log (controller/bootstrap_metadata.py).
        self.bootstrap_records = bootstrap_records
        self.time_ms = time_ms
        #: KRaft liveness: None in ZooKeeper mode, where a broker's session is ZooKeeper's.
        self.heartbeats = BrokerHeartbeatManager(config.broker_session_timeout_ms) if broker_heartbeats else None
        self._fencer: asyncio.Task | None = None
        self.config = config
        self.node_id = node_id
        self.rng = rng or random.Random()
        self.image = MetadataImage(cluster_id=backend.cluster_id)
        self.controller_epoch: int | None = None
        self.manage_leadership = manage_leadership
        #: Brokers in controlled shutdown, by the broker epoch they asked with (a new registration ends it).
        self.shutting_down: dict[int, int] = {}
        self._lock = asyncio.Lock()
        self._reconciler: asyncio.Task | None = None
        self._reconcile_again = False
        self._rebalancer: asyncio.Task | None = None
        self._token_sweeper: asyncio.Task | None = None
        self.delegation_tokens = delegation_token_control.DelegationTokenSettings(
            config.delegation_token_secret_key, config.delegation_token_max_lifetime_ms,
            config.delegation_token_expiry_time_ms)
        #: The metadata quorum's finalized kraft.version (1: dynamic voters); the embedded backend sets it.
        self.kraft_version: Callable[[], int] = lambda: 0
        #: Whether the metadata lives in a KRaft quorum (metadata.version is a feature only there).
        self.kraft = broker_heartbeats
        #: Sends a CreateTopics to the active controller when this node is not it (set by the broker).
        self.forward_create_topics: Callable[[CreateTopicsRequest], Awaitable[CreateTopicsResponse]] | None = None

    # -- MetadataListener --------------------------------------------------------------------------------------------

    def handle_commit(self, records: Sequence[Message], last_offset: int) -> None:
        previous, self.image = self.image, self.image.apply(records, last_offset)
        if self.is_active and self.manage_leadership and self._may_unsettle(previous, records):
            self._schedule_reconcile()

    def handle_snapshot(self, image: MetadataImage) -> None:
        self.image = image  # a whole new image (a snapshot fetched from the leader): anything may have changed
        if self.is_active and self.manage_leadership:
            self._schedule_reconcile()

    def _may_unsettle(self, previous: MetadataImage, records: Sequence[Message]) -> bool:
        """Whether a committed batch may have left a partition out of line with the live brokers (what _reconcile
        fixes): a change of brokers, a config (unclean.leader.election.enable), or a partition record whose partition
        is not settled (leader or an ISR member not live, a reassignment under way). A batch of new partitions on
        live brokers cannot, and rescanning every partition after each one is what kept a controller creating
        thousands of them from answering heartbeats in time."""
        image = self.image
        if image.brokers is not previous.brokers:
            return True
        live: set[int] | None = None
        for record in records:
            if record.NAME == "ConfigRecord":
                return True
            if record.NAME in ("PartitionRecord", "PartitionChangeRecord"):
                topic = image.topics_by_id.get(record.topic_id)
                registration = topic.partitions.get(record.partition_id) if topic is not None else None
                if registration is None:
                    continue
                live = self._live_brokers(image) if live is None else live
                if registration.leader not in live or not live.issuperset(registration.isr) \
                        or registration.adding_replicas or registration.removing_replicas:
                    return True
        return False

    # -- activation --------------------------------------------------------------------------------------------------

    @property
    def is_active(self) -> bool:
        return self.controller_epoch is not None

    async def activate(self) -> bool:
        """Run for controller; once elected, bootstrap an empty log with the bootstrap records (the metadata.version
        first)."""
        epoch = await self.backend.elect_controller(self.node_id)
        if epoch is None:
            return False
        self.controller_epoch = epoch
        if METADATA_VERSION_FEATURE_NAME not in self.image.features:
            await self._write(lambda image: ControllerResult(None, records_for_empty_log(
                self.bootstrap_records, self.config.min_insync_replicas, self.kraft)))
        if self.heartbeats is not None:
            self.heartbeats.reset(list(self.image.brokers), self.time_ms())
            if self.manage_leadership:  # a single node has nobody to fail over to: it never fences itself
                self._fencer = asyncio.get_running_loop().create_task(self._fence_stale_brokers())
        if self.manage_leadership:
            self._schedule_reconcile()
            if self.config.auto_leader_rebalance_enable and (self._rebalancer is None or self._rebalancer.done()):
                self._rebalancer = asyncio.get_running_loop().create_task(self._rebalance_leaders_periodically())
        if self.delegation_tokens.secret_key is not None:
            self._token_sweeper = asyncio.get_running_loop().create_task(self._remove_expired_tokens_periodically())
        return True

    def deactivate(self) -> None:
        self.controller_epoch = None
        self.shutting_down.clear()
        for task in (self._rebalancer, self._fencer, self._token_sweeper):
            if task is not None:
                task.cancel()
        self._rebalancer = self._fencer = self._token_sweeper = None

    async def run_for_controller(self, is_backend_controller: Callable[[], bool],
                                 changed: asyncio.Event) -> None:
        """Kafka's ZooKeeper-mode election loop: whenever the controller changes (`changed` is set by the
        backend), resign if this node lost it, and run if there is none."""
        while True:
            changed.clear()
            if self.is_active and not is_backend_controller():
                log.info("node %d resigns as the active controller", self.node_id)
                self.deactivate()
            if not self.is_active and self.backend.active_controller() is None:
                try:
                    await self.activate()
                except KafkaError as error:
                    log.warning("controller election failed: %s", error)
                    await asyncio.sleep(0.2)
                    continue
            await changed.wait()

    # -- partition leadership ----------------------------------------------------------------------------------------

    def _live_brokers(self, image: MetadataImage) -> set[int]:
        return partition_change.live_brokers(image, self.shutting_down)

    def _unclean_allowed(self, topic: str) -> bool:
        value = self.image.config(ConfigResourceType.TOPIC, topic).get("unclean.leader.election.enable")
        if value is None:
            return self.config.unclean_leader_election_enable
        return value.strip().lower() == "true"

    def _min_isr(self, topic: str) -> int:
        return partition_change.min_insync_replicas(self.image, topic, self.config.min_insync_replicas)

    def _schedule_reconcile(self) -> None:
        self._reconcile_again = True
        if self._reconciler is None or self._reconciler.done():
            self._reconciler = asyncio.get_running_loop().create_task(self._reconcile())

    async def _reconcile(self) -> None:
        """Bring partitions in line with the live brokers until a pass changes nothing."""
        while self._reconcile_again and self.is_active:
            self._reconcile_again = False
            for broker_id, broker_epoch in list(self.shutting_down.items()):
                registration = self.image.brokers.get(broker_id)
                if registration is not None and registration.broker_epoch != broker_epoch:
                    del self.shutting_down[broker_id]  # it came back: a new registration
            try:
                await self._write(lambda image: ControllerResult(None, self._partition_changes(image)))
            except NotControllerError:
                return
            except InvalidUpdateVersionError:
                self._reconcile_again = True  # a leader changed an ISR meanwhile: recompute from the new image
                await asyncio.sleep(0.01)
            except Exception:  # noqa: BLE001 - retried on the next change
                log.exception("updating partition leadership failed")
                await asyncio.sleep(0.5)
                self._reconcile_again = True

    def _partition_changes(self, image: MetadataImage) -> list[Message]:
        """Leadership after broker changes first; reassignments whose new replicas caught up complete once the
        partition is otherwise settled (one change per partition per write)."""
        live = self._live_brokers(image)
        records = partition_change.handle_broker_changes(image, live, self._unclean_allowed, self._min_isr)
        if records:
            return records
        return reassignment.reassignment_progress(image, live)

    async def alter_partition_reassignments(self, request: AlterPartitionReassignmentsRequest
                                            ) -> AlterPartitionReassignmentsResponse:
        try:
            return await self._write(lambda image: reassignment.alter_partition_reassignments(
                image, request, self._live_brokers(image), request.allow_replication_factor_change))
        except NotControllerError:
            return AlterPartitionReassignmentsResponse(error_code=ErrorCode.NOT_CONTROLLER,
                                                       error_message=_NOT_CONTROLLER.message)

    async def handle_admin_requests(self, deletions: Sequence[str],
                                    reassignment: dict[tuple[str, int], list[int]]) -> None:
        """Topic deletions and a reassignment plan left by Kafka's ZooKeeper-based tools (the ZooKeeper backend's
        /admin/delete_topics and /admin/reassign_partitions), carried out like the equivalent admin requests."""
        if deletions:
            response = await self.delete_topics(DeleteTopicsRequest(topic_names=list(deletions)), 5)
            for result in response.responses:
                log.info("deletion of topic %s requested in ZooKeeper: %s", result.name,
                         ErrorCode(result.error_code).name)
        if reassignment:
            Topic = AlterPartitionReassignmentsRequest.ReassignableTopic
            Partition = AlterPartitionReassignmentsRequest.ReassignablePartition
            topics: dict[str, list] = {}
            for (name, index), replicas in sorted(reassignment.items()):
                topics.setdefault(name, []).append(Partition(partition_index=index, replicas=replicas))
            response = await self.alter_partition_reassignments(AlterPartitionReassignmentsRequest(
                topics=[Topic(name=name, partitions=partitions) for name, partitions in topics.items()]))
            log.info("reassignment of %d partition(s) requested in ZooKeeper: %s", len(reassignment),
                     ErrorCode(response.error_code).name)

    def list_partition_reassignments(self, request: ListPartitionReassignmentsRequest
                                     ) -> ListPartitionReassignmentsResponse:
        if not self.is_active:
            return ListPartitionReassignmentsResponse(error_code=ErrorCode.NOT_CONTROLLER,
                                                      error_message=_NOT_CONTROLLER.message)
        return reassignment.list_partition_reassignments(self.image, request)

    async def _rebalance_leaders_periodically(self) -> None:
        interval_s = self.config.leader_imbalance_check_interval_seconds
        while self.is_active:
            await asyncio.sleep(interval_s)
            moves = partition_change.imbalanced_partitions(self.image, self._live_brokers(self.image),
                                                           self.config.leader_imbalance_per_broker_percentage)
            if moves:
                log.info("auto leader rebalance: moving %d partition(s) back to their preferred leader", len(moves))
                try:
                    await self._elect(partition_change.PREFERRED, moves)
                except KafkaError as error:
                    log.warning("auto leader rebalance failed: %s", error)

    async def _elect(self, election_type: int,
                     partitions: Sequence[tuple[str, int]] | None) -> dict[tuple[str, int], ErrorCode]:
        def operation(image: MetadataImage) -> ControllerResult[dict[tuple[str, int], ErrorCode]]:
            live = self._live_brokers(image)
            wanted = partitions
            if wanted is None:
                wanted = [(topic.name, index) for topic in image.topics_by_id.values() for index in topic.partitions]
            results: dict[tuple[str, int], ErrorCode] = {}
            records: list[Message] = []
            for name, index in wanted:
                topic = image.topic(name)
                registration = topic.partitions.get(index) if topic is not None else None
                if registration is None:
                    results[(name, index)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    continue
                if election_type == partition_change.PREFERRED:
                    error, change = partition_change.elect_preferred_leader(registration, live)
                else:
                    error, change = partition_change.elect_unclean_leader(registration, live)
                results[(name, index)] = error
                if change is not None:
                    records.append(change.record(topic.topic_id, index))
            return ControllerResult(results, records)

        return await self._write(operation)

    async def elect_leaders(self, request: ElectLeadersRequest) -> ElectLeadersResponse:
        """ElectLeaders: preferred (v0 always) or unclean elections, per partition (null: every partition)."""
        Result = ElectLeadersResponse.ReplicaElectionResult
        PartitionResult = ElectLeadersResponse.PartitionResult
        wanted = None if request.topic_partitions is None else [
            (entry.topic, index) for entry in request.topic_partitions for index in entry.partitions]
        try:
            results = await self._elect(request.election_type, wanted)
        except NotControllerError:
            results = {key: ErrorCode.NOT_CONTROLLER for key in wanted or ()}
            if wanted is None:
                return ElectLeadersResponse(error_code=ErrorCode.NOT_CONTROLLER)
        by_topic: dict[str, list] = {}
        for (name, index), error in results.items():
            if wanted is None and error == ErrorCode.ELECTION_NOT_NEEDED:
                continue  # Kafka leaves those out when every partition was asked for
            # As Kafka, a partition that was not elected says why in words too.
            by_topic.setdefault(name, []).append(PartitionResult(
                partition_id=index, error_code=error,
                error_message=None if error == ErrorCode.NONE else ERROR_INFO[error].message))
        return ElectLeadersResponse(error_code=ErrorCode.NONE, replica_election_results=[
            Result(topic=name, partition_result=partitions) for name, partitions in by_topic.items()])

    async def controlled_shutdown(self, broker_id: int, broker_epoch: int) -> list[tuple[str, int]]:
        """Move leadership away from a broker that is shutting down; the partitions it still leads."""
        registration = self.image.brokers.get(broker_id)
        if registration is None:
            return []
        if broker_epoch >= 0 and registration.broker_epoch != broker_epoch:
            raise StaleBrokerEpochError(f"Broker epoch {broker_epoch} of broker {broker_id} is not the current "
                                        f"{registration.broker_epoch}")
        self.shutting_down[broker_id] = registration.broker_epoch

        def operation(image: MetadataImage) -> ControllerResult[list[tuple[str, int]]]:
            records, remaining = partition_change.controlled_shutdown(image, broker_id, self._live_brokers(image),
                                                                      self._min_isr)
            return ControllerResult(remaining, records)

        remaining = await self._write(operation)
        log.info("controlled shutdown of broker %d: %d partition(s) it still leads", broker_id, len(remaining))
        return remaining

    async def _write(self, operation: Callable[[MetadataImage], ControllerResult[T]]) -> T:
        async with self._lock:
            if self.controller_epoch is None:
                raise NotControllerError(_NOT_CONTROLLER.message)
            result = operation(self.image)
            if result.records:
                await self.backend.append(result.records, self.controller_epoch)
            return result.response

    # -- topics ------------------------------------------------------------------------------------------------------

    def _describe_new_topic_configs(self, overrides) -> list[CreateTopicsResponse.CreatableTopicConfigs]:
        return [CreateTopicsResponse.CreatableTopicConfigs(name=entry.name, value=entry.value,
                                                           read_only=entry.is_read_only, config_source=entry.source,
                                                           is_sensitive=entry.is_sensitive)
                for entry in describe_topic_configs(self.config, overrides)]

    async def create_topics(self, request: CreateTopicsRequest) -> CreateTopicsResponse:
        described: dict[tuple, list[CreateTopicsResponse.CreatableTopicConfigs]] = {}

        def describe(overrides) -> list[CreateTopicsResponse.CreatableTopicConfigs]:
            """One description per set of overrides: the topics of one request mostly share theirs (often none)."""
            key = tuple(sorted(overrides.items()))
            if key not in described:
                described[key] = self._describe_new_topic_configs(overrides)
            return described[key]

        try:
            return await self._write(lambda image: replication_control.create_topics(
                image, request, self.config, self.rng, describe))
        except NotControllerError:
            return replication_control.create_topics_error(request, _NOT_CONTROLLER)

    async def auto_create_topics(self, names: Sequence[str]) -> CreateTopicsResponse:
        """Create topics clients asked for (Metadata with auto-creation), each with what Kafka gives it."""
        request = CreateTopicsRequest(topics=[creatable_topic(name, self.config) for name in names])
        if not self.is_active and self.forward_create_topics is not None:
            # Another broker is the controller (ZooKeeper mode): it creates the topics (Kafka's forwarding).
            try:
                response = await self.forward_create_topics(request)
            except KafkaError as error:
                log.info("auto-creation of %s through the controller failed: %s", ", ".join(names), error)
                return replication_control.create_topics_error(request, ApiError.from_exception(error))
        else:
            response = await self.create_topics(request)
        for result in response.topics:
            if result.error_code not in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS):
                log.debug("auto-creation of topic %s failed: %s (%s)", result.name,
                         ErrorCode(result.error_code).name, result.error_message)
        return response

    async def delete_topics(self, request: DeleteTopicsRequest, api_version: int) -> DeleteTopicsResponse:
        try:
            return await self._write(lambda image: replication_control.delete_topics(
                image, request, api_version, self.config.delete_topic_enable))
        except NotControllerError:
            return replication_control.delete_topics_error(request, _NOT_CONTROLLER)

    async def create_partitions(self, request: CreatePartitionsRequest) -> CreatePartitionsResponse:
        try:
            return await self._write(lambda image: replication_control.create_partitions(image, request, self.rng))
        except NotControllerError:
            return replication_control.create_partitions_error(request, _NOT_CONTROLLER)

    # -- configs -----------------------------------------------------------------------------------------------------

    async def incremental_alter_configs(self, request: IncrementalAlterConfigsRequest
                                        ) -> IncrementalAlterConfigsResponse:
        try:
            return await self._write(lambda image: config_control.incremental_alter_configs(
                image, request, self.config, self.node_id, self.kraft))
        except NotControllerError:
            Result = IncrementalAlterConfigsResponse.AlterConfigsResourceResponse
            return IncrementalAlterConfigsResponse(responses=[
                Result(error_code=_NOT_CONTROLLER.error_code, error_message=_NOT_CONTROLLER.message,
                       resource_type=resource.resource_type, resource_name=resource.resource_name)
                for resource in request.resources])

    async def legacy_alter_configs(self, request: AlterConfigsRequest) -> AlterConfigsResponse:
        try:
            return await self._write(lambda image: config_control.legacy_alter_configs(
                image, request, self.config, self.node_id, self.kraft))
        except NotControllerError:
            Result = AlterConfigsResponse.AlterConfigsResourceResponse
            return AlterConfigsResponse(responses=[
                Result(error_code=_NOT_CONTROLLER.error_code, error_message=_NOT_CONTROLLER.message,
                       resource_type=resource.resource_type, resource_name=resource.resource_name)
                for resource in request.resources])

    # -- ACLs --------------------------------------------------------------------------------------------------------

    async def create_acls(self, request: CreateAclsRequest) -> CreateAclsResponse:
        try:
            return await self._write(lambda image: acl_control.create_acls(image, request))
        except NotControllerError:
            return CreateAclsResponse(results=[CreateAclsResponse.AclCreationResult(
                error_code=_NOT_CONTROLLER.error_code, error_message=_NOT_CONTROLLER.message)
                for _ in request.creations])

    async def delete_acls(self, request: DeleteAclsRequest) -> DeleteAclsResponse:
        try:
            return await self._write(lambda image: acl_control.delete_acls(image, request))
        except NotControllerError:
            return DeleteAclsResponse(filter_results=[DeleteAclsResponse.DeleteAclsFilterResult(
                error_code=_NOT_CONTROLLER.error_code, error_message=_NOT_CONTROLLER.message)
                for _ in request.filters])
    async def alter_client_quotas(self, request: AlterClientQuotasRequest) -> AlterClientQuotasResponse:
        try:
            return await self._write(lambda image: client_quota_control.alter_client_quotas(image, request))
        except NotControllerError:
            return client_quota_control.alter_client_quotas_error(request, _NOT_CONTROLLER)

    # -- SCRAM credentials -------------------------------------------------------------------------------------------

    async def alter_user_scram_credentials(self, request: AlterUserScramCredentialsRequest
                                           ) -> AlterUserScramCredentialsResponse:
        try:
            return await self._write(lambda image: scram_control.alter_user_scram_credentials(
                image, request, self._metadata_version_at_least(image, SCRAM_LEVEL)))
        except NotControllerError:
            Result = AlterUserScramCredentialsResponse.AlterUserScramCredentialsResult
            users = dict.fromkeys(item.name for item in [*request.deletions, *request.upsertions])
            return AlterUserScramCredentialsResponse(results=[
                Result(user=user, error_code=_NOT_CONTROLLER.error_code, error_message=_NOT_CONTROLLER.message)
                for user in users])

    # -- feature versions --------------------------------------------------------------------------------------------

    async def update_features(self, request: UpdateFeaturesRequest, api_version: int) -> UpdateFeaturesResponse:
        """UpdateFeatures (controller/feature_control.py): v0 asks for a downgrade with allow_downgrade (a safe
        one), v1+ with upgrade_type. Kafka 4's controller decides the request as a whole: a refusal is the top-level
        error alone, its message naming the first feature's reason; before v2 a success also lists every feature of
        the request (with Kafka's message for no error, "NONE")."""
        updates = {}
        for update in request.feature_updates:
            upgrade_type = update.upgrade_type if api_version >= 1 else (
                feature_control.SAFE_DOWNGRADE if update.allow_downgrade else feature_control.UPGRADE)
            updates[update.feature] = (update.max_version_level, upgrade_type)
        try:
            error = await self._write(lambda image: feature_control.update_features(
                image, updates, request.validate_only, self.node_id, self.kraft_version(), self.kraft,
                self.config.min_insync_replicas))
        except NotControllerError:
            error = _NOT_CONTROLLER
        if error.is_failure:
            log.warning("UpdateFeatures refused: %s", error.message)
        Result = UpdateFeaturesResponse.UpdatableFeatureResult
        if error.is_failure:
            message = error.message if error.error_code == ErrorCode.NOT_CONTROLLER else \
                f"The update failed for all features since the following feature had an error: {error.message}"
            return UpdateFeaturesResponse(error_code=error.error_code, error_message=message)
        results = [] if api_version >= 2 else [Result(feature=name, error_code=ErrorCode.NONE, error_message="NONE")
                                               for name in updates]
        return UpdateFeaturesResponse(error_code=ErrorCode.NONE, error_message=None, results=results)

    # -- delegation tokens -------------------------------------------------------------------------------------------

    async def create_delegation_token(self, principal: KafkaPrincipal, request: CreateDelegationTokenRequest
                                      ) -> CreateDelegationTokenResponse:
        if self.delegation_tokens.secret_key is not None \
                and not self._metadata_version_at_least(self.image, DELEGATION_TOKENS_LEVEL):
            return CreateDelegationTokenResponse(error_code=ErrorCode.UNSUPPORTED_VERSION)  # checked after the key
        return await self._token_write(delegation_token_control.create_delegation_token, principal, request,
                                       CreateDelegationTokenResponse)

    def _metadata_version_at_least(self, image: MetadataImage, level: int) -> bool:
        """Whether the finalized metadata.version has `level`'s records (ZooKeeper mode keeps SCRAM credentials
        and tokens in znodes, whatever its levels say)."""
        return not self.kraft or image.feature_level(METADATA_VERSION_FEATURE_NAME) >= level

    async def renew_delegation_token(self, principal: KafkaPrincipal, request: RenewDelegationTokenRequest
                                     ) -> RenewDelegationTokenResponse:
        return await self._token_write(delegation_token_control.renew_delegation_token, principal, request,
                                       RenewDelegationTokenResponse)

    async def expire_delegation_token(self, principal: KafkaPrincipal, request: ExpireDelegationTokenRequest
                                      ) -> ExpireDelegationTokenResponse:
        return await self._token_write(delegation_token_control.expire_delegation_token, principal, request,
                                       ExpireDelegationTokenResponse)

    async def _token_write(self, control: Callable, principal: KafkaPrincipal, request: Message,
                           response_class: type[T]) -> T:
        try:
            return await self._write(lambda image: control(image, self.delegation_tokens, self.time_ms(), principal,
                                                           request))
        except NotControllerError:
            return response_class(error_code=ErrorCode.NOT_CONTROLLER)

    async def _remove_expired_tokens_periodically(self) -> None:
        """Kafka's token remover: every delegation.token.expiry.check.interval.ms, the tokens past their expiry leave
        the metadata (and so every broker's SCRAM servers)."""
        while self.is_active:
            await asyncio.sleep(self.config.delegation_token_expiry_check_interval_ms / 1000)
            try:
                removed = await self._write(lambda image: delegation_token_control.remove_expired_tokens(
                    image, self.time_ms()))
            except NotControllerError:
                return
            except KafkaError as error:
                log.warning("removing expired delegation tokens failed: %s", error)
                continue
            if removed:
                log.info("removed %d expired delegation token(s)", removed)

    # -- brokers and producer ids ------------------------------------------------------------------------------------

    async def register_broker(self, broker_id: int, endpoints: Sequence[Endpoint], rack: str | None,
                              incarnation_id: uuid.UUID | None = None,
                              supported_features: Mapping[str, tuple[int, int]] | None = None,
                              log_dirs: Sequence[uuid.UUID] = ()) -> int:
        """Register (fenced) a broker incarnation (supporting the feature levels a kfk node does unless told
        otherwise) with the ids of its log dirs; returns its broker epoch. The same incarnation again amends its
        registration and keeps its session and shutdown state."""
        incarnation_id = incarnation_id or uuid.uuid4()
        features = kfk_supported_features() if supported_features is None else supported_features
        existing = self.image.brokers.get(broker_id)
        broker_epoch = await self._write(lambda image: cluster_control.register_broker(
            image, broker_id, incarnation_id, endpoints, rack, features, log_dirs))
        if existing is None or existing.incarnation_id != incarnation_id:
            self.shutting_down.pop(broker_id, None)
            if self.heartbeats is not None:
                self.heartbeats.register(broker_id, self.time_ms())
        return broker_epoch

    async def update_broker_endpoints(self, broker_id: int, endpoints: Sequence[Endpoint]) -> None:
        await self._write(lambda image: cluster_control.update_broker_endpoints(image, broker_id, endpoints))

    async def unfence_broker(self, broker_id: int, broker_epoch: int) -> None:
        await self._write(lambda image: cluster_control.unfence_broker(image, broker_id, broker_epoch))

    async def allocate_producer_ids(self, broker_id: int, broker_epoch: int) -> ProducerIdsBlock:
        return await self._write(lambda image: generate_next_producer_ids(image, broker_id, broker_epoch))

    # -- broker lifecycle (KRaft: BrokerRegistration, BrokerHeartbeat) -----------------------------------------------

    async def handle_broker_registration(self, request: BrokerRegistrationRequest) -> BrokerRegistrationResponse:
        """A broker (re)starting: registered fenced with a new broker epoch. Refused when the cluster id differs,
        or when another incarnation of the id is registered and still heartbeating (two processes, one node.id;
        a broker killed and restarted within its session waits for the session to end, as in Kafka). The broker of
        this controller's own node is exempt: its earlier incarnation was this node, which this process now is."""
        if not self.is_active:
            return BrokerRegistrationResponse(error_code=ErrorCode.NOT_CONTROLLER)
        if request.cluster_id != self.backend.cluster_id:
            return BrokerRegistrationResponse(error_code=ErrorCode.INCONSISTENT_CLUSTER_ID)
        existing = self.image.brokers.get(request.broker_id)
        if request.broker_id != self.node_id and existing is not None \
                and existing.incarnation_id != request.incarnation_id and not existing.fenced \
                and self.heartbeats is not None and self.heartbeats.has_valid_session(request.broker_id,
                                                                                      self.time_ms()):
            log.warning("refusing the registration of broker %d: incarnation %s is still alive", request.broker_id,
                        existing.incarnation_id)
            return BrokerRegistrationResponse(error_code=ErrorCode.DUPLICATE_BROKER_REGISTRATION)
        try:
            if existing is not None and request.previous_broker_epoch != existing.broker_epoch \
                    and partition_change.elr_enabled(self.image):
                await self._write(lambda image: ControllerResult(None, partition_change.forget_unclean_shutdown(
                    image, request.broker_id, self._min_isr)))
            broker_epoch = await self.register_broker(
                request.broker_id, cluster_control.endpoints_of(request.listeners), request.rack or None,
                request.incarnation_id, {feature.name: (feature.min_supported_version, feature.max_supported_version)
                                         for feature in request.features}, request.log_dirs)
        except KafkaError as error:
            if error.error_code == ErrorCode.UNSUPPORTED_VERSION:
                log.warning("refusing the registration of broker %d: %s", request.broker_id, error)
            return BrokerRegistrationResponse(error_code=error.error_code)
        log.info("broker %d registered (incarnation %s) with broker epoch %d", request.broker_id,
                 request.incarnation_id, broker_epoch)
        return BrokerRegistrationResponse(error_code=ErrorCode.NONE, broker_epoch=broker_epoch)

    def _control_state(self, broker_id: int) -> BrokerControlState:
        registration = self.image.brokers[broker_id]
        if registration.fenced:
            return BrokerControlState.FENCED
        if broker_id in self.shutting_down:
            return BrokerControlState.CONTROLLED_SHUTDOWN
        return BrokerControlState.UNFENCED

    def _leads_movable_partitions(self, broker_id: int) -> bool:
        """Whether the broker leads a partition another live in-sync replica could lead: what its controlled shutdown
        waits for (a partition with no other in-sync replica stays with it until it is gone)."""
        others = self._live_brokers(self.image) - {broker_id}
        return any(partition.leader == broker_id and any(replica in others for replica in partition.isr)
                   for topic in self.image.topics_by_id.values() for partition in topic.partitions.values())

    async def handle_broker_heartbeat(self, request: BrokerHeartbeatRequest) -> BrokerHeartbeatResponse:
        """A broker's heartbeat: its session renewed, and the transition it asks for or has earned (unfenced once
        caught up with its own registration; fenced on want_fence; controlled shutdown on want_shut_down)."""
        if not self.is_active or self.heartbeats is None:
            return BrokerHeartbeatResponse(error_code=ErrorCode.NOT_CONTROLLER)
        broker_id, broker_epoch = request.broker_id, request.broker_epoch
        try:
            cluster_control.check_broker_epoch(self.image, broker_id, broker_epoch)
            self.heartbeats.touch(broker_id, self.time_ms(), request.current_metadata_offset)
            current = self._control_state(broker_id)
            if request.want_shut_down and not request.want_fence and current is BrokerControlState.UNFENCED:
                await self.controlled_shutdown(broker_id, broker_epoch)  # leaderships move off now
                current = BrokerControlState.CONTROLLED_SHUTDOWN
            state = self.heartbeats.next_state(
                broker_id, current, registration_offset=broker_epoch,
                metadata_offset=request.current_metadata_offset, want_fence=request.want_fence,
                want_shut_down=request.want_shut_down,
                # Only a controlled shutdown asks (a scan of every partition: not for each routine heartbeat).
                has_leaderships=(request.want_shut_down or current is BrokerControlState.CONTROLLED_SHUTDOWN)
                and self._leads_movable_partitions(broker_id),
                committed_offset=self.image.offset)
            if current.fenced != state.fenced:
                if state.fenced:
                    await self._fence(broker_id, broker_epoch)
                else:
                    await self.unfence_broker(broker_id, broker_epoch)
                    log.info("broker %d caught up with the metadata (offset %d): unfenced", broker_id,
                             request.current_metadata_offset)
        except NotControllerError:
            return BrokerHeartbeatResponse(error_code=ErrorCode.NOT_CONTROLLER)
        except KafkaError as error:
            return BrokerHeartbeatResponse(error_code=error.error_code)
        return BrokerHeartbeatResponse(
            error_code=ErrorCode.NONE, is_caught_up=request.current_metadata_offset >= broker_epoch,
            is_fenced=state.fenced, should_shut_down=state.should_shut_down)

    async def unregister_broker(self, broker_id: int) -> None:
        """UnregisterBroker: the broker's registration removed (it must be gone: fenced or never heartbeating)."""
        def operation(image: MetadataImage) -> ControllerResult[None]:
            registration = image.brokers.get(broker_id)
            if registration is None:
                raise BrokerIdNotRegisteredError(f"No broker with id {broker_id} is registered.")
            live = self._live_brokers(image) - {broker_id}
            return ControllerResult(None, [
                *partition_change.handle_broker_changes(image, live, self._unclean_allowed, self._min_isr),
                UnregisterBrokerRecord(broker_id=broker_id, broker_epoch=registration.broker_epoch)])

        await self._write(operation)
        if self.heartbeats is not None:
            self.heartbeats.remove(broker_id)

    async def _fence(self, broker_id: int, broker_epoch: int) -> None:
        def operation(image: MetadataImage) -> ControllerResult[None]:
            live = self._live_brokers(image) - {broker_id}
            changes = partition_change.handle_broker_changes(image, live, self._unclean_allowed, self._min_isr) \
                if self.manage_leadership else []
            return cluster_control.fence_broker(image, broker_id, broker_epoch, changes)

        await self._write(operation)

    async def _fence_stale_brokers(self) -> None:
        """The active controller's session check: fence every unfenced broker whose heartbeats stopped."""
        while self.is_active:
            now_ms = self.time_ms()
            unfenced = {broker_id for broker_id, broker in self.image.brokers.items() if not broker.fenced}
            for broker_id in self.heartbeats.stale_brokers(unfenced, now_ms):
                registration = self.image.brokers.get(broker_id)
                if registration is None or registration.fenced:
                    continue
                log.info("fencing broker %d: no heartbeat for %d ms", broker_id,
                         self.heartbeats.session_timeout_ms)
                try:
                    await self._fence(broker_id, registration.broker_epoch)
                except NotControllerError:
                    return
                except KafkaError as error:
                    log.warning("fencing broker %d failed: %s", broker_id, error)
            # Re-checked at least every 100 ms: a broker registered meanwhile has a deadline of its own.
            next_check_ms = self.heartbeats.next_check_ms(unfenced, now_ms)
            await asyncio.sleep(min(max(next_check_ms - self.time_ms(), 10), 100) / 1000)

    async def handle_alter_partition(self, request: AlterPartitionRequest) -> AlterPartitionResponse:
        """Leaders' ISR changes (AlterPartition v2+, topics by id), each partition checked and changed on its own;
        the answer carries the partition's state after the write."""
        if not self.is_active:
            return AlterPartitionResponse(error_code=ErrorCode.NOT_CONTROLLER)
        try:
            cluster_control.check_broker_epoch(self.image, request.broker_id, request.broker_epoch)
        except KafkaError as error:
            return AlterPartitionResponse(error_code=error.error_code)

        def operation(image: MetadataImage) -> ControllerResult[dict[tuple, ErrorCode]]:
            live = self._live_brokers(image)
            errors: dict[tuple, ErrorCode] = {}
            records: list[Message] = []
            for topic in request.topics:
                topic_image = image.topics_by_id.get(topic.topic_id)
                for partition in topic.partitions:
                    registration = topic_image.partitions.get(partition.partition_index) if topic_image else None
                    if registration is None:
                        errors[(topic.topic_id, partition.partition_index)] = ErrorCode.UNKNOWN_TOPIC_ID \
                            if topic_image is None else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                        continue
                    new_isr = tuple(state.broker_id for state in partition.new_isr_with_epochs) \
                        if partition.new_isr_with_epochs else tuple(partition.new_isr or ())
                    error, change = partition_change.alter_partition(
                        registration, request.broker_id, partition.leader_epoch, partition.partition_epoch, new_isr,
                        live)
                    if change is not None and partition_change.elr_enabled(image):
                        change = partition_change.with_elr(registration, change, self._min_isr(topic_image.name))
                    errors[(topic.topic_id, partition.partition_index)] = error
                    if change is not None:
                        records.append(change.record(topic.topic_id, partition.partition_index))
            return ControllerResult(errors, records)

        try:
            errors = await self._write(operation)
        except NotControllerError:
            return AlterPartitionResponse(error_code=ErrorCode.NOT_CONTROLLER)
        Topic, Partition = AlterPartitionResponse.TopicData, AlterPartitionResponse.PartitionData
        topics = []
        for topic in request.topics:
            topic_image = self.image.topics_by_id.get(topic.topic_id)
            partitions = []
            for partition in topic.partitions:
                error = errors[(topic.topic_id, partition.partition_index)]
                registration = topic_image.partitions.get(partition.partition_index) if topic_image else None
                if error != ErrorCode.NONE or registration is None:
                    partitions.append(Partition(partition_index=partition.partition_index, error_code=error))
                else:
                    partitions.append(Partition(
                        partition_index=partition.partition_index, error_code=ErrorCode.NONE,
                        leader_id=registration.leader, leader_epoch=registration.leader_epoch,
                        isr=list(registration.isr), partition_epoch=registration.partition_epoch))
            topics.append(Topic(topic_id=topic.topic_id, partitions=partitions))
        return AlterPartitionResponse(error_code=ErrorCode.NONE, topics=topics)

    async def handle_allocate_producer_ids(self, request: AllocateProducerIdsRequest) -> AllocateProducerIdsResponse:
        """The next producer id block for a broker (its transaction coordinator and idempotent producers)."""
        try:
            block = await self.allocate_producer_ids(request.broker_id, request.broker_epoch)
        except NotControllerError:
            return AllocateProducerIdsResponse(error_code=ErrorCode.NOT_CONTROLLER)
        except KafkaError as error:
            return AllocateProducerIdsResponse(error_code=error.error_code)
        return AllocateProducerIdsResponse(error_code=ErrorCode.NONE, producer_id_start=block.first_producer_id,
                                           producer_id_len=block.size)
