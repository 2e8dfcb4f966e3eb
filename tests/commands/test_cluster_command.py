"""`kfk cluster describe`: help, flags and one-line errors (the statistics themselves are checked on a real
three-broker cluster in tests/cluster/test_cluster_describe.py and against the notes in
tests/client/test_cluster_statistics.py); and the output formats against one broker."""

from __future__ import annotations

import json
import subprocess
import sys

from typer.testing import CliRunner

from kfk.cli import app
from tests.client.conftest import shared_broker  # noqa: F401 - fixture

runner = CliRunner()


def test_help() -> None:
    result = runner.invoke(app, ["cluster", "describe", "--help"])
    assert result.exit_code == 0
    for flag in ("--bootstrap-server", "--output", "--json", "--exclude-internal", "--command-config"):
        assert flag in result.output


def test_an_unknown_output_format_is_refused() -> None:
    result = runner.invoke(app, ["cluster", "describe", "--output", "yaml"])
    assert result.exit_code == 2 and "yaml" in result.output


def test_an_unreachable_bootstrap_server_is_one_line_without_traceback() -> None:
    result = subprocess.run([sys.executable, "-m", "kfk", "cluster", "describe", "--bootstrap-server", "127.0.0.1:1"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert result.stdout == ""
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr
    assert result.stderr.startswith("kfk: cannot connect")


def test_one_broker_json_and_tables(shared_broker) -> None:  # noqa: F811 - fixture
    bootstrap = shared_broker.bootstrap_servers
    created = runner.invoke(app, ["topics", "create", "--topic", "cluster-cmd", "--partitions", "2",
                                  "--bootstrap-server", bootstrap])
    assert created.exit_code == 0, created.output
    result = runner.invoke(app, ["cluster", "describe", "--bootstrap-server", bootstrap, "--json"])
    assert result.exit_code == 0, result.output
    stats = json.loads(result.output)
    assert [(b["broker_id"], b["online"]) for b in stats["brokers"]] == [(1, True)]
    assert stats["controller_id"] == 1
    topic = next(t for t in stats["topics"] if t["topic"] == "cluster-cmd")
    assert (topic["partition_count"], topic["replication"], topic["brokers_spread_percent"],
            topic["preferred_replicas_percent"], topic["sum_of_partition_offsets"]) == (2, 1, 100, 100, 0)
    tables = runner.invoke(app, ["cluster", "describe", "--bootstrap-server", bootstrap])
    assert tables.exit_code == 0, tables.output
    for title in ("Cluster", "Brokers", "Topics", "Topics by broker", "Consumer groups"):
        assert title in tables.output.splitlines()
