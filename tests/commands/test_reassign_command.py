"""`kfk reassign-partitions` and `kfk leader-election`: help and clear errors for bad input (the cluster behaviour
is tested in tests/cluster/test_reassignment.py)."""

from __future__ import annotations

from typer.testing import CliRunner

from kfk.cli import app

runner = CliRunner()


def test_help() -> None:
    for command in ("reassign-partitions", "leader-election"):
        result = runner.invoke(app, [command, "--help"])
        assert result.exit_code == 0 and "Usage:" in result.output


def test_exactly_one_mode_is_required() -> None:
    result = runner.invoke(app, ["reassign-partitions", "--execute", "--verify"])
    assert result.exit_code == 1 and "exactly one of --generate, --execute, --verify, --cancel" in result.output


def test_a_bad_reassignment_file_is_explained(tmp_path) -> None:
    bad = tmp_path / "plan.json"
    bad.write_text("{not json")
    result = runner.invoke(app, ["reassign-partitions", "--bootstrap-server", "127.0.0.1:1", "--verify",
                                 "--reassignment-json-file", str(bad)])
    assert result.exit_code == 1 and "is not valid JSON" in result.output
    bad.write_text('{"version":1,"partitions":[{"topic":"t"}]}')
    result = runner.invoke(app, ["reassign-partitions", "--bootstrap-server", "127.0.0.1:1", "--verify",
                                 "--reassignment-json-file", str(bad)])
    assert result.exit_code == 1 and "not a reassignment JSON file" in result.output


def test_leader_election_needs_a_scope_and_a_known_type() -> None:
    result = runner.invoke(app, ["leader-election", "--election-type", "preferred"])
    assert result.exit_code == 1 and "--all-topic-partitions" in result.output
    result = runner.invoke(app, ["leader-election", "--election-type", "random", "--all-topic-partitions"])
    assert result.exit_code == 1 and "preferred or unclean" in result.output
