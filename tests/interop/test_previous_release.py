"""The release-to-release check: the clients of the Apache Kafka release kfk spoke before (PREVIOUS_APACHE_KAFKA_VERSION,
4.0.2) still work against kfk, which advertises Kafka 4.4's versions. Kafka 4.0.2's console producer and consumer
pick the highest versions both sides know, which are no longer kfk's highest: Produce v12 (topics by name, where a
4.4 client sends ids), Fetch v17, OffsetCommit/OffsetFetch v9 (the consumer's group commits), ApiVersions v4."""

from __future__ import annotations

import pytest

from kfk.testing.apache_kafka import PREVIOUS_APACHE_KAFKA_VERSION, run_kafka_tool
from kfk.testing.broker import BrokerProcess
from tests.interop.jvm import kfk_server, unique_name  # noqa: F401

pytestmark = pytest.mark.integration


def previous_tool(tool: str, args: list[str], *, input: str | None = None) -> str:
    """One of Kafka 4.0.2's kafka-*.sh tools; it must exit 0. Its stdout."""
    result = run_kafka_tool(tool, args, version=PREVIOUS_APACHE_KAFKA_VERSION, input=input, timeout=180)
    assert result.returncode == 0, f"kafka-{tool} {PREVIOUS_APACHE_KAFKA_VERSION} {args} exited " \
                                   f"{result.returncode}:\n{result.stdout}\n{result.stderr}"
    return result.stdout


def test_kafka_4_0_clients_produce_consume_and_commit(kfk_server: BrokerProcess) -> None:  # noqa: F811
    bootstrap = kfk_server.bootstrap_servers
    topic, group = unique_name("previous-release"), unique_name("previous-release-group")
    previous_tool("topics", ["--bootstrap-server", bootstrap, "--create", "--topic", topic, "--partitions", "2"])
    values = [f"value-{index}" for index in range(10)]
    previous_tool("console-producer", ["--bootstrap-server", bootstrap, "--topic", topic],
                  input="".join(f"{value}\n" for value in values))
    consumed = previous_tool("console-consumer", ["--bootstrap-server", bootstrap, "--topic", topic, "--group", group,
                                                  "--from-beginning", "--max-messages", str(len(values)),
                                                  "--timeout-ms", "60000"])
    assert sorted(consumed.split()) == sorted(values)
    described = previous_tool("consumer-groups", ["--bootstrap-server", bootstrap, "--describe", "--group", group])
    # The group's committed offsets add up to every record produced (LAG 0 on each partition).
    rows = [line.split() for line in described.splitlines() if line.startswith(group)]
    assert len(rows) == 2 and sum(int(row[3]) for row in rows) == len(values)
    assert all(row[5] == "0" for row in rows)
