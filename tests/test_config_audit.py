"""No config key is a placebo: every key kfk accepts is either read by the code it governs or refused (or warned
about) when set to anything but its default (kfk/config_support.py says which, key by key).

The keys are enumerated from the config definitions themselves (kfk.config's broker and topic keys, the
authorizer's keys and the replication throttles, kfk.client.config's producer, consumer and admin keys), so a key
added without a classification fails here. A key said to govern behaviour is checked in the source of each module
named as its reader (an attribute access `config.log_segment_bytes`, or the key's name handed to a lookup:
`values["log.roll.ms"]`, `settings("ssl.client.auth")`); the broker's defaults of topic configs are also checked
by behaviour: each one, set, changes the LogConfig a topic gets.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import logging
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest

from kfk.client.config import ADMIN_CONFIG_DEF, CONSUMER_CONFIG_DEF, PRODUCER_CONFIG_DEF, ClientConfig
from kfk.config import (
    AUTHORIZER_CONFIGS,
    BROKER_CONFIG_DEF,
    LOG_CONFIG_DEF,
    THROTTLED_RATE_CONFIGS,
    TOPIC_CONFIG_SYNONYMS,
    BrokerConfig,
    ConfigType,
    LogConfig,
    validate_dynamic_broker_configs,
)
from kfk.config_support import (
    BROKER_KEY_READERS,
    BROKER_UNSUPPORTED,
    CLIENT_KEY_READERS,
    CLIENT_UNSUPPORTED,
    OAUTHBEARER_VALIDATOR_CALLBACK_HANDLERS,
    TOPIC_KEY_READERS,
    TOPIC_UNSUPPORTED,
)
from kfk.errors import InvalidConfigurationError

KRAFT = {"process.roles": "broker,controller", "node.id": "1"}

ACCEPTED = {
    "broker": set(BROKER_CONFIG_DEF.keys) | set(AUTHORIZER_CONFIGS) | set(THROTTLED_RATE_CONFIGS),
    "topic": set(LOG_CONFIG_DEF.keys),
    "client": set(PRODUCER_CONFIG_DEF.keys) | set(CONSUMER_CONFIG_DEF.keys) | set(ADMIN_CONFIG_DEF.keys),
}
CLASSIFIED = {
    "broker": (BROKER_KEY_READERS, BROKER_UNSUPPORTED),
    "topic": (TOPIC_KEY_READERS, TOPIC_UNSUPPORTED),
    "client": (CLIENT_KEY_READERS, CLIENT_UNSUPPORTED),
}


def classification_problems(kind: str, readers: Mapping[str, Any] | None = None,
                            unsupported: Mapping[str, Any] | None = None) -> list[str]:
    """What is wrong with the classification of one kind of key (by default, kfk's own tables)."""
    readers = CLASSIFIED[kind][0] if readers is None else readers
    unsupported = CLASSIFIED[kind][1] if unsupported is None else unsupported
    problems = []
    for name in sorted(ACCEPTED[kind]):
        classes = (name in readers) + (name in unsupported)
        if classes == 0:
            problems.append(f"{name} is accepted but not classified: name the module that reads it, or say why "
                            f"kfk does not act on it (kfk/config_support.py)")
        elif classes == 2:
            problems.append(f"{name} is classified twice (read and not acted on)")
    problems += [f"{name} is classified but kfk does not accept it"
                 for name in sorted((set(readers) | set(unsupported)) - ACCEPTED[kind])]
    return problems


@pytest.mark.parametrize("kind", sorted(ACCEPTED))
def test_every_accepted_key_is_classified_once(kind: str) -> None:
    assert classification_problems(kind) == []


def test_the_audit_flags_a_key_nobody_classified() -> None:
    """The check can fail: the two keys the audit found placebos (accepted, documented, read by nothing: issue 28),
    left out of the tables again, are flagged, and so is a key classified twice."""
    placebos = ("fetch.max.bytes", "sasl.server.max.receive.size")
    readers = {name: modules for name, modules in BROKER_KEY_READERS.items() if name not in placebos}
    assert [problem.split()[0] for problem in classification_problems("broker", readers)] == list(placebos)
    twice = {**BROKER_UNSUPPORTED, "fetch.max.bytes": BROKER_UNSUPPORTED["background.threads"]}
    assert classification_problems("broker", unsupported=twice) == [
        "fetch.max.bytes is classified twice (read and not acted on)"]


@functools.cache
def module_reads(module: str) -> tuple[frozenset[str], frozenset[str]]:
    """(attributes the module accesses, strings it hands to a call or a subscript, directly or through a
    module-level constant): what `config.x`, `values["x"]` and `settings("x")` read. A ConfigKey(...) definition
    is no read."""
    spec = importlib.util.find_spec(module)
    assert spec is not None and spec.origin is not None, f"no module {module}"
    tree = ast.parse(Path(spec.origin).read_text())
    constants = {target.id: node.value.value for node in tree.body if isinstance(node, ast.Assign)
                 and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
                 for target in node.targets if isinstance(target, ast.Name)}

    def strings(node: ast.expr) -> set[str]:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return {node.value}
        if isinstance(node, ast.Name) and node.id in constants:
            return {constants[node.id]}
        return set()

    attributes: set[str] = set()
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            attributes.add(node.attr)
        elif isinstance(node, ast.Subscript):
            names |= strings(node.slice)
        elif isinstance(node, ast.Call):
            callee = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
            if callee != "ConfigKey":
                for argument in node.args:
                    names |= strings(argument)
    return frozenset(attributes), frozenset(names)


def unread(readers: dict[str, tuple[str, ...]]) -> list[str]:
    missing = []
    for name, modules in sorted(readers.items()):
        for reader in modules:
            module, _, accessor = reader.partition(":")
            attributes, names = module_reads(module)
            read = accessor in attributes if accessor else name.replace(".", "_") in attributes or name in names
            if not read:
                missing.append(f"{name}: {reader} does not read it")
    return missing


@pytest.mark.parametrize("kind", sorted(ACCEPTED))
def test_the_code_said_to_govern_a_key_reads_it(kind: str) -> None:
    assert unread(CLASSIFIED[kind][0]) == []


def test_the_source_check_finds_a_reader_that_does_not_read() -> None:
    assert unread({"log.segment.bytes": ("kfk.server.metrics",), "max.connections": ("kfk.server.metrics",)}) == [
        "log.segment.bytes: kfk.server.metrics does not read it",
        "max.connections: kfk.server.metrics does not read it"]


#: Where a kind of key would be read: the broker's and topics' keys outside the client library, the client's inside
#: it (kfk.commands write configs, they do not act on them; kfk.config and kfk.config_support define them).
_KFK = Path(__file__).resolve().parent.parent / "kfk"
_NOT_READERS = ("protocol", "testing", "commands", "config.py", "config_support.py")
#: Attributes of another config object that share a name with a key kfk does not act on.
_HOMONYMS = {("request.timeout.ms", "backends/embedded/raft/replica.py"):
             "RaftConfig.request_timeout_ms: controller.quorum.request.timeout.ms"}


def config_reads(path: Path) -> set[str]:
    """The keys a module reads from an object named config or broker_config (`config.num_io_threads`,
    `self.config.num_io_threads`), and the strings it hands to a call or subscript other than a ConfigKey(...)."""
    read = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Attribute):
            receiver = node.value
            owner = receiver.id if isinstance(receiver, ast.Name) else getattr(receiver, "attr", "")
            if owner in ("config", "broker_config"):
                read.add(node.attr)
        elif isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
            read.add(node.slice.value)
        elif isinstance(node, ast.Call) and getattr(node.func, "id", None) != "ConfigKey":
            read |= {argument.value for argument in node.args if isinstance(argument, ast.Constant)}
    return read


def readers_of(names: Iterable[str], kind: str) -> list[str]:
    """`name: read by kfk/module.py` for each of `names` some module reads (config_reads)."""
    read_by = []
    for path in sorted(_KFK.rglob("*.py")):
        relative = path.relative_to(_KFK).as_posix()
        if relative.startswith(_NOT_READERS) or relative.startswith("client/") != (kind == "client"):
            continue
        reads = config_reads(path)
        read_by += [f"{name}: read by kfk/{relative}" for name in sorted(names)
                    if (name in reads or name.replace(".", "_") in reads) and (name, relative) not in _HOMONYMS]
    return read_by


@pytest.mark.parametrize("kind", sorted(ACCEPTED))
def test_no_code_reads_a_key_said_to_have_no_effect(kind: str) -> None:
    """A key kfk is said not to act on, read after all, is class (a): it must be reclassified (and not refused)."""
    assert readers_of(CLASSIFIED[kind][1], kind) == []


def _other_value(name: str) -> Any:
    """A valid value other than the default for a broker key that is the default of a topic key."""
    special = {"compression.type": "gzip", "compression.gzip.level": 5, "log.cleanup.policy": ["compact"],
               "log.message.timestamp.type": "LogAppendTime"}
    if name in special:
        return special[name]
    key = BROKER_CONFIG_DEF.keys[name]
    if key.type is ConfigType.BOOLEAN:
        return not key.default
    if key.type is ConfigType.DOUBLE:
        return key.default / 2
    if key.default is None:
        return 1000
    return key.default - 1 if key.default > 1000 else key.default + 1


#: The broker's defaults of topic configs that kfk acts on (log.local.retention.* are tiered storage's).
SYNONYMS = sorted({name for synonyms in TOPIC_CONFIG_SYNONYMS.values() for name in synonyms} - set(BROKER_UNSUPPORTED))


@pytest.mark.parametrize("name", SYNONYMS)
def test_a_broker_default_of_a_topic_config_reaches_the_topics_log_config(name: str) -> None:
    assert BROKER_KEY_READERS[name] == ("kfk.config",)
    default = BrokerConfig(KRAFT).log_config()
    changed = BrokerConfig({**KRAFT, name: _other_value(name)}).log_config()
    assert changed != default


# -- what happens to a key kfk does not act on -------------------------------------------------------------------

def test_a_feature_kfk_lacks_is_refused_at_start_up_in_one_line() -> None:
    config = BrokerConfig({**KRAFT, "remote.log.storage.system.enable": "true"})
    with pytest.raises(InvalidConfigurationError) as raised:
        config.check_supported()
    assert str(raised.value) == ("remote.log.storage.system.enable=true is not supported by kfk (feature: tiered "
                                 "storage (KIP-405)); remove it or leave it at its default")


def test_a_key_set_for_one_listener_is_checked_as_the_key() -> None:
    config = BrokerConfig({**KRAFT, "listener.name.sasl_plaintext.gssapi.sasl.kerberos.service.name": "kafka"})
    with pytest.raises(InvalidConfigurationError, match=r"^listener\.name\.sasl_plaintext\.gssapi\.sasl\.kerberos"
                                                        r"\.service\.name=kafka is not supported by kfk \(feature: "
                                                        r"SASL/GSSAPI \(Kerberos\)\)"):
        config.check_supported()


def test_a_java_plug_in_is_refused_unless_it_is_kafkas_own_class_for_what_kfk_does() -> None:
    with pytest.raises(InvalidConfigurationError, match="a Java plug-in class, which kfk cannot load"):
        BrokerConfig({**KRAFT, "principal.builder.class": "com.example.MyPrincipalBuilder"}).check_supported()
    with pytest.raises(InvalidConfigurationError, match="sasl.server.callback.handler.class=com.example.Handler"):
        BrokerConfig({**KRAFT, "sasl.server.callback.handler.class": "com.example.Handler"}).check_supported()
    for handler in OAUTHBEARER_VALIDATOR_CALLBACK_HANDLERS:
        name = "listener.name.sasl_ssl.oauthbearer.sasl.server.callback.handler.class"
        assert BrokerConfig({**KRAFT, name: handler}).check_supported() == []


def test_a_key_whose_job_kfk_does_anyway_is_warned_about_and_the_default_says_nothing() -> None:
    config = BrokerConfig({**KRAFT, "group.coordinator.threads": "16", "background.threads": "10", "ssl.provider": "",
                           "metric.reporters": "com.example.Reporter", "group.coordinator.rebalance.protocols":
                           "classic"})
    assert config.check_supported() == [
        "group.coordinator.threads=16 has no effect in kfk: kfk's broker is one asyncio event loop with executors, "
        "not Kafka's thread pools",
        "metric.reporters=com.example.Reporter has no effect in kfk: Java metrics reporters cannot be loaded; kfk "
        "serves its metrics in Prometheus text format on metrics.port"]


def test_the_settings_of_kafkas_sample_server_properties_start_with_warnings_only() -> None:
    """Kafka 4.0's config/server.properties (KRaft, one node) sizes the share coordinator's topic beside the others
    (kfk's share coordinator reads those sizes)."""
    sample = {"num.network.threads": "3", "num.io.threads": "8", "socket.send.buffer.bytes": "102400",
              "socket.receive.buffer.bytes": "102400", "socket.request.max.bytes": "104857600", "num.partitions": "1",
              "num.recovery.threads.per.data.dir": "1", "offsets.topic.replication.factor": "1",
              "share.coordinator.state.topic.replication.factor": "1", "share.coordinator.state.topic.min.isr": "1",
              "transaction.state.log.replication.factor": "1", "transaction.state.log.min.isr": "1",
              "log.retention.hours": "168", "log.segment.bytes": "1073741824",
              "log.retention.check.interval.ms": "300000"}
    warned = [line.split("=")[0] for line in BrokerConfig({**KRAFT, **sample}).check_supported()]
    assert warned == ["num.recovery.threads.per.data.dir"]


def test_every_key_kfk_does_not_act_on_is_accepted_at_its_default() -> None:
    props = {name: BROKER_CONFIG_DEF.keys[name].default for name in BROKER_UNSUPPORTED if name in
             BROKER_CONFIG_DEF.keys and BROKER_CONFIG_DEF.keys[name].default is not None}
    assert BrokerConfig({**KRAFT, **props}).check_supported() == []


def test_a_refused_value_is_refused_as_a_dynamic_broker_config_too() -> None:
    with pytest.raises(InvalidConfigurationError, match=r"^remote\.log\.manager\.copy\.max\.bytes\.per\.second=100 "
                                                        r"is not supported by kfk \(feature: tiered storage"):
        validate_dynamic_broker_configs({"remote.log.manager.copy.max.bytes.per.second": "100"}, per_broker=True)
    validate_dynamic_broker_configs({"num.io.threads": "4", "log.cleaner.threads": "2"}, per_broker=True)


def test_a_topic_config_of_a_feature_kfk_lacks_is_refused() -> None:
    with pytest.raises(InvalidConfigurationError, match=r"^remote\.log\.copy\.disable=true is not supported by kfk "
                                                        r"\(feature: tiered storage \(KIP-405\)\)"):
        LogConfig.from_properties({"remote.log.copy.disable": "true"})
    assert LogConfig.from_properties({"local.retention.ms": "-2", "leader.replication.throttled.replicas": "0:1"})


def test_a_java_client_key_kfks_client_ignores_is_warned_about_once(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="kfk.client.config"):
        ClientConfig(PRODUCER_CONFIG_DEF, "producer", {"ssl.protocol": "TLSv1.2", "linger.ms": 1})
        ClientConfig(PRODUCER_CONFIG_DEF, "producer", {"ssl.protocol": "TLSv1.3"})
    assert [record.getMessage().split(" has no effect")[0] for record in caplog.records] == ["ssl.protocol=TLSv1.2"]
