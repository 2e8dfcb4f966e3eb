"""`kfk topics`: help, flags, one-line errors, and each action against a real broker."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from kfk.cli import app
from tests.client.conftest import shared_broker, topic_name  # noqa: F401 - fixtures

runner = CliRunner()

ACTIONS = ["create", "list", "describe", "delete", "alter"]


@pytest.mark.parametrize("command", [["topics"]] + [["topics", action] for action in ACTIONS],
                         ids=lambda c: " ".join(c))
def test_help(command: list[str]) -> None:
    result = runner.invoke(app, [*command, "--help"])
    assert result.exit_code == 0 and "Usage:" in result.output
    if len(command) == 2 and command[1] != "list":
        assert "--bootstrap-server" in result.output


def test_create_needs_a_topic() -> None:
    result = runner.invoke(app, ["topics", "create"])
    assert result.exit_code == 2 and "--topic" in result.output


def test_bad_config_flag_is_one_line() -> None:
    result = runner.invoke(app, ["topics", "create", "--topic", "t", "--config", "noequals"])
    assert result.exit_code == 1
    assert result.output.strip() == "kfk: --config expects key=value, got 'noequals'"


def test_an_unreachable_bootstrap_server_is_one_line_without_traceback() -> None:
    result = runner.invoke(app, ["topics", "list", "--bootstrap-server", "127.0.0.1:1"])
    assert result.exit_code == 1
    assert result.output.startswith("kfk: cannot connect to any bootstrap server (127.0.0.1:1)")
    assert "Traceback" not in result.output and len(result.output.strip().splitlines()) == 1


def test_debug_shows_the_exception() -> None:
    from kfk.errors import NetworkError

    result = runner.invoke(app, ["topics", "list", "--bootstrap-server", "127.0.0.1:1", "--debug"])
    assert result.exit_code == 1 and isinstance(result.exception, NetworkError)


@pytest.mark.integration
def test_create_list_describe_alter_delete(shared_broker, topic_name: str) -> None:  # noqa: F811
    bootstrap = ["--bootstrap-server", shared_broker.bootstrap_servers]
    created = runner.invoke(app, ["topics", "create", "--topic", topic_name, "--partitions", "2",
                                  "--replication-factor", "1", "--config", "retention.ms=5000", *bootstrap])
    assert created.exit_code == 0 and created.output == f"Created topic {topic_name}.\n"
    again = runner.invoke(app, ["topics", "create", "--topic", topic_name, *bootstrap])
    assert again.exit_code == 1 and "already exists" in again.output
    assert runner.invoke(app, ["topics", "create", "--topic", topic_name, "--if-not-exists", *bootstrap]).exit_code == 0
    assert topic_name in runner.invoke(app, ["topics", "list", *bootstrap]).output.split()

    described = runner.invoke(app, ["topics", "describe", "--topic", topic_name, *bootstrap, "--json"])
    assert described.exit_code == 0
    [entry] = json.loads(described.output)
    assert entry["partition_count"] == 2 and entry["replication_factor"] == 1
    # Configs not at their default, as kafka-topics.sh lists them: the topic's own and the cluster-wide
    # min.insync.replicas that eligible leader replicas keep (a dynamic default).
    assert entry["configs"] == {"min.insync.replicas": "1", "retention.ms": "5000"} and len(entry["topic_id"]) == 22
    assert [p["leader"] for p in entry["partitions"]] == [1, 1]
    text = runner.invoke(app, ["topics", "describe", "--topic", topic_name, *bootstrap]).output
    assert f"Topic: {topic_name}" in text and "PartitionCount: 2" in text and "retention.ms=5000" in text
    under = runner.invoke(app, ["topics", "describe", "--under-replicated-partitions", *bootstrap])
    assert under.exit_code == 0 and topic_name not in under.output

    altered = runner.invoke(app, ["topics", "alter", "--topic", topic_name, "--partitions", "3", *bootstrap])
    assert altered.exit_code == 0
    shrink = runner.invoke(app, ["topics", "alter", "--topic", topic_name, "--partitions", "1", *bootstrap])
    assert shrink.exit_code == 1 and "kfk: " in shrink.output and "Traceback" not in shrink.output

    assert runner.invoke(app, ["topics", "delete", "--topic", topic_name, *bootstrap]).exit_code == 0
    missing = runner.invoke(app, ["topics", "describe", "--topic", topic_name, *bootstrap])
    assert missing.exit_code == 1 and missing.output == f"kfk: topic '{topic_name}' does not exist\n"
    assert runner.invoke(app, ["topics", "delete", "--topic", topic_name, "--if-exists", *bootstrap]).exit_code == 0
    gone = runner.invoke(app, ["topics", "delete", "--topic", topic_name, *bootstrap])
    assert gone.exit_code == 1 and "does not exist" in gone.output


@pytest.mark.integration
def test_an_invalid_topic_config_is_one_line(shared_broker, topic_name: str) -> None:  # noqa: F811
    result = runner.invoke(app, ["topics", "create", "--topic", topic_name, "--config", "retention.ms=soon",
                                 "--bootstrap-server", shared_broker.bootstrap_servers])
    assert result.exit_code == 1 and "retention.ms" in result.output
    assert len(result.output.strip().splitlines()) == 1
