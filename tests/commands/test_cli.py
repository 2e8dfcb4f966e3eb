"""The CLI's surface: help for every command, version, and one clear line for bad input."""

from __future__ import annotations

import subprocess
import sys

import pytest
from typer.testing import CliRunner

from kfk import KAFKA_PROTOCOL, __version__
from kfk.cli import app

runner = CliRunner()

COMMANDS = [[], ["server"], ["server", "start"], ["server", "stop"], ["storage"], ["storage", "format"],
            ["storage", "random-uuid"]]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c) or "kfk")
def test_every_command_has_help(command: list[str]) -> None:
    result = runner.invoke(app, [*command, "--help"])
    assert result.exit_code == 0, result.output
    assert "Usage:" in result.output


def test_version() -> None:
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.output.strip() == f"kfk {__version__} (Kafka {KAFKA_PROTOCOL} protocol)"


def test_python_dash_m_runs_the_same_cli() -> None:
    completed = subprocess.run([sys.executable, "-m", "kfk", "--version"], capture_output=True, text=True, timeout=30)
    assert completed.returncode == 0
    assert completed.stdout.strip() == f"kfk {__version__} (Kafka {KAFKA_PROTOCOL} protocol)"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["server", "start", "--override", "num.partitions=many"], "Invalid value many for configuration num.partitions"),
        (["server", "start", "--override", "novalue"], "--override expects key=value"),
        (["server", "start", "/nonexistent/server.properties"], "cannot read /nonexistent/server.properties"),
        (["server", "stop", "--log-dir", "/nonexistent"], "no running broker found"),
    ],
)
def test_bad_input_prints_one_line_and_fails(args: list[str], message: str) -> None:
    result = runner.invoke(app, args)
    assert result.exit_code == 1
    assert message in result.output
    assert "Traceback" not in result.output


def test_storage_format_writes_meta_properties_and_refuses_twice(tmp_path) -> None:
    log_dir = tmp_path / "data"
    args = ["storage", "format", "--cluster-id", "AAAAAAAAAAAAAAAAAAAAAA", "--override", f"log.dirs={log_dir}"]
    first = runner.invoke(app, args)
    assert first.exit_code == 0, first.output
    meta = (log_dir / "meta.properties").read_text()
    assert "cluster.id=AAAAAAAAAAAAAAAAAAAAAA" in meta and "node.id=1" in meta and "version=1" in meta
    second = runner.invoke(app, args)
    assert second.exit_code == 1
    assert "already formatted" in second.output
    assert runner.invoke(app, [*args, "--ignore-formatted"]).exit_code == 0


def test_random_uuid_is_a_kafka_style_id() -> None:
    result = runner.invoke(app, ["storage", "random-uuid"])
    assert result.exit_code == 0
    text = result.output.strip()
    assert len(text) == 22 and not text.startswith("-")


def test_server_start_without_properties_does_not_delay_new_groups(tmp_path) -> None:
    """As Kafka's sample server.properties: group.initial.rebalance.delay.ms=0, said in the start-up line and
    reported by DescribeConfigs as set (not Kafka's built-in 3000)."""
    from confluent_kafka.admin import AdminClient, ConfigResource

    from kfk.testing.broker import start_broker

    broker = start_broker(tmp_path)
    try:
        assert "group.initial.rebalance.delay.ms=0" in broker.output()
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        resource = ConfigResource(ConfigResource.Type.BROKER, str(broker.node_id))
        entries = admin.describe_configs([resource])[resource].result(timeout=20)
        assert entries["group.initial.rebalance.delay.ms"].value == "0"
    finally:
        assert broker.stop() == 0
