"""`kfk transactions list|describe|describe-producers|find-hanging|abort`: kafka-transactions.sh, with its subcommands,
flags and output columns.

`find-hanging` lists transactions left open on a partition that no coordinator will ever end (say a producer id
whose coordinator state was lost): a read_committed consumer cannot get past them. `abort` ends one by writing the
ABORT marker the coordinator would have written; given only --start-offset, it looks the producer up with
DescribeProducers, as Kafka's tool does on brokers of 3.0 and later.
"""

from __future__ import annotations

import time
from typing import Annotated, Optional

import typer

from kfk.commands.client_options import (
    DEFAULT_BOOTSTRAP_SERVER,
    BootstrapServer,
    CommandConfig,
    ConnectionOptionsFirst,
    Debug,
    JsonOutput,
    Topic,
    client_config,
    client_errors,
    print_json,
)
from kfk.commands.errors import fail
from kfk.commands.kafka_layout import partitions_in_kafka_order, tools_table

app = typer.Typer(help="List, describe and repair transactions (kafka-transactions.sh).", no_args_is_help=True,
                  cls=ConnectionOptionsFirst)

Partition = Annotated[int, typer.Option("--partition", min=0, help="The partition number.")]

DEFAULT_MAX_TRANSACTION_TIMEOUT_MINUTES = 15  # Kafka's transaction.max.timeout.ms default, in minutes


def _admin(bootstrap_server: str, command_config: str | None):
    from kfk.client import Admin

    return Admin(client_config(bootstrap_server, command_config))


def _render(headers: tuple[str, ...], rows: list[tuple], json_output: bool) -> None:
    """Kafka's table (each cell padded to its column and followed by a tab; "None" for what is unknown), or JSON
    objects keyed by Kafka's column names."""
    if json_output:
        print_json([dict(zip(headers, row)) for row in rows])
        return
    for line in tools_table(headers, [["None" if value is None else str(value) for value in row] for row in rows]):
        typer.echo(line)


@app.command("list")
def list_transactions(
    duration_filter: Annotated[Optional[int], typer.Option(
        "--duration-filter", help="Only the transactions open longer than this many ms (all if below 0).")] = None,
    bootstrap_server: BootstrapServer = DEFAULT_BOOTSTRAP_SERVER,
    command_config: CommandConfig = None,
    json_output: JsonOutput = False,
    debug: Debug = False,
) -> None:
    """List the transactional ids every coordinator knows."""
    with client_errors(debug), _admin(bootstrap_server, command_config) as admin:
        listings = admin.list_transactions(duration_filter_ms=-1 if duration_filter is None else duration_filter)
    _render(("TransactionalId", "Coordinator", "ProducerId", "TransactionState"),
            [(item.transactional_id, item.coordinator_id, item.producer_id, item.state) for item in listings],
            json_output)


@app.command()
def describe(
    transactional_id: Annotated[str, typer.Option("--transactional-id", help="The transactional id.")],
    bootstrap_server: BootstrapServer = DEFAULT_BOOTSTRAP_SERVER,
    command_config: CommandConfig = None,
    json_output: JsonOutput = False,
    debug: Debug = False,
) -> None:
    """Describe the state of a transactional id at its coordinator."""
    from kfk.errors import KafkaError

    with client_errors(debug), _admin(bootstrap_server, command_config) as admin:
        found = admin.describe_transactions([transactional_id])[transactional_id]
    if isinstance(found, KafkaError):
        fail(str(found))
    start = found.transaction_start_time_ms
    duration = None if start is None else int(time.time() * 1000) - start
    partitions = ",".join(str(tp) for tp in partitions_in_kafka_order(found.topic_partitions))
    _render(("CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch", "TransactionState",
             "TransactionTimeoutMs", "CurrentTransactionStartTimeMs", "TransactionDurationMs", "TopicPartitions"),
            [(found.coordinator_id, transactional_id, found.producer_id, found.producer_epoch, found.state,
              found.transaction_timeout_ms, start, duration, partitions)], json_output)


@app.command("describe-producers")
def describe_producers(
    topic: Topic,
    partition: Partition,
    broker_id: Annotated[Optional[int], typer.Option(
        "--broker-id", help="Read the producer state of this replica instead of the leader's.")] = None,
    bootstrap_server: BootstrapServer = DEFAULT_BOOTSTRAP_SERVER,
    command_config: CommandConfig = None,
    json_output: JsonOutput = False,
    debug: Debug = False,
) -> None:
    """Describe the active producers of a partition."""
    from kfk.client.structs import TopicPartition
    from kfk.errors import KafkaError

    tp = TopicPartition(topic, partition)
    with client_errors(debug), _admin(bootstrap_server, command_config) as admin:
        found = admin.describe_producers([tp], broker_id=broker_id)[tp]
    if isinstance(found, KafkaError):
        where = "leader" if broker_id is None else f"broker {broker_id}"
        fail(f"{found} (asked the {where})")
    _render(("ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence", "LastTimestamp",
             "CurrentTransactionStartOffset"),
            [(p.producer_id, p.producer_epoch, -1 if p.coordinator_epoch is None else p.coordinator_epoch,
              p.last_sequence, p.last_timestamp, p.current_transaction_start_offset)
             for p in found.active_producers], json_output)


@app.command("find-hanging")
def find_hanging(
    broker_id: Annotated[Optional[int], typer.Option("--broker-id", help="Search the partitions this broker "
                                                                         "holds a replica of.")] = None,
    topic: Annotated[Optional[str], typer.Option("--topic", help="Search this topic only.")] = None,
    partition: Annotated[Optional[int], typer.Option("--partition", min=0, help="With --topic: this partition "
                                                                                "only.")] = None,
    max_transaction_timeout: Annotated[int, typer.Option(
        "--max-transaction-timeout", min=0,
        help="Minutes a transaction may stay open (transaction.max.timeout.ms); older ones are checked.")
    ] = DEFAULT_MAX_TRANSACTION_TIMEOUT_MINUTES,
    bootstrap_server: BootstrapServer = DEFAULT_BOOTSTRAP_SERVER,
    command_config: CommandConfig = None,
    json_output: JsonOutput = False,
    debug: Debug = False,
) -> None:
    """Find transactions that stay open because no coordinator will end them."""
    if topic is None and broker_id is None:
        fail("find-hanging needs --topic or --broker-id to limit the search")
    if partition is not None and topic is None:
        fail("--partition needs --topic")
    now_ms = int(time.time() * 1000)
    with client_errors(debug), _admin(bootstrap_server, command_config) as admin:
        hanging = admin.find_hanging_transactions(broker_id=broker_id, topic=topic, partition=partition,
                                                  max_transaction_timeout_ms=max_transaction_timeout * 60_000,
                                                  now_ms=now_ms)
    rows = []
    for open_txn in hanging:
        state = open_txn.producer_state
        rows.append((open_txn.topic_partition.topic, open_txn.topic_partition.partition, state.producer_id,
                     state.producer_epoch, -1 if state.coordinator_epoch is None else state.coordinator_epoch,
                     state.current_transaction_start_offset, state.last_timestamp,
                     (now_ms - state.last_timestamp) // 60_000))
    _render(("Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch", "StartOffset",
             "LastTimestamp", "Duration(min)"), rows, json_output)


@app.command()
def abort(
    topic: Topic,
    partition: Partition,
    start_offset: Annotated[Optional[int], typer.Option(
        "--start-offset", min=0, help="The first offset of the transaction to abort (brokers 3.0 and later).")
    ] = None,
    producer_id: Annotated[Optional[int], typer.Option("--producer-id", help="The producer id (older brokers).")
                           ] = None,
    producer_epoch: Annotated[Optional[int], typer.Option("--producer-epoch",
                                                          help="The producer epoch (older brokers).")] = None,
    coordinator_epoch: Annotated[Optional[int], typer.Option("--coordinator-epoch",
                                                             help="The coordinator epoch (older brokers).")] = None,
    bootstrap_server: BootstrapServer = DEFAULT_BOOTSTRAP_SERVER,
    command_config: CommandConfig = None,
    debug: Debug = False,
) -> None:
    """Abort a hanging transaction on one partition (needs administrative rights)."""
    from kfk.client.structs import AbortTransactionSpec, TopicPartition
    from kfk.errors import KafkaError

    tp = TopicPartition(topic, partition)
    if start_offset is None and producer_id is None:
        fail("name the transaction to abort with --start-offset, or with --producer-id, --producer-epoch and "
             "--coordinator-epoch")
    if start_offset is not None and producer_id is not None:
        fail("give --start-offset or --producer-id, not both")
    if start_offset is None and (producer_epoch is None or coordinator_epoch is None):
        fail("--producer-id needs --producer-epoch and --coordinator-epoch")
    with client_errors(debug), _admin(bootstrap_server, command_config) as admin:
        if start_offset is None:
            # A producer that hung before its first marker shows coordinator epoch -1; 0 is at most any epoch.
            spec = AbortTransactionSpec(tp, producer_id, producer_epoch, max(coordinator_epoch, 0))
        else:
            found = admin.describe_producers([tp])[tp]
            if isinstance(found, KafkaError):
                fail(str(found))
            producer = next((p for p in found.active_producers
                             if p.current_transaction_start_offset == start_offset), None)
            if producer is None:
                fail(f"no open transaction starts at offset {start_offset} on {tp}")
            spec = AbortTransactionSpec(tp, producer.producer_id, producer.producer_epoch,
                                        producer.coordinator_epoch or 0)
        admin.abort_transaction(spec)
    typer.echo(f"Aborted the transaction of producer {spec.producer_id} (epoch {spec.producer_epoch}) on {tp}.")
