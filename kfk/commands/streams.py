"""`kfk streams reset | describe`.

reset: kafka-streams-application-reset.sh for a Kafka Streams (or kfk.streams) application: with
its instances stopped, rewind the application's committed offsets on its input topics (to the earliest offset by
default), move them to the end of its intermediate topics, and delete its internal topics (changelogs,
repartition and foreign-key join topics, found by Kafka's naming rule), so that the next start reprocesses the
input from scratch. The printed lines are Kafka's tool's.

Not yet: --to-datetime, --by-duration, --from-file and --force (removing the members of a group still active).

describe: prints a kfk.streams topology as Kafka Streams' Topology.describe() prints it (its sub-topologies, sources,
processors, stores and sinks), from MODULE:NAME, the way uvicorn or gunicorn name an application: a Topology, a
StreamsBuilder (built), or a function of no argument returning either. The module is imported with the current
directory on the path, so `kfk streams describe wordcount:builder` works beside wordcount.py.
"""

from __future__ import annotations

import importlib
import os
import re
import sys
from typing import Annotated, Any, Optional

import typer

from kfk.commands.client_options import (
    DEFAULT_BOOTSTRAP_SERVER,
    BootstrapServer,
    ConnectionOptionsFirst,
    Debug,
    client_config,
    client_errors,
    command_config_option,
)
from kfk.commands.errors import fail

app = typer.Typer(help="Tools for Kafka Streams applications (kafka-streams-application-reset.sh).",
                  no_args_is_help=True, cls=ConnectionOptionsFirst)

#: kafka-streams-application-reset.sh's rule for a topic the application created (after "<application.id>-").
_INTERNAL_TOPIC = re.compile(r".*(-changelog|-repartition|-subscription-registration-topic"
                             r"|-subscription-response-topic)|.+-KTABLE-FK-JOIN-SUBSCRIPTION-(REGISTRATION|RESPONSE)"
                             r"-\d+-topic")


ConfigFile = command_config_option("--config-file", help="Property file containing configs to be passed to admin "
                                                        "clients and embedded consumer.")


def _topics(value: str | None) -> list[str]:
    return [topic for topic in (value or "").split(",") if topic]


def _java_list(items: list[str]) -> str:
    return "[" + ", ".join(items) + "]"


@app.command("reset")
def reset(
    application_id: Annotated[str, typer.Option("--application-id",
                                                help="The Kafka Streams application ID (application.id).")],
    input_topics: Annotated[Optional[str], typer.Option(
        "--input-topics", help="Comma-separated list of user input topics: their offsets go back to the earliest "
        "offset (or where --to-latest, --to-offset or --shift-by say).")] = None,
    intermediate_topics: Annotated[Optional[str], typer.Option(
        "--intermediate-topics", help="Comma-separated list of intermediate user topics (input and output of the "
        "application): their offsets go to the end.")] = None,
    internal_topics: Annotated[Optional[str], typer.Option(
        "--internal-topics", help="Comma-separated list of internal topics to delete: a subset of the ones the "
        "default deletes (a --dry-run without this option lists them).")] = None,
    to_earliest: Annotated[bool, typer.Option("--to-earliest", help="Reset offsets to earliest offset.")] = False,
    to_latest: Annotated[bool, typer.Option("--to-latest", help="Reset offsets to latest offset.")] = False,
    to_offset: Annotated[Optional[int], typer.Option("--to-offset",
                                                     help="Reset offsets to a specific offset.")] = None,
    shift_by: Annotated[Optional[int], typer.Option(
        "--shift-by", help="Reset offsets shifting current offset by 'n', where 'n' can be positive or "
        "negative.")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Display the actions that would be performed without "
                                                            "executing the reset commands.")] = False,
    bootstrap_server: BootstrapServer = DEFAULT_BOOTSTRAP_SERVER,
    command_config: ConfigFile = None,
    debug: Debug = False,
) -> None:
    """Reset a Streams application: rewind its input offsets and delete its internal topics."""
    if sum((to_earliest, to_latest, to_offset is not None, shift_by is not None)) > 1:
        fail("give at most one of --to-earliest, --to-latest, --to-offset, --shift-by")
    inputs, intermediates, internals = _topics(input_topics), _topics(intermediate_topics), _topics(internal_topics)
    from kfk.client import Admin, OffsetAndMetadata, TopicPartition

    exit_code = 0
    with client_errors(debug), Admin(client_config(bootstrap_server, command_config)) as admin:
        group = admin.describe_consumer_groups([application_id]).get(application_id)
        if group is not None and group.members:
            fail(f"Consumer group '{application_id}' is still active and has following members: "
                 f"{[member.member_id for member in group.members]}. Make sure to stop all running application "
                 "instances before running the reset tool.")
        all_topics = set(admin.list_topics())
        if dry_run:
            typer.echo("----Dry run displays the actions which will be performed when running Streams Reset Tool----")
        if not inputs and not intermediates:
            typer.echo("No input or intermediate topics specified. Skipping seek.")
        else:
            if inputs:
                typer.echo(f"Reset-offsets for input topics {_java_list(inputs)}")
            if intermediates:
                typer.echo(f"Seek-to-end for intermediate topics {_java_list(intermediates)}")
            missing_inputs = [topic for topic in inputs if topic not in all_topics]
            missing_intermediates = [topic for topic in intermediates if topic not in all_topics]
            if missing_inputs:
                typer.echo("Following input topics are not found, skipping them")
                for topic in missing_inputs:
                    typer.echo(f"Topic: {topic}")
            if missing_intermediates:
                typer.echo("Following intermediate topics are not found, skipping them")
                for topic in missing_intermediates:
                    typer.echo(f"Topic:{topic}")  # (sic: Kafka's tool prints no space here)
            exit_code = 1 if missing_inputs or missing_intermediates else 0
            present_inputs = [topic for topic in inputs if topic in all_topics]
            present_intermediates = [topic for topic in intermediates if topic in all_topics]
            if present_inputs or present_intermediates:
                described = admin.describe_topics(present_inputs + present_intermediates)
                partitions = {topic: [TopicPartition(topic, partition.partition)
                                      for partition in described[topic].partitions]
                              for topic in present_inputs + present_intermediates}
                new_offsets: dict = {}
                if present_inputs:
                    typer.echo(f"Following input topics offsets will be reset to (for consumer group "
                               f"{application_id})")
                    input_partitions = [tp for topic in present_inputs for tp in partitions[topic]]
                    earliest = admin.beginning_offsets(input_partitions)
                    latest = admin.end_offsets(input_partitions)
                    committed = (admin.list_consumer_group_offsets(application_id, input_partitions)
                                 if shift_by is not None else {})
                    for tp in input_partitions:
                        if to_latest:
                            offset = latest[tp]
                        elif to_offset is not None:
                            offset = _within(to_offset, earliest[tp], latest[tp])
                        elif shift_by is not None:
                            current = committed.get(tp)
                            position = current.offset if current is not None else earliest[tp]
                            offset = _within(position + shift_by, earliest[tp], latest[tp])
                        else:
                            offset = earliest[tp]
                        new_offsets[tp] = offset
                        typer.echo(f"Topic: {tp.topic} Partition: {tp.partition} Offset: {offset}")
                if present_intermediates:
                    typer.echo(f"Following intermediate topics offsets will be reset to end (for consumer group "
                               f"{application_id})")
                    for topic in present_intermediates:
                        typer.echo(f"Topic: {topic}")
                    new_offsets.update(admin.end_offsets(
                        [tp for topic in present_intermediates for tp in partitions[topic]]))
                if not dry_run:
                    errors = admin.alter_consumer_group_offsets(
                        application_id, {tp: OffsetAndMetadata(offset) for tp, offset in new_offsets.items()})
                    failed = {str(tp): error for tp, error in errors.items() if error is not None}
                    if failed:
                        fail(f"ERROR: Resetting offsets failed: {failed}")
            typer.echo("Done.")
        inferred = [topic for topic in sorted(all_topics)
                    if topic.startswith(application_id + "-") and topic not in inputs and topic not in intermediates
                    and _INTERNAL_TOPIC.fullmatch(topic)]
        if internals:
            if not set(internals) <= set(inferred):
                fail("Invalid topic specified in the --internal-topics option. Ensure that the topics specified are "
                     "all internal topics. Do a dry run without the --internal-topics option to see the list of all "
                     "internal topics that can be deleted.")
            typer.echo(f"Deleting specified internal topics {_java_list(internals)}")
        else:
            typer.echo(f"Deleting inferred internal topics {_java_list(inferred)}")
        to_delete = internals or inferred
        if not dry_run and to_delete:
            failed = {topic: error for topic, error in admin.delete_topics(to_delete).items() if error is not None}
            if failed:
                fail(f"Encountered an error deleting one or more topics: {failed}")
        typer.echo("Done.")
    raise typer.Exit(exit_code)


def _within(offset: int, earliest: int, latest: int) -> int:
    """Kafka's tool clamps a wanted offset into the partition's range (it says so; kfk says it the same way)."""
    if offset < earliest:
        typer.echo(f"New offset ({offset}) is lower than earliest offset. Value will be set to {earliest}")
        return earliest
    if offset > latest:
        typer.echo(f"New offset ({offset}) is higher than latest offset. Value will be set to {latest}")
        return latest
    return offset


@app.command("describe")
def describe(
    topology: Annotated[str, typer.Argument(
        help="MODULE:NAME of a Topology, a StreamsBuilder or a function of no argument returning one.")],
) -> None:
    """Print a topology as Kafka Streams' Topology.describe() does."""
    print(_resolve_topology(topology).describe())


def _resolve_topology(reference: str) -> Any:
    from kfk.streams import StreamsBuilder, Topology

    module_name, _, attribute = reference.partition(":")
    if not module_name or not attribute:
        fail(f"expected MODULE:NAME (e.g. wordcount:builder), not {reference!r}")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        found: Any = importlib.import_module(module_name)
    except Exception as error:  # noqa: BLE001 - the user's module: whatever it raises is reported in one line
        fail(f"cannot import {module_name}: {type(error).__name__}: {error}")
    for part in attribute.split("."):
        if not hasattr(found, part):
            fail(f"{module_name} has no {attribute}")
        found = getattr(found, part)
    if callable(found) and not isinstance(found, (Topology, StreamsBuilder)):
        try:
            found = found()
        except Exception as error:  # noqa: BLE001 - the user's code, as above
            fail(f"{reference}() failed: {type(error).__name__}: {error}")
    if isinstance(found, StreamsBuilder):
        found = found.build()
    if not isinstance(found, Topology):
        fail(f"{reference} is a {type(found).__name__}, not a Topology or a StreamsBuilder")
    return found
