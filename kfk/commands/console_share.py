"""`kfk console-share-consume`: kafka-console-share-consumer.sh, reading a topic as a member of a share group.

Several of these may read one partition at once (KIP-932): each record goes to one of them. Records are printed
as console-consume prints them (the same formatters and deserializers, kfk/commands/console.py), and each printed
record is acknowledged, one by one as Kafka's tool does: ACCEPT, or RELEASE with --release (another member, or
this one, gets it again with its delivery count one higher) or REJECT with --reject (never delivered again). A
record that cannot be printed stops the command, unless --reject-message-on-error rejects it and goes on. The group
is "console-share-consumer" unless --group (or group.id in a --command-property) names another, as Kafka's tool.
"""

from __future__ import annotations

from typing import Annotated, Any, Optional

import typer

from kfk.commands.client_options import (
    DEFAULT_BOOTSTRAP_SERVER,
    BootstrapServer,
    ConsumerConfig,
    Debug,
    check_reachable,
    client_config,
    client_errors,
    parse_key_values,
)
from kfk.commands.console import RecordPrinter, stop_on_sigterm
from kfk.commands.errors import fail
from kfk.commands.record_formats import DeserializationError, find_deserializer, find_formatter

app = typer.Typer()

#: Kafka's tool's group and client.id when none is given.
DEFAULT_GROUP = "console-share-consumer"


@app.command("console-share-consume")
def console_share_consume(
    topic: Annotated[Optional[str], typer.Option("--topic", help="The topic to read.")] = None,
    group: Annotated[Optional[str], typer.Option(
        "--group", help=f"The share group to read as a member of (default {DEFAULT_GROUP}).")] = None,
    max_messages: Annotated[Optional[int], typer.Option("--max-messages", min=1,
                                                        help="Exit after this many records.")] = None,
    timeout_ms: Annotated[Optional[int], typer.Option("--timeout-ms", min=0,
                                                      help="Exit when no record arrives for this long.")] = None,
    formatter_name: Annotated[str, typer.Option(
        "--formatter", help="default (Kafka's DefaultMessageFormatter), logging or json, as console-consume.")
    ] = "default",
    formatter_property: Annotated[Optional[list[str]], typer.Option(
        "--formatter-property", "--property",
        help="A formatter property key=value (repeatable): print.key, print.delivery, key.separator...")] = None,
    key_deserializer: Annotated[Optional[str], typer.Option(
        "--key-deserializer", help="How to print keys: string, bytes, long, int, double or uuid (or Kafka's "
                                   "class name); default: the raw bytes.")] = None,
    value_deserializer: Annotated[Optional[str], typer.Option(
        "--value-deserializer", help="How to print values, as --key-deserializer.")] = None,
    reject: Annotated[bool, typer.Option(
        "--reject", help="Reject each record once printed (never delivered again) instead of accepting it.")
    ] = False,
    release: Annotated[bool, typer.Option(
        "--release", help="Release each record once printed (delivered again) instead of accepting it.")] = False,
    reject_message_on_error: Annotated[bool, typer.Option(
        "--reject-message-on-error", help="Reject a record that cannot be printed and go on, instead of stopping.")
    ] = False,
    command_property: Annotated[Optional[list[str]], typer.Option(
        "--command-property", "--consumer-property", help="A consumer config key=value (repeatable).")] = None,
    consumer_config: ConsumerConfig = None,
    bootstrap_server: BootstrapServer = DEFAULT_BOOTSTRAP_SERVER,
    debug: Debug = False,
) -> None:
    """Print the records of a topic read as a member of a share group, acknowledging each."""
    if topic is None:
        fail("--topic is required")
    if reject and release:
        fail("--reject and --release cannot be used together")
    properties = parse_key_values(formatter_property, "--formatter-property", keep_spaces=True)
    try:
        formatter = find_formatter(formatter_name)(
            properties, find_deserializer(key_deserializer or properties.get("key.deserializer")),
            find_deserializer(value_deserializer or properties.get("value.deserializer")))
    except ValueError as error:
        fail(str(error))
    settings: dict[str, Any] = {"client.id": DEFAULT_GROUP, **parse_key_values(command_property,
                                                                              "--command-property")}
    configured = settings.get("group.id")
    if group is not None and configured is not None and configured != group:
        fail(f"--group {group} and group.id={configured} name different groups: give one")
    settings["group.id"] = group or configured or DEFAULT_GROUP
    settings["share.acknowledgement.mode"] = "explicit"
    printer = _ShareRecordPrinter(formatter, max_messages, timeout_ms, reject_message_on_error,
                                  "REJECT" if reject else "RELEASE" if release else "ACCEPT")
    stop_on_sigterm()
    with client_errors(debug):
        from kfk.client.share_consumer import ShareConsumer

        config = client_config(bootstrap_server, consumer_config, settings)
        check_reachable(config)
        consumer = ShareConsumer(config)
        try:
            consumer.subscribe([topic])
            printer.run(consumer)
        except BrokenPipeError:
            consumer.close(timeout=5)  # stdout's reader went away (`| head`): no summary
            raise
        try:
            consumer.close(timeout=5)  # sends the acknowledgements of the last poll
        finally:
            typer.echo(f"Processed a total of {printer.count} messages", err=True)


class _ShareRecordPrinter(RecordPrinter):
    """console-consume's printer, acknowledging each record as it is printed (or rejecting one it cannot print,
    with --reject-message-on-error)."""

    def __init__(self, formatter, max_messages: int | None, timeout_ms: int | None, reject_message_on_error: bool,
                 acknowledge_type: str) -> None:
        super().__init__(formatter, max_messages, timeout_ms)
        from kfk.client.share_consumer import AcknowledgeType

        self.reject_message_on_error = reject_message_on_error
        self.acknowledge_type = AcknowledgeType[acknowledge_type]

    def poll(self, consumer, wait: float) -> list:
        return consumer.poll(wait)

    def printed(self, consumer, record) -> None:
        consumer.acknowledge(record, self.acknowledge_type)

    def failed(self, consumer, record, error: DeserializationError) -> None:
        from kfk.client.share_consumer import AcknowledgeType

        where = f"{record.topic}-{record.partition} offset {record.offset}"
        if not self.reject_message_on_error:
            raise DeserializationError(f"{error} (at {where}; --reject-message-on-error rejects such records)"
                                       ) from None
        typer.echo(f"Error processing message, rejecting this message: {error} (at {where})", err=True)
        consumer.acknowledge(record, AcknowledgeType.REJECT)
