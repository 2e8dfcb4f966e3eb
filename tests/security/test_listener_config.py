"""The listener resolver of BrokerConfig: security protocols per listener, the inter-broker listener, and
listener.name.<listener>. overrides (Kafka's rules)."""

import pytest

from kfk.config import BrokerConfig
from kfk.errors import InvalidConfigurationError

BASE = {"process.roles": "broker,controller", "node.id": "1"}


def config(**props: str) -> BrokerConfig:
    return BrokerConfig({**BASE, **{key.replace("_", "."): value for key, value in props.items()}})


def test_kafka_s_default_map_names_every_protocol_after_itself() -> None:
    broker = config(listeners="PLAINTEXT://:9092,SSL://:9093,SASL_SSL://:9094")
    assert broker.listener_security_protocol("ssl") == "SSL"
    assert broker.listener_security_protocol("SASL_SSL") == "SASL_SSL"
    assert broker.inter_broker_listener == "PLAINTEXT"


def test_a_listener_missing_from_the_map_is_refused() -> None:
    broker = BrokerConfig({**BASE, "listeners": "INTERNAL://:9093"})
    with pytest.raises(InvalidConfigurationError, match="No security protocol defined for listener INTERNAL"):
        broker.listener_security_protocol("INTERNAL")
    with pytest.raises(InvalidConfigurationError, match="TLS"):
        BrokerConfig({**BASE, "listener.security.protocol.map": "INTERNAL:TLS"}).security_protocol_map


def test_the_inter_broker_listener_follows_kafka_s_rules() -> None:
    props = {**BASE, "listeners": "CLIENT://:9092,REPLICATION://:9093",
             "listener.security.protocol.map": "CLIENT:SASL_SSL,REPLICATION:SSL"}
    assert BrokerConfig(props).inter_broker_listener == "CLIENT"  # nothing said: the first listener
    assert BrokerConfig({**props, "inter.broker.listener.name": "replication"}).inter_broker_listener == "REPLICATION"
    assert BrokerConfig({**BASE, "listeners": "PLAINTEXT://:9092,SSL://:9093",
                         "security.inter.broker.protocol": "SSL"}).inter_broker_listener == "SSL"
    with pytest.raises(InvalidConfigurationError, match="Only one of"):
        BrokerConfig({**props, "inter.broker.listener.name": "REPLICATION",
                      "security.inter.broker.protocol": "SSL"}).inter_broker_listener


def test_a_listener_prefixed_key_overrides_the_broker_wide_one_for_that_listener_only() -> None:
    broker = BrokerConfig({**BASE, "ssl.client.auth": "requested", "listener.name.internal.ssl.client.auth": "required",
                           "listener.name.internal.plain.sasl.jaas.config": "x"})
    assert broker.listener_override("INTERNAL", "ssl.client.auth") == "required"
    assert broker.listener_override("EXTERNAL", "ssl.client.auth") == "requested"
    assert broker.listener_override("EXTERNAL", "ssl.enabled.protocols") == ["TLSv1.2", "TLSv1.3"]
    assert broker.listener_override("INTERNAL", "plain.sasl.jaas.config") == "x"  # no broker key: the raw string
    assert broker.listener_override("EXTERNAL", "plain.sasl.jaas.config") is None


def test_nodes_reach_the_controllers_with_the_controller_listener_s_sasl_settings() -> None:
    """sasl.mechanism.controller.protocol picks the login module of the first controller listener's JAAS config (its
    listener.name.<l>.<mechanism>. form first); a PLAINTEXT or SSL controller listener needs none."""
    from kfk.security.sasl.plain import PlainClient
    from kfk.security.sasl.scram import ScramClient
    from kfk.security.sasl.settings import controller_sasl

    node = {**BASE, "controller.listener.names": "CONTROLLER,OTHER", "listener.security.protocol.map":
            "CONTROLLER:SASL_SSL,OTHER:PLAINTEXT,PLAINTEXT:PLAINTEXT", "sasl.mechanism.controller.protocol": "PLAIN",
            "listener.name.controller.plain.sasl.jaas.config":
                'org.apache.kafka.common.security.plain.PlainLoginModule required username="node" password="s";',
            "listener.name.controller.scram-sha-512.sasl.jaas.config":
                'org.apache.kafka.common.security.scram.ScramLoginModule required username="scrammy" password="t";'}
    client = controller_sasl(BrokerConfig(node))()
    assert isinstance(client, PlainClient) and client.initial_response() == b"\0node\0s"
    scram = controller_sasl(BrokerConfig({**node, "sasl.mechanism.controller.protocol": "SCRAM-SHA-512"}))()
    assert isinstance(scram, ScramClient) and scram.mechanism == "SCRAM-SHA-512"
    plaintext = {**node, "listener.security.protocol.map": "CONTROLLER:SSL,PLAINTEXT:PLAINTEXT"}
    assert controller_sasl(BrokerConfig(plaintext)) is None
    assert controller_sasl(BrokerConfig(BASE)) is None  # the single-node default: no controller listener
    # Kafka's default mechanism, GSSAPI (Kerberos), is not one kfk has: refused at start-up, naming the setting.
    with pytest.raises(InvalidConfigurationError, match=r"the controller listener CONTROLLER uses SASL "
                                                        r"\(sasl.mechanism.controller.protocol=GSSAPI\)"):
        controller_sasl(BrokerConfig({key: value for key, value in node.items()
                                      if key != "sasl.mechanism.controller.protocol"}))


def test_sasl_server_max_receive_size_per_listener_and_unlimited() -> None:
    """Kafka's default (512 KiB), a listener's own value, and -1: Kafka's NetworkReceive.UNLIMITED."""
    from kfk.server.sasl_config import SaslListenerConfig

    jaas = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_a="b";'
    broker = BrokerConfig({**BASE, "listeners": "SASL_PLAINTEXT://:9092,SASL_SSL://:9093",
                           "sasl.enabled.mechanisms": "PLAIN", "sasl.jaas.config": jaas,
                           "listener.name.sasl_ssl.sasl.server.max.receive.size": "-1"})
    sizes = {name: SaslListenerConfig.from_broker_config(broker, name, lambda user, mechanism: None).max_receive_size
             for name in ("SASL_PLAINTEXT", "SASL_SSL")}
    assert sizes == {"SASL_PLAINTEXT": 524288, "SASL_SSL": 2**31 - 1}
