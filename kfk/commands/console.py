"""`kfk console-produce` and `kfk console-consume`: kafka-console-producer.sh / kafka-console-consumer.sh.

console-produce sends each stdin line as a record; ``--property parse.key=true`` splits the key off at
``key.separator`` (default a tab), ``parse.headers=true`` reads ``h1:v1,h2:v2`` headers before the key, as Kafka's
LineMessageReader does. console-consume prints records as Kafka's DefaultMessageFormatter does (``print.key``,
``print.timestamp``, ``print.partition``, ``print.offset``, ``print.headers``, ``key.separator``...), and ends
with "Processed a total of N messages" on stderr; --max-messages, --timeout-ms and Ctrl-C all end it cleanly.
Values are written as raw bytes: what was produced is what is printed. Without --group, console-consume assigns
itself every partition of the topic instead of joining a throw-away "console-consumer-NNNN" group as Kafka's tool
does, so reading a topic leaves no group behind.
"""

from __future__ import annotations

import sys
import time
from typing import Annotated, Any, Optional

import typer

from kfk.commands.client_options import (
    DEFAULT_BOOTSTRAP_SERVER,
    BootstrapServer,
    Debug,
    IsolationLevel,
    Topic,
    check_topic_writable,
    client_config,
    client_errors,
    parse_key_values,
)
from kfk.commands.errors import fail

app = typer.Typer()

Properties = Annotated[Optional[list[str]], typer.Option(
    "--property", help="A reader/formatter property key=value (repeatable), e.g. parse.key=true.")]

_TRUE = ("true", "1", "yes")


def _unescape(text: str) -> str:
    """Separators are given as shell arguments: accept \\t and \\n as Kafka users type them."""
    return text.encode("utf-8").decode("unicode_escape")


# --- produce -------------------------------------------------------------------------------------------------------

class LineReader:
    """Kafka's LineMessageReader: a line is ``[headers<headers.delimiter>][key<key.separator>]value``."""

    def __init__(self, properties: dict[str, str]) -> None:
        self.parse_key = properties.get("parse.key", "false").lower() in _TRUE
        self.key_separator = _unescape(properties.get("key.separator", "\t")).encode()
        self.parse_headers = properties.get("parse.headers", "false").lower() in _TRUE
        self.headers_delimiter = _unescape(properties.get("headers.delimiter", "\t")).encode()
        self.headers_separator = _unescape(properties.get("headers.separator", ",")).encode()
        self.headers_key_separator = _unescape(properties.get("headers.key.separator", ":")).encode()
        self.null_marker = properties.get("null.marker")
        self.ignore_error = properties.get("ignore.error", "false").lower() in _TRUE

    def parse(self, line: bytes, number: int) -> tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]]]:
        headers: list[tuple[str, bytes | None]] = []
        if self.parse_headers:
            head, found, line = line.partition(self.headers_delimiter)
            if not found:
                if not self.ignore_error:
                    raise ValueError(f"no headers delimiter found on line number {number}: {line!r}")
                head, line = b"", head
            for header in filter(None, head.split(self.headers_separator)):
                name, _, value = header.partition(self.headers_key_separator)
                headers.append((name.decode("utf-8"), self._null(value)))
        key: bytes | None = None
        if self.parse_key:
            key, found, line = line.partition(self.key_separator)
            if not found:
                if not self.ignore_error:
                    raise ValueError(f"no key separator found on line number {number}: {key!r}")
                key, line = None, key
            key = self._null(key)
        return key, self._null(line), headers

    def _null(self, value: bytes | None) -> bytes | None:
        if value is not None and self.null_marker is not None and value == self.null_marker.encode():
            return None
        return value


@app.command("console-produce")
def console_produce(
    topic: Topic,
    property: Properties = None,
    compression_codec: Annotated[Optional[str], typer.Option(
        "--compression-codec", help="none, gzip, snappy, lz4 or zstd.")] = None,
    request_required_acks: Annotated[str, typer.Option(
        "--request-required-acks", help="0, 1, -1 or all.")] = "-1",
    sync: Annotated[bool, typer.Option("--sync", help="Wait for each record's acknowledgement before the next.")
                    ] = False,
    producer_property: Annotated[Optional[list[str]], typer.Option(
        "--producer-property", help="A producer config key=value (repeatable).")] = None,
    producer_config: Annotated[Optional[str], typer.Option("--producer.config", "--producer-config",
                                                           help="A producer properties file.")] = None,
    bootstrap_server: BootstrapServer = DEFAULT_BOOTSTRAP_SERVER,
    debug: Debug = False,
) -> None:
    """Send each line of stdin to a topic."""
    reader = LineReader(parse_key_values(property, "--property"))
    settings: dict[str, Any] = {"acks": "all" if request_required_acks == "-1" else request_required_acks,
                                "linger.ms": 1000 if not sync else 0}
    if compression_codec is not None:
        settings["compression.type"] = compression_codec
    settings.update(parse_key_values(producer_property, "--producer-property"))
    failures: list[BaseException] = []

    def delivered(metadata, error) -> None:
        if error is not None:
            failures.append(error)

    with client_errors(debug):
        from kfk.client import Producer

        config = client_config(bootstrap_server, producer_config, settings)
        check_topic_writable(config, topic)
        with Producer(config) as producer:
            for number, raw in enumerate(sys.stdin.buffer, 1):
                line = raw.rstrip(b"\n").rstrip(b"\r")
                key, value, headers = reader.parse(line, number)
                future = producer.send(topic, value, key=key, headers=headers, callback=delivered)
                if sync:
                    future.result()
                if failures:
                    break
            producer.flush()
        if failures:
            raise failures[0]


# --- consume -------------------------------------------------------------------------------------------------------

class MessageFormatter:
    """Kafka's DefaultMessageFormatter: timestamp, partition, offset, headers, key, value, each followed by the
    key.separator when something else follows it, then line.separator."""

    def __init__(self, properties: dict[str, str]) -> None:
        def flag(name: str, default: str = "false") -> bool:
            return properties.get(name, default).lower() in _TRUE

        self.print_timestamp = flag("print.timestamp")
        self.print_partition = flag("print.partition")
        self.print_offset = flag("print.offset")
        self.print_headers = flag("print.headers")
        self.print_key = flag("print.key")
        self.print_value = flag("print.value", "true")
        self.key_separator = _unescape(properties.get("key.separator", "\t")).encode()
        self.line_separator = _unescape(properties.get("line.separator", "\n")).encode()
        self.headers_separator = _unescape(properties.get("headers.separator", ",")).encode()
        self.headers_key_separator = _unescape(properties.get("headers.key.separator", ":")).encode()
        self.null_literal = properties.get("null.literal", "null").encode()

    def format(self, record) -> bytes:
        fields: list[bytes] = []
        if self.print_timestamp:
            kind = "LogAppendTime" if record.timestamp_type == 1 else "CreateTime"
            fields.append(f"{kind}:{record.timestamp}".encode() if record.timestamp >= 0 else b"NO_TIMESTAMP")
        if self.print_partition:
            fields.append(f"Partition:{record.partition}".encode())
        if self.print_offset:
            fields.append(f"Offset:{record.offset}".encode())
        if self.print_headers:
            fields.append(self.headers_separator.join(
                name.encode() + self.headers_key_separator + (value if value is not None else self.null_literal)
                for name, value in record.headers) if record.headers else b"NO_HEADERS")
        if self.print_key:
            fields.append(record.key if record.key is not None else self.null_literal)
        if self.print_value:
            fields.append(record.value if record.value is not None else self.null_literal)
        return self.key_separator.join(fields) + self.line_separator


@app.command("console-consume")
def console_consume(
    topic: Topic,
    from_beginning: Annotated[bool, typer.Option("--from-beginning",
                                                 help="Start at the earliest offset when there is no committed one."
                                                 )] = False,
    group: Annotated[Optional[str], typer.Option("--group", help="Consume as a member of this group.")] = None,
    partition: Annotated[Optional[int], typer.Option("--partition", min=0, help="Read only this partition.")
                         ] = None,
    offset: Annotated[str, typer.Option("--offset", help="With --partition: earliest, latest or an offset.")
                      ] = "latest",
    max_messages: Annotated[Optional[int], typer.Option("--max-messages", min=1,
                                                        help="Exit after this many records.")] = None,
    timeout_ms: Annotated[Optional[int], typer.Option("--timeout-ms", min=0,
                                                      help="Exit when no record arrives for this long.")] = None,
    property: Properties = None,
    isolation_level: Annotated[IsolationLevel, typer.Option(
        "--isolation-level", help="read_uncommitted (the default, as Kafka's console consumer) prints every record; "
                                  "read_committed skips aborted transactions and waits for open ones.")
    ] = IsolationLevel.read_uncommitted,
    consumer_property: Annotated[Optional[list[str]], typer.Option(
        "--consumer-property", help="A consumer config key=value (repeatable).")] = None,
    consumer_config: Annotated[Optional[str], typer.Option("--consumer.config", "--consumer-config",
                                                           help="A consumer properties file.")] = None,
    bootstrap_server: BootstrapServer = DEFAULT_BOOTSTRAP_SERVER,
    debug: Debug = False,
) -> None:
    """Print the records of a topic."""
    formatter = MessageFormatter(parse_key_values(property, "--property"))
    start_offset = _start_offset(offset, group, partition)
    settings: dict[str, Any] = {
        "auto.offset.reset": "earliest" if from_beginning or offset == "earliest" else "latest",
        "isolation.level": isolation_level.value,
        "allow.auto.create.topics": False,
    }
    if group is not None:
        settings["group.id"] = group
    settings.update(parse_key_values(consumer_property, "--consumer-property"))
    printer = _RecordPrinter(formatter, max_messages, timeout_ms)
    with client_errors(debug):
        from kfk.client import Consumer

        consumer = Consumer(client_config(bootstrap_server, consumer_config, settings))
        started = False
        try:
            _position(consumer, topic, group, partition, start_offset)
            started = True
            printer.run(consumer)
        except BrokenPipeError:
            started = False  # stdout's reader went away (`| head`): no summary, client_errors exits quietly
            raise
        finally:
            try:
                consumer.close(timeout=5)
            finally:
                if started:
                    typer.echo(f"Processed a total of {printer.count} messages", err=True)


def _start_offset(offset: str, group: str | None, partition: int | None) -> int | None:
    """--offset as a number (None for earliest/latest), after checking it goes with the other flags."""
    if partition is None and offset != "latest":
        fail("--offset needs --partition")
    if group is not None and partition is not None:
        fail("--group and --partition cannot be used together")
    if offset in ("earliest", "latest"):
        return None
    try:
        start_offset = int(offset)
    except ValueError:
        fail(f"--offset must be earliest, latest or a non-negative number, not {offset!r}")
    if start_offset < 0:
        fail(f"--offset must not be negative, got {offset}")
    return start_offset


def _position(consumer, topic: str, group: str | None, partition: int | None, start_offset: int | None) -> None:
    """Join the group, or assign the partition (or every partition) and seek to --offset."""
    from kfk.client import TopicPartition

    partitions = consumer.partitions_for(topic)
    if group is not None:
        consumer.subscribe([topic])
        return
    if partition is not None:
        if partition not in partitions:
            fail(f"topic {topic!r} has no partition {partition} (it has {len(partitions)})")
        partitions = [partition]
    consumer.assign([TopicPartition(topic, p) for p in partitions])
    if start_offset is not None:
        consumer.seek(TopicPartition(topic, partition), start_offset)


class _RecordPrinter:
    """Polls and prints until --max-messages, --timeout-ms without a record, or Ctrl-C; counts what it printed
    (the count is reported even when polling fails)."""

    def __init__(self, formatter: MessageFormatter, max_messages: int | None, timeout_ms: int | None) -> None:
        self.formatter = formatter
        self.max_messages = max_messages
        self.timeout_ms = timeout_ms
        self.count = 0

    def run(self, consumer) -> None:
        out = sys.stdout.buffer
        max_messages, timeout_ms = self.max_messages, self.timeout_ms
        last_record = time.monotonic()
        try:
            while max_messages is None or self.count < max_messages:
                wait = 1.0
                if timeout_ms is not None:
                    wait = max(min(wait, timeout_ms / 1000 - (time.monotonic() - last_record)), 0)
                records = consumer.poll(wait, max_records=None if max_messages is None
                                        else max_messages - self.count)
                for record in records:
                    out.write(self.formatter.format(record))
                    self.count += 1
                if records:
                    out.flush()
                    last_record = time.monotonic()
                elif timeout_ms is not None and (time.monotonic() - last_record) * 1000 >= timeout_ms:
                    break
        except KeyboardInterrupt:
            pass
