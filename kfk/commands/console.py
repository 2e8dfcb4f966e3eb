"""`kfk console-produce` and `kfk console-consume`: kafka-console-producer.sh / kafka-console-consumer.sh.

console-produce sends each stdin line as a record; ``--property parse.key=true`` splits the key off at
``key.separator`` (default a tab), ``parse.headers=true`` reads ``h1:v1,h2:v2`` headers before the key, as Kafka's
LineMessageReader does. console-consume prints records as Kafka's DefaultMessageFormatter does (``print.key``,
``print.timestamp``, ``print.partition``, ``print.offset``, ``print.headers``, ``key.separator``...), or with
another --formatter and Kafka's deserializers (kfk/commands/record_formats.py), and ends with "Processed a total
of N messages" on stderr; --max-messages, --timeout-ms, Ctrl-C and SIGTERM all end it cleanly (leaving the group).
Without a deserializer values are written as raw bytes: what was produced is what is printed. --property values
are taken as typed, spaces included (``key.separator= `` is a space). Without --group, console-consume assigns
itself every partition of the topic instead of joining a throw-away "console-consumer-NNNN" group as Kafka's tool
does, so reading a topic leaves no group behind. A missing topic is waited for, as Kafka's tool waits (the broker
auto-creates it when auto.create.topics.enable is on, since the consumer's Metadata requests allow it).
"""

from __future__ import annotations

import re
import signal
import sys
import time
from typing import Annotated, Any, Optional

import typer

from kfk.commands.client_options import (
    DEFAULT_BOOTSTRAP_SERVER,
    BootstrapServer,
    ConsumerConfig,
    Debug,
    IsolationLevel,
    ProducerConfig,
    Topic,
    check_reachable,
    check_topic_writable,
    client_config,
    client_errors,
    include_list,
    parse_key_values,
)
from kfk.commands.errors import fail
from kfk.commands.record_formats import (
    TRUE_VALUES,
    DeserializationError,
    MessageFormatter,
    find_deserializer,
    find_formatter,
    unescape,
)
from kfk.commands.schema_formats import (
    DEFAULT_SCHEMA_REGISTRY_URL,
    AutoRegister,
    KeyFormat,
    KeySubjectNameStrategy,
    KeySchema,
    SchemaRegistryUrl,
    SubjectNameStrategy,
    ValueFormat,
    ValueSchema,
    deserializer_for,
    serializer_for,
)

app = typer.Typer()

Properties = Annotated[Optional[list[str]], typer.Option(
    "--property", help="A reader/formatter property key=value (repeatable), e.g. parse.key=true.")]

# --- produce -------------------------------------------------------------------------------------------------------

class LineReader:
    """Kafka's LineMessageReader: a line is ``[headers<headers.delimiter>][key<key.separator>]value``."""

    def __init__(self, properties: dict[str, str]) -> None:
        self.parse_key = properties.get("parse.key", "false").lower() in TRUE_VALUES
        self.key_separator = unescape(properties.get("key.separator", "\t")).encode()
        self.parse_headers = properties.get("parse.headers", "false").lower() in TRUE_VALUES
        self.headers_delimiter = unescape(properties.get("headers.delimiter", "\t")).encode()
        self.headers_separator = unescape(properties.get("headers.separator", ",")).encode()
        self.headers_key_separator = unescape(properties.get("headers.key.separator", ":")).encode()
        self.null_marker = properties.get("null.marker")
        self.ignore_error = properties.get("ignore.error", "false").lower() in TRUE_VALUES

    def parse(self, line: bytes, number: int) -> tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]]]:
        headers: list[tuple[str, bytes | None]] = []
        if self.parse_headers:
            head, found, line = line.partition(self.headers_delimiter)
            if not found:
                if not self.ignore_error:
                    raise ValueError(f"no headers delimiter found on line number {number}: '{_text(line)}'")
                head, line = b"", head
            for header in filter(None, head.split(self.headers_separator)):
                name, _, value = header.partition(self.headers_key_separator)
                headers.append((name.decode("utf-8"), self._null(value)))
        key: bytes | None = None
        if self.parse_key:
            key, found, line = line.partition(self.key_separator)
            if not found:
                if not self.ignore_error:
                    raise ValueError(f"no key separator found on line number {number}: '{_text(key)}'")
                key, line = None, key
            key = self._null(key)
        return key, self._null(line), headers

    def _null(self, value: bytes | None) -> bytes | None:
        if value is not None and self.null_marker is not None and value == self.null_marker.encode():
            return None
        return value


def _text(line: bytes) -> str:
    """A line as the user typed it, for error messages (not a bytes repr)."""
    return line.decode("utf-8", "replace")


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
    producer_config: ProducerConfig = None,
    bootstrap_server: BootstrapServer = DEFAULT_BOOTSTRAP_SERVER,
    key_format: KeyFormat = None,
    key_schema: KeySchema = None,
    value_format: ValueFormat = None,
    value_schema: ValueSchema = None,
    schema_registry_url: SchemaRegistryUrl = DEFAULT_SCHEMA_REGISTRY_URL,
    subject_name_strategy: SubjectNameStrategy = "TopicNameStrategy",
    key_subject_name_strategy: KeySubjectNameStrategy = "TopicNameStrategy",
    auto_register: AutoRegister = True,
    debug: Debug = False,
) -> None:
    """Send each line of stdin to a topic (with --value-format, each line is JSON written with a schema)."""
    reader = LineReader(parse_key_values(property, "--property", keep_spaces=True))
    serialize_key = serializer_for(key_format, key_schema, "--key", schema_registry_url, is_key=True,
                                   strategy=key_subject_name_strategy, auto_register=auto_register)
    serialize_value = serializer_for(value_format, value_schema, "--value", schema_registry_url, is_key=False,
                                     strategy=subject_name_strategy, auto_register=auto_register)
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
                if serialize_key is not None:
                    key = serialize_key(topic, key)
                if serialize_value is not None:
                    value = serialize_value(topic, value)
                future = producer.send(topic, value, key=key, headers=headers, callback=delivered)
                if sync:
                    future.result()
                if failures:
                    break
            producer.flush()
        if failures:
            raise failures[0]


# --- consume -------------------------------------------------------------------------------------------------------

@app.command("console-consume")
def console_consume(
    topic: Annotated[Optional[str], typer.Option("--topic", help="The topic to read.")] = None,
    include: Annotated[Optional[str], typer.Option(
        "--include", help="Instead of --topic: a regular expression of the topics to read (whole names, commas "
                          "separate alternatives; internal topics are left out).")] = None,
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
    formatter_name: Annotated[str, typer.Option(
        "--formatter", help="default (Kafka's DefaultMessageFormatter), logging (the same, and a log line per "
                            "record on stderr) or json (one object per line); Kafka's class names work too.")
    ] = "default",
    property: Properties = None,
    key_deserializer: Annotated[Optional[str], typer.Option(
        "--key-deserializer", help="How to print keys: string, bytes, long, int, double or uuid (or Kafka's "
                                   "class name); default: the raw bytes.")] = None,
    value_deserializer: Annotated[Optional[str], typer.Option(
        "--value-deserializer", help="How to print values, as --key-deserializer.")] = None,
    skip_message_on_error: Annotated[bool, typer.Option(
        "--skip-message-on-error", help="Skip a record that cannot be printed (e.g. an 8-byte long expected) "
                                        "instead of stopping.")] = False,
    isolation_level: Annotated[IsolationLevel, typer.Option(
        "--isolation-level", help="read_uncommitted (the default, as Kafka's console consumer) prints every record; "
                                  "read_committed skips aborted transactions and waits for open ones.")
    ] = IsolationLevel.read_uncommitted,
    consumer_property: Annotated[Optional[list[str]], typer.Option(
        "--consumer-property", help="A consumer config key=value (repeatable).")] = None,
    consumer_config: ConsumerConfig = None,
    bootstrap_server: BootstrapServer = DEFAULT_BOOTSTRAP_SERVER,
    key_format: KeyFormat = None,
    value_format: ValueFormat = None,
    schema_registry_url: SchemaRegistryUrl = DEFAULT_SCHEMA_REGISTRY_URL,
    debug: Debug = False,
) -> None:
    """Print the records of a topic (or of the topics --include matches); with --value-format, as JSON."""
    if (topic is None) == (include is None):
        fail("Exactly one of --include/--topic is required.")
    if include is not None and partition is not None:
        fail("--partition goes with --topic, not --include")
    pattern = include_list(include, "--include") if include is not None else None
    properties = parse_key_values(property, "--property", keep_spaces=True)
    try:
        formatter = find_formatter(formatter_name)(
            properties,
            deserializer_for(key_format, schema_registry_url)
            or find_deserializer(key_deserializer or properties.get("key.deserializer")),
            deserializer_for(value_format, schema_registry_url)
            or find_deserializer(value_deserializer or properties.get("value.deserializer")))
    except ValueError as error:
        fail(str(error))
    start_offset = _start_offset(offset, group, partition)
    settings: dict[str, Any] = {
        "auto.offset.reset": "earliest" if from_beginning or offset == "earliest" else "latest",
        "isolation.level": isolation_level.value,
    }
    if group is not None:
        settings["group.id"] = group
    settings.update(parse_key_values(consumer_property, "--consumer-property"))
    printer = RecordPrinter(formatter, max_messages, timeout_ms, skip_message_on_error)
    stop_on_sigterm()
    with client_errors(debug):
        from kfk.client import Consumer

        config = client_config(bootstrap_server, consumer_config, settings)
        check_reachable(config)  # the consumer waits for a missing topic, never for a missing cluster
        consumer = Consumer(config)
        started = False
        try:
            positioned = _position(consumer, topic if topic is not None else pattern, group, partition,
                                   start_offset, timeout_ms)
            started = True
            if positioned:
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


def stop_on_sigterm() -> None:
    """SIGTERM ends the consumer as Ctrl-C does (Kafka's shutdown hook): the records so far, the group left, the
    summary line."""
    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupt)


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


def _position(consumer, topics: str | re.Pattern[str], group: str | None, partition: int | None,
              start_offset: int | None, timeout_ms: int | None) -> bool:
    """Join the group, or assign the partition (or every partition of the topic, or of the topics the --include
    pattern matches) and seek to --offset. False when --timeout-ms or Ctrl-C came while the topic was missing."""
    from kfk.client import TopicPartition
    from kfk.common.internal_topics import GROUP_METADATA_TOPIC_NAME, TRANSACTION_STATE_TOPIC_NAME

    if group is not None:
        consumer.subscribe([topics] if isinstance(topics, str) else topics)  # the group waits for a missing topic
        return True
    if isinstance(topics, str):
        found = _wait_for_topic(consumer, topics, timeout_ms)
        if found is None:
            return False
        partitions = {topics: found}
    else:
        internal = (GROUP_METADATA_TOPIC_NAME, TRANSACTION_STATE_TOPIC_NAME)
        partitions = {name: numbers for name, numbers in consumer.list_topics().items()
                      if topics.fullmatch(name) and name not in internal}
    if partition is not None:
        assert isinstance(topics, str)
        if partition not in partitions[topics]:
            fail(f"topic {topics!r} has no partition {partition} (it has {len(partitions[topics])})")
        partitions = {topics: [partition]}
    consumer.assign([TopicPartition(name, p) for name, numbers in sorted(partitions.items()) for p in numbers])
    if start_offset is not None:
        assert isinstance(topics, str)
        consumer.seek(TopicPartition(topics, partition), start_offset)
    return True


def _wait_for_topic(consumer, topic: str, timeout_ms: int | None) -> list[int] | None:
    """The topic's partitions once it exists, or None after --timeout-ms (or Ctrl-C) without it. Kafka's console
    consumer waits for a missing topic rather than failing; its Metadata requests let the broker auto-create it
    (auto.create.topics.enable), as the consumer's allow.auto.create.topics (default true) does here."""
    from kfk.errors import LeaderNotAvailableError, UnknownTopicOrPartitionError

    deadline = None if timeout_ms is None else time.monotonic() + timeout_ms / 1000
    backoff = consumer.config.retry_backoff_ms / 1000
    try:
        while True:
            try:
                return consumer.partitions_for(topic)
            except (UnknownTopicOrPartitionError, LeaderNotAvailableError):  # missing, or created just now
                pass
            if deadline is not None and time.monotonic() >= deadline:
                return None
            time.sleep(backoff if deadline is None else max(min(backoff, deadline - time.monotonic()), 0))
            backoff = min(backoff * 2, consumer.config.retry_backoff_max_ms / 1000)
    except KeyboardInterrupt:
        return None


class RecordPrinter:
    """Polls and prints until --max-messages, --timeout-ms without a record, or Ctrl-C; counts what it printed
    (the count is reported even when polling fails)."""

    def __init__(self, formatter: MessageFormatter, max_messages: int | None, timeout_ms: int | None,
                 skip_message_on_error: bool = False) -> None:
        self.formatter = formatter
        self.max_messages = max_messages
        self.timeout_ms = timeout_ms
        self.skip_message_on_error = skip_message_on_error
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
                records = self.poll(consumer, wait)
                for record in records:
                    if max_messages is not None and self.count >= max_messages:
                        break  # a share consumer's poll has no record limit: the rest go back at close
                    self.count += 1  # Kafka counts a skipped record as processed too
                    try:
                        self.formatter.write(record, out)
                    except DeserializationError as error:
                        self.failed(consumer, record, error)
                    else:
                        self.printed(consumer, record)
                if records:
                    out.flush()
                    last_record = time.monotonic()
                elif timeout_ms is not None and (time.monotonic() - last_record) * 1000 >= timeout_ms:
                    break
        except KeyboardInterrupt:
            pass

    def poll(self, consumer, wait: float) -> list:
        """The next records, no more than --max-messages still allows."""
        return consumer.poll(wait, max_records=None if self.max_messages is None else self.max_messages - self.count)

    def printed(self, consumer, record) -> None:
        """A record was written (a share consumer acknowledges it here)."""

    def failed(self, consumer, record, error: DeserializationError) -> None:
        """A record could not be printed: skipped with a line on stderr (--skip-message-on-error), else the end."""
        where = f"{record.topic}-{record.partition} offset {record.offset}"
        if not self.skip_message_on_error:
            raise DeserializationError(f"{error} (at {where}; --skip-message-on-error skips such records)") from None
        typer.echo(f"Error processing message, skipping this message: {error} (at {where})", err=True)
