"""`kfk consumer-groups`: flag checks, then list/describe/reset/delete against a real broker."""

from __future__ import annotations

import json
import time

import pytest
from typer.testing import CliRunner

from kfk.cli import app
from kfk.client import Admin, Consumer, NewTopic, Producer, TopicPartition
from tests.client.conftest import shared_broker, topic_name  # noqa: F401 - fixtures

runner = CliRunner()


def test_help() -> None:
    result = runner.invoke(app, ["consumer-groups", "--help"])
    assert result.exit_code == 0
    for flag in ("--list", "--describe", "--reset-offsets", "--delete", "--to-earliest", "--shift-by", "--execute"):
        assert flag in result.output


@pytest.mark.parametrize(("args", "message"), [
    ([], "give exactly one of --list, --describe, --reset-offsets, --delete"),
    (["--list", "--describe"], "give exactly one of"),
    (["--describe"], "--describe needs --group"),
    (["--reset-offsets", "--group", "g", "--topic", "t"], "needs exactly one of --to-earliest"),
    (["--reset-offsets", "--group", "g", "--to-earliest"], "needs --topic or --all-topics"),
    (["--reset-offsets", "--group", "g", "--all-topics", "--to-latest", "--dry-run", "--execute"],
     "--dry-run and --execute cannot be used together"),
    (["--reset-offsets", "--group", "g", "--all-topics", "--to-datetime", "yesterday"], "is not in the format"),
])
def test_bad_flag_combinations_are_one_line(args: list[str], message: str) -> None:
    result = runner.invoke(app, ["consumer-groups", *args])
    assert result.exit_code == 1 and message in result.output
    assert len(result.output.strip().splitlines()) == 1


@pytest.mark.integration
def test_describe_reset_and_delete_a_group(shared_broker, topic_name: str) -> None:  # noqa: F811
    bootstrap = shared_broker.bootstrap_servers
    flags = ["--bootstrap-server", bootstrap]
    group = f"g-{topic_name}"
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(topic_name, 2, 1)])
    with Producer({"bootstrap.servers": bootstrap}) as producer:
        for n in range(20):
            producer.send(topic_name, b"v", partition=n % 2)
    with Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                   "heartbeat.interval.ms": 100}) as consumer:
        consumer.subscribe([topic_name])
        deadline = time.monotonic() + 10
        seen = 0
        while seen < 15 and time.monotonic() < deadline:
            seen += len(consumer.poll(0.2, max_records=15 - seen))
        consumer.commit_sync()
        active = runner.invoke(app, ["consumer-groups", "--describe", "--group", group, *flags, "--json"])
        assert active.exit_code == 0
        members = json.loads(active.output)[0]["members"]
        assert len(members) == 1 and len(members[0]["partitions"]) == 2
        refused = runner.invoke(app, ["consumer-groups", "--reset-offsets", "--group", group, "--all-topics",
                                      "--to-earliest", "--execute", *flags])
        assert refused.exit_code == 1 and "inactive" in refused.output and "Stable" in refused.output

    assert group in runner.invoke(app, ["consumer-groups", "--list", *flags]).output.split()
    described = runner.invoke(app, ["consumer-groups", "--describe", "--group", group, *flags, "--json"])
    rows = json.loads(described.output)[0]["offsets"]
    assert sum(row["lag"] for row in rows) == 5 and all(row["log_end_offset"] == 10 for row in rows)
    text = runner.invoke(app, ["consumer-groups", "--describe", "--group", group, *flags])
    assert "LOG-END-OFFSET" in text.output and "has no active members" in text.output

    dry = runner.invoke(app, ["consumer-groups", "--reset-offsets", "--group", group, "--topic",
                              f"{topic_name}:1", "--to-offset", "3", *flags, "--json"])
    assert json.loads(dry.stdout) == [{"group": group, "topic": topic_name, "partition": 1, "new_offset": 3}]
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        committed = admin.list_consumer_group_offsets(group)
    assert sum(offset.offset for offset in committed.values()) == 15, "a dry run changes nothing"

    executed = runner.invoke(app, ["consumer-groups", "--reset-offsets", "--group", group, "--all-topics",
                                   "--shift-by", "-100", "--execute", *flags])
    assert executed.exit_code == 0 and "NEW-OFFSET" in executed.output
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        assert {offset.offset for offset in admin.list_consumer_group_offsets(group).values()} == {0}

    latest = runner.invoke(app, ["consumer-groups", "--reset-offsets", "--group", group, "--topic", topic_name,
                                 "--to-latest", "--execute", *flags])
    assert latest.exit_code == 0
    rows = json.loads(runner.invoke(app, ["consumer-groups", "--describe", "--group", group, *flags,
                                          "--json"]).output)[0]["offsets"]
    assert [row["lag"] for row in rows] == [0, 0]

    deleted = runner.invoke(app, ["consumer-groups", "--delete", "--group", group, *flags])
    assert deleted.exit_code == 0 and "was successful" in deleted.output
    missing = runner.invoke(app, ["consumer-groups", "--delete", "--group", group, *flags])
    assert missing.exit_code == 1 and missing.output.startswith("kfk: ")


@pytest.mark.integration
def test_reset_to_datetime(shared_broker, topic_name: str) -> None:  # noqa: F811
    bootstrap = shared_broker.bootstrap_servers
    group = f"g-{topic_name}"
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(topic_name, 1, 1)])
    base = 1_700_000_000_000  # 2023-11-14T22:13:20Z
    with Producer({"bootstrap.servers": bootstrap}) as producer:
        for n in range(10):
            producer.send(topic_name, b"v", timestamp_ms=base + n * 60_000)
    result = runner.invoke(app, ["consumer-groups", "--reset-offsets", "--group", group, "--topic", topic_name,
                                 "--to-datetime", "2023-11-14T22:16:00.000+00:00", "--execute", "--json",
                                 "--bootstrap-server", bootstrap])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)[0]["new_offset"] == 3
    with Consumer({"bootstrap.servers": bootstrap, "group.id": group}) as consumer:
        assert consumer.committed([TopicPartition(topic_name, 0)])[TopicPartition(topic_name, 0)].offset == 3
