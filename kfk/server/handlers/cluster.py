"""DescribeCluster (key 60), v0-v2: the cluster id, the controller and the alive brokers on the request's listener.

v1 adds endpoint_type (KIP-919): a broker listener serves BROKER (1); asking it for CONTROLLER endpoints is
MISMATCHED_ENDPOINT_TYPE and an unknown type UNSUPPORTED_ENDPOINT_TYPE (INVALID_REQUEST for both at v0), checked in
that order as Kafka's AuthHelper does. The controller id is -1 unless it is one of the brokers listed. Cluster
authorized operations are returned when asked for (every cluster operation without authorization). v2 (KIP-1073)
lists the fenced brokers too when include_fenced_brokers is set, each with is_fenced.

On a KRaft controller listener (`controllers` given) it is the other way round, as Kafka's controllers answer the
Admin clients of tools given --bootstrap-controller: CONTROLLER (2) is served, with the voters' controller endpoints
and the active controller's id (-1 while there is none), and BROKER is MISMATCHED_ENDPOINT_TYPE.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from enum import IntEnum

from kfk.controller.backend import MetadataBackend
from kfk.errors import ErrorCode
from kfk.metadata.cache import MetadataCache
from kfk.protocol.messages import ApiKey
from kfk.protocol.messages.describe_cluster import DescribeClusterRequest, DescribeClusterResponse
from kfk.server.dispatch import Dispatcher, RequestContext
from kfk.security.acl import CLUSTER_NAME, ResourceType
from kfk.server.authorization import ALLOW_ALL, RequestAuthorizer
from kfk.server.handlers.metadata import AUTHORIZED_OPERATIONS_OMITTED, CLUSTER_OPERATIONS, controller_id


class EndpointType(IntEnum):
    UNKNOWN = 0
    BROKER = 1
    CONTROLLER = 2


class DescribeClusterHandler:
    def __init__(self, metadata_cache: MetadataCache, metadata_backend: MetadataBackend,
                 auth: RequestAuthorizer = ALLOW_ALL,
                 controllers: Callable[[], Mapping[int, tuple[str, int]]] | None = None) -> None:
        """`controllers`: served on a controller listener, the voters' (host, port) there by node id."""
        self.metadata_cache = metadata_cache
        self.auth = auth
        self.metadata_backend = metadata_backend
        self.controllers = controllers
        self.endpoint_type = EndpointType.BROKER if controllers is None else EndpointType.CONTROLLER

    def register(self, dispatcher: Dispatcher) -> None:
        dispatcher.register(ApiKey.DESCRIBE_CLUSTER, self.describe_cluster)

    async def describe_cluster(self, context: RequestContext,
                               request: DescribeClusterRequest) -> DescribeClusterResponse:
        version = context.api_version
        if request.endpoint_type not in (EndpointType.BROKER, EndpointType.CONTROLLER):
            return DescribeClusterResponse(
                error_code=ErrorCode.INVALID_REQUEST if version == 0 else ErrorCode.UNSUPPORTED_ENDPOINT_TYPE,
                error_message=f"Unsupported endpoint type {request.endpoint_type}")
        if request.endpoint_type != self.endpoint_type:
            return DescribeClusterResponse(
                error_code=ErrorCode.INVALID_REQUEST if version == 0 else ErrorCode.MISMATCHED_ENDPOINT_TYPE,
                error_message=f"The request was sent to an endpoint of type {self.endpoint_type.name}, but we "
                              f"wanted an endpoint of type {EndpointType(request.endpoint_type).name}")
        authorized_operations = (
            self.auth.authorized_operations(context, ResourceType.CLUSTER, CLUSTER_NAME, CLUSTER_OPERATIONS)
            if request.include_cluster_authorized_operations else AUTHORIZED_OPERATIONS_OMITTED)
        if self.controllers is not None:
            active = self.metadata_backend.active_controller()
            return DescribeClusterResponse(
                error_code=ErrorCode.NONE, endpoint_type=EndpointType.CONTROLLER,
                cluster_id=self.metadata_backend.cluster_id, controller_id=-1 if active is None else active[0],
                brokers=[DescribeClusterResponse.DescribeClusterBroker(broker_id=node_id, host=host, port=port)
                         for node_id, (host, port) in sorted(self.controllers().items())],
                cluster_authorized_operations=authorized_operations)
        image = self.metadata_cache.image
        listener = context.listener_name
        return DescribeClusterResponse(
            error_code=ErrorCode.NONE,
            endpoint_type=EndpointType.BROKER,
            cluster_id=self.metadata_backend.cluster_id,
            controller_id=controller_id(self.metadata_backend, image, listener),
            brokers=[DescribeClusterResponse.DescribeClusterBroker(broker_id=registration.broker_id,
                                                                   host=endpoint.host, port=endpoint.port,
                                                                   rack=registration.rack,
                                                                   is_fenced=registration.fenced)
                     for registration, endpoint in (image.registered_brokers(listener)
                                                    if request.include_fenced_brokers
                                                    else image.alive_brokers(listener))],
            cluster_authorized_operations=authorized_operations,
        )
