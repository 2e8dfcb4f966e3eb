"""`kfk perf-test produce|consume`: flags, Kafka's output lines, and --json."""

from __future__ import annotations

import json
import re

import pytest
from typer.testing import CliRunner

from kfk.cli import app
from tests.client.conftest import shared_broker, topic_name  # noqa: F401 - fixtures

runner = CliRunner()


@pytest.mark.parametrize("command", [["perf-test"], ["perf-test", "produce"], ["perf-test", "consume"]])
def test_help(command: list[str]) -> None:
    result = runner.invoke(app, [*command, "--help"])
    assert result.exit_code == 0 and "Usage:" in result.output


def test_produce_needs_exactly_one_payload_source() -> None:
    result = runner.invoke(app, ["perf-test", "produce", "--topic", "t", "--num-records", "1"])
    assert result.exit_code == 1 and "exactly one of --record-size and --payload-file" in result.output


def test_a_missing_payload_file_is_one_line(tmp_path) -> None:
    result = runner.invoke(app, ["perf-test", "produce", "--topic", "t", "--num-records", "1", "--payload-file",
                                 str(tmp_path / "none.txt")])
    assert result.exit_code == 1 and "cannot read" in result.output


@pytest.mark.integration
def test_produce_then_consume_prints_kafkas_lines(shared_broker, topic_name: str, tmp_path) -> None:  # noqa: F811
    flags = ["--bootstrap-server", shared_broker.bootstrap_servers]
    produced = runner.invoke(app, ["perf-test", "produce", "--topic", topic_name, "--num-records", "3000",
                                   "--record-size", "100", "--throughput", "-1", "--producer-props", "acks=1",
                                   "--producer-props", "linger.ms=5", *flags])
    assert produced.exit_code == 0, produced.output
    assert re.fullmatch(r"3000 records sent, [\d.]+ records/sec \([\d.]+ MB/sec\), [\d.]+ ms avg latency, "
                        r"[\d.]+ ms max latency, \d+ ms 50th, \d+ ms 95th, \d+ ms 99th, \d+ ms 99.9th\.\n",
                        produced.output)
    payloads = tmp_path / "payloads.txt"
    payloads.write_text("alpha\nbeta\ngamma\n")
    as_json = runner.invoke(app, ["perf-test", "produce", "--topic", topic_name, "--num-records", "1000",
                                  "--payload-file", str(payloads), "--throughput", "5000", "--json", *flags])
    result = json.loads(as_json.output)
    assert result["records"] == 1000 and result["elapsed_s"] >= 0.15, "the throttle holds 5000 records/s"
    consumed = runner.invoke(app, ["perf-test", "consume", "--topic", topic_name, "--messages", "4000", *flags])
    assert consumed.exit_code == 0, consumed.output
    header, values = consumed.output.splitlines()
    assert header.startswith("start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg")
    assert values.split(", ")[4] == "4000"
    # 3000 values of 100 B and 1000 lines of the payload file (4 or 5 B), no keys; MB with four decimals (~105 B)
    consumed_bytes = float(values.split(", ")[2]) * 1024 * 1024
    assert 3000 * 100 + 1000 * 4 - 105 <= consumed_bytes <= 3000 * 100 + 1000 * 5 + 105


def test_an_unreachable_server_fails_at_once() -> None:
    result = runner.invoke(app, ["perf-test", "produce", "--topic", "t", "--num-records", "1", "--record-size", "1",
                                 "--bootstrap-server", "127.0.0.1:1"])
    assert result.exit_code == 1 and result.output.startswith("kfk: cannot connect to any bootstrap server")
