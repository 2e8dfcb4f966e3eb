"""process.roles and the KRaft quorum configuration: Kafka's validation, and kfk's single-node default (a combined
node with no quorum configured needs no controller listener); the metadata log's segment size floor."""

from __future__ import annotations

import pytest

from kfk.config import BrokerConfig
from kfk.controller.config_describer import describe_broker_configs
from kfk.errors import InvalidConfigurationError

VOTERS = "1@127.0.0.1:9093,2@127.0.0.1:9095,3@127.0.0.1:9097"


def config(**props: str) -> BrokerConfig:
    parsed = BrokerConfig({key.replace("_", "."): value for key, value in props.items()})
    parsed.check_kraft_roles()
    return parsed


def test_the_single_node_default_needs_no_quorum_and_no_controller_listener() -> None:
    combined = config(process_roles="broker,controller", node_id="1", listeners="PLAINTEXT://127.0.0.1:9092")
    assert combined.single_node_quorum and combined.quorum_voter_addresses == {}


@pytest.mark.parametrize("props", [
    {"process_roles": "controller", "node_id": "1", "listeners": "CONTROLLER://127.0.0.1:9093",
     "controller_listener_names": "CONTROLLER", "controller_quorum_voters": VOTERS},
    {"process_roles": "broker", "node_id": "4", "listeners": "PLAINTEXT://127.0.0.1:9092",
     "controller_listener_names": "CONTROLLER", "controller_quorum_voters": VOTERS},
    {"process_roles": "broker,controller", "node_id": "2",
     "listeners": "PLAINTEXT://127.0.0.1:9094,CONTROLLER://127.0.0.1:9095", "controller_listener_names": "CONTROLLER",
     "controller_quorum_voters": VOTERS},
    {"process_roles": "broker", "node_id": "4", "listeners": "PLAINTEXT://127.0.0.1:9092",
     "controller_listener_names": "CONTROLLER", "controller_quorum_bootstrap_servers": "127.0.0.1:9093"},
], ids=["controller", "broker", "combined", "broker with bootstrap servers"])
def test_valid_roles(props: dict[str, str]) -> None:
    parsed = config(**props)
    assert not parsed.single_node_quorum
    if "controller_quorum_voters" in props:
        assert parsed.quorum_voter_addresses == {1: ("127.0.0.1", 9093), 2: ("127.0.0.1", 9095),
                                                 3: ("127.0.0.1", 9097)}


@pytest.mark.parametrize("props, message", [
    ({"process_roles": "broker", "node_id": "4", "controller_listener_names": "CONTROLLER"},
     "If using process.roles, either controller.quorum.bootstrap.servers"),
    ({"process_roles": "controller", "node_id": "1", "listeners": "CONTROLLER://127.0.0.1:9093",
      "controller_quorum_voters": VOTERS},
     "controller.listener.names must contain at least one value"),
    ({"process_roles": "controller", "node_id": "1", "listeners": "PLAINTEXT://127.0.0.1:9093",
      "controller_listener_names": "CONTROLLER", "controller_quorum_voters": VOTERS},
     "controller.listener.names must contain at least one value appearing in the 'listeners'"),
    ({"process_roles": "controller", "node_id": "7", "listeners": "CONTROLLER://127.0.0.1:9093",
      "controller_listener_names": "CONTROLLER", "controller_quorum_voters": VOTERS},
     "the node id 7 must be included in the set of voters"),
    ({"process_roles": "controller", "node_id": "1",
      "listeners": "CONTROLLER://127.0.0.1:9093,PLAINTEXT://127.0.0.1:9092",
      "controller_listener_names": "CONTROLLER", "controller_quorum_voters": VOTERS},
     "The listeners config must only contain KRaft controller listeners"),
    ({"process_roles": "broker", "node_id": "4",
      "listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
      "controller_listener_names": "CONTROLLER", "controller_quorum_voters": VOTERS},
     "controller.listener.names must not contain a value appearing in the 'listeners'"),
    ({"process_roles": "broker", "node_id": "2", "listeners": "PLAINTEXT://127.0.0.1:9092",
      "controller_listener_names": "CONTROLLER", "controller_quorum_voters": VOTERS},
     "the node id 2 must not be included in the set of voters"),
    ({"process_roles": "broker", "node_id": "4", "listeners": "PLAINTEXT://127.0.0.1:9092",
      "controller_listener_names": "CONTROLLER", "controller_quorum_voters": "1@127.0.0.1"},
     "Invalid value 1@127.0.0.1 for configuration controller.quorum.voters"),
], ids=["no quorum", "no controller listener", "controller listener not bound", "controller not a voter",
        "controller with a broker listener", "broker binding the controller listener", "broker that is a voter",
        "malformed voter"])
def test_invalid_roles(props: dict[str, str], message: str) -> None:
    with pytest.raises(InvalidConfigurationError, match=message.replace("(", r"\(").replace(".", r"\.")):
        config(**props)


def test_metadata_log_segments_below_8_mib_are_refused_unless_the_internal_floor_is_lowered() -> None:
    combined = {"process.roles": "broker,controller", "node.id": "1"}
    BrokerConfig({**combined, "metadata.log.segment.bytes": str(8 * 1024 * 1024)}).check_metadata_log()
    with pytest.raises(InvalidConfigurationError) as refused:
        BrokerConfig({**combined, "metadata.log.segment.bytes": "1048576"}).check_metadata_log()
    assert str(refused.value) == "Cannot set metadata.log.segment.bytes below 8388608: 1048576"
    BrokerConfig({**combined, "metadata.log.segment.bytes": "16384",
                  "metadata.log.segment.min.bytes": "16384"}).check_metadata_log()
    with pytest.raises(InvalidConfigurationError, match="metadata.log.segment.bytes"):
        BrokerConfig({**combined, "metadata.log.segment.bytes": "11"})  # below a batch's offset and length
    # A ZooKeeper-mode broker has no metadata log
    BrokerConfig({"zookeeper.connect": "127.0.0.1:2181", "broker.id": "1",
                  "metadata.log.segment.bytes": "1048576"}).check_metadata_log()
    # The floor is internal: not described with the broker's configs
    described = {entry.name for entry in describe_broker_configs(BrokerConfig(combined))}
    assert "metadata.log.segment.bytes" in described and "metadata.log.segment.min.bytes" not in described
