"""`kfk configs`: flag checks and describe/alter of topic and broker configs against a real broker."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from kfk.cli import app
from tests.client.conftest import shared_broker, topic_name  # noqa: F401 - fixtures

runner = CliRunner()


def test_help() -> None:
    result = runner.invoke(app, ["configs", "--help"])
    assert result.exit_code == 0
    for flag in ("--describe", "--alter", "--entity-type", "--entity-name", "--add-config", "--delete-config"):
        assert flag in result.output


@pytest.mark.parametrize(("args", "message"), [
    ([], "give exactly one of --describe and --alter"),
    (["--describe", "--entity-type", "ips", "--entity-name", "x"], "--entity-type must be one of"),
    (["--describe", "--entity-type", "client-metrics", "--entity-name", "x"],
     "kfk keeps no ip quotas or client metrics"),
    (["--describe", "--group", "g", "--topic", "t"], "name one entity"),
    (["--alter", "--entity-type", "groups", "--entity-default", "--add-config", "a=1"],
     "--entity-default applies to brokers, not groups"),
    (["--alter", "--entity-type", "clients", "--add-config", "producer_byte_rate=1"], "--alter needs an entity name"),
    (["--alter", "--client", "c", "--add-config", "producer_byte_rate=fast"],
     "Cannot parse quota configuration value for producer_byte_rate: fast"),
    (["--describe", "--client", "c", "--topic", "t"], "name one entity"),
    (["--describe", "--user", "u", "--user-defaults"], "not both"),
    (["--describe", "--topic", "t", "--broker", "1"], "name one entity"),
    (["--describe", "--broker", "one"], "a broker is named by its id (a number), not 'one'"),
    (["--alter", "--entity-type", "brokers", "--add-config", "a=1"], "--alter needs an entity name"),
    (["--alter", "--entity-name", "t"], "--alter needs --add-config or --delete-config"),
    (["--alter", "--entity-name", "t", "--add-config", "novalue"], "--add-config expects key=value"),
    (["--describe", "--entity-name", "t", "--add-config", "a=1"], "go with --alter"),
    (["--describe", "--entity-default"], "--entity-default applies to brokers"),
])
def test_bad_flags_are_one_line(args: list[str], message: str) -> None:
    result = runner.invoke(app, ["configs", *args])
    assert result.exit_code == 1 and message in result.output


@pytest.mark.integration
def test_alter_and_describe_topic_configs(shared_broker, topic_name: str) -> None:  # noqa: F811
    flags = ["--bootstrap-server", shared_broker.bootstrap_servers]
    runner.invoke(app, ["topics", "create", "--topic", topic_name, *flags])
    entity = ["--entity-type", "topics", "--entity-name", topic_name]
    altered = runner.invoke(app, ["configs", "--alter", *entity, "--add-config",
                                  "retention.ms=1000,cleanup.policy=[compact,delete]", *flags])
    assert altered.exit_code == 0 and altered.output == f"Completed updating config for topic {topic_name}.\n"
    described = runner.invoke(app, ["configs", "--describe", *entity, *flags])
    assert described.output.splitlines()[0] == f"Dynamic configs for topic {topic_name} are:"
    assert "  retention.ms=1000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=1000" in described.output
    assert "cleanup.policy=compact,delete" in described.output

    runner.invoke(app, ["configs", "--alter", *entity, "--delete-config", "retention.ms", *flags])
    remaining = json.loads(runner.invoke(app, ["configs", "--describe", *entity, *flags, "--json"]).output)
    assert [entry["name"] for entry in remaining] == ["cleanup.policy"]
    everything = json.loads(runner.invoke(app, ["configs", "--describe", "--all", *entity, *flags, "--json"]).output)
    retention = next(entry for entry in everything if entry["name"] == "retention.ms")
    assert retention["source"] == "DEFAULT_CONFIG" and retention["value"] == "604800000"

    bad = runner.invoke(app, ["configs", "--alter", *entity, "--add-config", "no.such.config=1", *flags])
    assert bad.exit_code == 1 and bad.output.startswith("kfk: ") and "no.such.config" in bad.output
    missing = runner.invoke(app, ["configs", "--describe", "--entity-name", "no-such-topic-x", *flags])
    assert missing.exit_code == 1 and "does not exist" in missing.output


@pytest.mark.integration
def test_describe_broker_configs(shared_broker) -> None:  # noqa: F811
    flags = ["--bootstrap-server", shared_broker.bootstrap_servers]
    result = runner.invoke(app, ["configs", "--describe", "--entity-type", "brokers", "--entity-name", "1", "--all",
                                 *flags])
    assert result.exit_code == 0 and result.output.startswith("All configs for broker 1 are:")
    assert "num.partitions=" in result.output
    assert "  log.roll.ms=null sensitive=false synonyms={}\n" in result.output  # unset: null, as Kafka prints it


@pytest.mark.integration
def test_an_unknown_broker_id_is_one_line(shared_broker) -> None:  # noqa: F811
    result = runner.invoke(app, ["configs", "--describe", "--entity-type", "brokers", "--entity-name", "7",
                                 "--bootstrap-server", shared_broker.bootstrap_servers])
    assert result.exit_code == 1 and result.output == "kfk: broker 7 is not in the cluster (brokers: 1)\n"
