"""`kfk console-produce` / `kfk console-consume`: Kafka's line reader and message formatter, exit paths and
summary line, against a real broker."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from kfk.cli import app
from kfk.client.structs import ConsumerRecord
from kfk.commands.console import LineReader, MessageFormatter
from tests.client.conftest import shared_broker, topic_name  # noqa: F401 - fixtures

runner = CliRunner()


@pytest.mark.parametrize("command", ["console-produce", "console-consume"])
def test_help(command: str) -> None:
    result = runner.invoke(app, [command, "--help"])
    assert result.exit_code == 0 and "--topic" in result.stdout and "--bootstrap-server" in result.stdout


def test_line_reader_splits_headers_key_and_value_like_kafka() -> None:
    reader = LineReader({"parse.key": "true", "key.separator": ":", "parse.headers": "true",
                         "null.marker": "<null>"})
    assert reader.parse(b"h1:v1,h2:v2\tk:value", 1) == (b"k", b"value", [("h1", b"v1"), ("h2", b"v2")])
    assert reader.parse(b"\t<null>:v", 2) == (None, b"v", [])
    with pytest.raises(ValueError, match="no key separator found on line number 3"):
        LineReader({"parse.key": "true"}).parse(b"just a value", 3)
    assert LineReader({}).parse(b"a\tb", 4) == (None, b"a\tb", [])


def test_message_formatter_prints_fields_in_kafkas_order() -> None:
    record = ConsumerRecord("t", 2, 7, 1000, 0, b"k", b"v", [("a", b"1"), ("b", None)])
    everything = MessageFormatter({name: "true" for name in ("print.timestamp", "print.partition", "print.offset",
                                                             "print.headers", "print.key")})
    assert everything.format(record) == b"CreateTime:1000\tPartition:2\tOffset:7\ta:1,b:null\tk\tv\n"
    keyed = MessageFormatter({"print.key": "true", "key.separator": " => ", "print.value": "true"})
    assert keyed.format(record._replace(key=None)) == b"null => v\n"
    assert MessageFormatter({}).format(record._replace(value=None)) == b"null\n"
    assert MessageFormatter({"print.headers": "true"}).format(record._replace(headers=[])) == b"NO_HEADERS\tv\n"


@pytest.mark.parametrize(("args", "message"), [
    (["--offset", "5"], "--offset needs --partition"),
    (["--partition", "0", "--offset", "soon"], "--offset must be earliest, latest or a non-negative number"),
    (["--group", "g", "--partition", "0"], "--group and --partition cannot be used together"),
])
def test_bad_consume_flags_are_one_line(args: list[str], message: str) -> None:
    result = runner.invoke(app, ["console-consume", "--topic", "t", *args])
    assert result.exit_code == 1 and message in result.stderr and "Traceback" not in result.stderr


def test_consume_from_an_unreachable_server_is_one_line() -> None:
    result = runner.invoke(app, ["console-consume", "--topic", "t", "--bootstrap-server", "127.0.0.1:1"])
    assert result.exit_code == 1 and result.stderr.startswith("kfk: cannot connect to any bootstrap server")


@pytest.mark.integration
def test_produce_lines_then_consume_them_back(shared_broker, topic_name: str) -> None:  # noqa: F811
    bootstrap = ["--bootstrap-server", shared_broker.bootstrap_servers]
    assert runner.invoke(app, ["topics", "create", "--topic", topic_name, "--partitions", "1", *bootstrap]
                         ).exit_code == 0
    lines = "".join(f"key{n}:value {n}\n" for n in range(50))
    produced = runner.invoke(app, ["console-produce", "--topic", topic_name, "--property", "parse.key=true",
                                   "--property", "key.separator=:", "--compression-codec", "lz4",
                                   "--request-required-acks", "1", *bootstrap], input=lines)
    assert produced.exit_code == 0, produced.stderr
    synced = runner.invoke(app, ["console-produce", "--topic", topic_name, "--sync", *bootstrap], input="last\n")
    assert synced.exit_code == 0

    consumed = runner.invoke(app, ["console-consume", "--topic", topic_name, "--from-beginning", "--timeout-ms",
                                   "1500", "--property", "print.key=true", "--property", "print.offset=true",
                                   *bootstrap])
    assert consumed.exit_code == 0, consumed.stderr
    lines_out = consumed.stdout.splitlines()
    assert lines_out[:2] == ["Offset:0\tkey0\tvalue 0", "Offset:1\tkey1\tvalue 1"]
    assert lines_out[-1] == "Offset:50\tnull\tlast" and len(lines_out) == 51
    assert consumed.stderr.strip().endswith("Processed a total of 51 messages")

    limited = runner.invoke(app, ["console-consume", "--topic", topic_name, "--partition", "0", "--offset", "48",
                                  "--max-messages", "2", *bootstrap])
    assert limited.exit_code == 0 and limited.stdout.splitlines() == ["value 48", "value 49"]
    assert "Processed a total of 2 messages" in limited.stderr


@pytest.mark.integration
def test_consume_waits_for_an_unknown_topic_until_timeout_ms(shared_broker) -> None:  # noqa: F811
    """Kafka's console consumer waits for a missing topic (tests/e2e/test_kafka_flags.py sees one arrive); with
    allow.auto.create.topics=false it creates none, and --timeout-ms ends the wait as it ends an idle read."""
    result = runner.invoke(app, ["console-consume", "--topic", "no-such-topic-here", "--timeout-ms", "500",
                                 "--consumer-property", "allow.auto.create.topics=false", "--bootstrap-server",
                                 shared_broker.bootstrap_servers])
    assert result.exit_code == 0 and result.stderr == "Processed a total of 0 messages\n"
    topics = runner.invoke(app, ["topics", "list", "--bootstrap-server", shared_broker.bootstrap_servers])
    assert topics.exit_code == 0 and "no-such-topic-here" not in topics.stdout


def test_produce_to_an_unreachable_server_fails_at_once() -> None:
    result = runner.invoke(app, ["console-produce", "--topic", "t", "--bootstrap-server", "127.0.0.1:1"], input="x\n")
    assert result.exit_code == 1 and result.stderr.startswith("kfk: cannot connect to any bootstrap server")


def test_doubles_print_as_java_prints_them() -> None:
    from kfk.commands.record_formats import java_double

    values = (1.0, 100.0, 0.5, 0.001, 0.0001, 1e7, 9999999.0, 1.5e-5, -0.0, 12345678.9, -2.5e300, float("nan"))
    assert [java_double(value) for value in values] == [
        "1.0", "100.0", "0.5", "0.001", "1.0E-4", "1.0E7", "9999999.0", "1.5E-5", "-0.0", "1.23456789E7",
        "-2.5E300", "NaN"]
