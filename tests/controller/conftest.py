"""A controller over a real embedded backend in tmp_path, driven with a manual clock and a seeded random, on one
event loop per test (asyncio.Runner, no plugin)."""

from __future__ import annotations

import asyncio
import random
import uuid
from typing import Awaitable, TypeVar

import pytest

from kfk.backends.embedded import EmbeddedMetadataBackend
from kfk.common.clock import ManualClock
from kfk.config import BrokerConfig
from kfk.controller.features import supported_features
from kfk.controller.quorum_controller import QuorumController
from kfk.metadata.cache import MetadataCache
from kfk.metadata.image import Endpoint, MetadataImage
from kfk.errors import ErrorCode
from kfk.protocol.messages.broker_heartbeat import BrokerHeartbeatRequest, BrokerHeartbeatResponse
from kfk.protocol.messages.broker_registration import BrokerRegistrationRequest
from kfk.protocol.messages.create_topics import CreateTopicsRequest, CreateTopicsResponse

T = TypeVar("T")
CLUSTER_ID = "MkU3OEVBNTcwNTJENDM2Qg"
NODE_ID = 1

CreatableTopic = CreateTopicsRequest.CreatableTopic
CreatableTopicConfig = CreateTopicsRequest.CreatableTopicConfig
CreatableReplicaAssignment = CreateTopicsRequest.CreatableReplicaAssignment


class ControllerHarness:
    def __init__(self, runner: asyncio.Runner, log_dir: str, clock: ManualClock,
                 overrides: dict[str, str] | None = None, **controller_options) -> None:
        self.runner = runner
        #: QuorumController keyword arguments (manage_leadership, broker_heartbeats).
        self.controller_options = controller_options
        self.log_dir = log_dir
        self.clock = clock
        props = {"process.roles": "broker,controller", "node.id": str(NODE_ID), "log.dirs": log_dir}
        props.update(overrides or {})
        self.config = BrokerConfig(props)
        self.broker_epochs: dict[int, int] = {}
        self.open()

    def open(self) -> None:
        self.backend = EmbeddedMetadataBackend(self.log_dir, NODE_ID, CLUSTER_ID, time_ms=self.clock)
        self.cache = MetadataCache(MetadataImage(cluster_id=CLUSTER_ID))
        self.controller = QuorumController(self.backend, self.config, NODE_ID, rng=random.Random(7),
                                           time_ms=self.clock, **self.controller_options)
        self.backend.add_listener(self.cache)
        self.backend.add_listener(self.controller)
        self.run(self.backend.start())
        assert self.run(self.controller.activate())

    def reopen(self) -> None:
        self.close()
        self.open()

    def close(self) -> None:
        self.controller.deactivate()
        self.run(self.backend.stop())

    def run(self, awaitable: Awaitable[T]) -> T:
        return self.runner.run(awaitable)

    @property
    def image(self) -> MetadataImage:
        return self.cache.image

    def register(self, broker_id: int, rack: str | None = None, unfence: bool = True) -> int:
        endpoint = Endpoint("PLAINTEXT", "127.0.0.1", 9090 + broker_id)
        epoch = self.run(self.controller.register_broker(broker_id, [endpoint], rack,
                                                         log_dirs=[broker_log_dir(broker_id)]))
        if unfence:
            self.run(self.controller.unfence_broker(broker_id, epoch))
        self.broker_epochs[broker_id] = epoch
        return epoch

    def create(self, *topics: CreatableTopic, validate_only: bool = False) -> dict[str, CreateTopicsResponse]:
        response = self.run(self.controller.create_topics(
            CreateTopicsRequest(topics=list(topics), validate_only=validate_only)))
        return {result.name: result for result in response.topics}


def topic(name: str, partitions: int = 1, replication_factor: int = 1, configs: dict[str, str | None] | None = None,
          assignments: dict[int, list[int]] | None = None) -> CreatableTopic:
    return CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=replication_factor,
        configs=[CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()],
        assignments=[CreatableReplicaAssignment(partition_index=p, broker_ids=b)
                     for p, b in (assignments or {}).items()])


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def make_cluster(tmp_path, clock):
    harnesses: list[ControllerHarness] = []
    runner = asyncio.Runner()

    def factory(overrides: dict[str, str] | None = None, brokers: int = 1, **controller_options) -> ControllerHarness:
        harness = ControllerHarness(runner, str(tmp_path / f"logs{len(harnesses)}"), clock, overrides,
                                    **controller_options)
        for broker_id in range(1, brokers + 1):
            harness.register(broker_id)
        harnesses.append(harness)
        return harness

    yield factory
    for harness in harnesses:
        harness.close()
    runner.close()


@pytest.fixture
def cluster(make_cluster) -> ControllerHarness:
    return make_cluster()


def broker_log_dir(broker_id: int) -> uuid.UUID:
    """The directory id of a test broker's one log dir (metadata.version 3.7-IV2 on registers them)."""
    return uuid.UUID(int=1000 + broker_id)


def registration(broker_id: int, incarnation_id: uuid.UUID | None = None, cluster_id: str = CLUSTER_ID,
                 features: dict[str, tuple[int, int]] | None = None) -> BrokerRegistrationRequest:
    """A kfk broker's registration (the feature levels a kfk node supports, unless `features` says otherwise)."""
    Listener = BrokerRegistrationRequest.Listener
    Feature = BrokerRegistrationRequest.Feature
    return BrokerRegistrationRequest(
        broker_id=broker_id, cluster_id=cluster_id, incarnation_id=incarnation_id or uuid.uuid4(),
        listeners=[Listener(name="PLAINTEXT", host="127.0.0.1", port=9090 + broker_id, security_protocol=0)],
        features=[Feature(name=name, min_supported_version=low, max_supported_version=high)
                  for name, (low, high) in (supported_features() if features is None else features).items()],
        rack=None, log_dirs=[broker_log_dir(broker_id)])


@pytest.fixture
def kraft(make_cluster):
    """A controller with KRaft liveness and leadership management, and brokers 2, 3, 4 registered over its API and
    unfenced by their first heartbeat."""
    harness = make_cluster(brokers=0, manage_leadership=True, broker_heartbeats=True)
    for broker_id in (2, 3, 4):
        response = harness.run(harness.controller.handle_broker_registration(registration(broker_id)))
        assert response.error_code == ErrorCode.NONE
        harness.broker_epochs[broker_id] = response.broker_epoch
        assert heartbeat(harness, broker_id).is_fenced is False
    return harness


def heartbeat(harness, broker_id: int, offset: int | None = None, **flags) -> BrokerHeartbeatResponse:
    request = BrokerHeartbeatRequest(broker_id=broker_id, broker_epoch=harness.broker_epochs[broker_id],
                                     current_metadata_offset=harness.image.offset if offset is None else offset,
                                     **flags)
    response = harness.run(harness.controller.handle_broker_heartbeat(request))
    assert response.error_code == ErrorCode.NONE, ErrorCode(response.error_code).name
    return response
