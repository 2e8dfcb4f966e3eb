"""`kfk consumer-groups`: kafka-consumer-groups.sh, with Kafka's action flags (--list, --describe, --reset-offsets,
--delete) on one command.

--describe shows, per partition the group has an offset for or is assigned, the committed offset, the log end
offset and the lag, and the member that owns it. --reset-offsets plans new offsets (--to-earliest, --to-latest,
--to-current, --to-offset, --shift-by, --to-datetime) for --topic t[:p,p] or --all-topics, prints them, and commits
them only with --execute (--dry-run is the default, as in Kafka); the group must have no active members.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Annotated, Optional

import typer

from kfk.commands.client_options import (
    DEFAULT_BOOTSTRAP_SERVER,
    BootstrapServer,
    CommandConfig,
    Debug,
    JsonOutput,
    client_config,
    client_errors,
    console,
    print_json,
    table,
)
from kfk.commands.errors import fail

app = typer.Typer()

INACTIVE_STATES = ("Empty", "Dead")


@app.command("consumer-groups")
def consumer_groups(
    list_groups: Annotated[bool, typer.Option("--list", help="List the consumer groups.")] = False,
    describe: Annotated[bool, typer.Option("--describe", help="Offsets, lag and members of --group.")] = False,
    reset_offsets: Annotated[bool, typer.Option("--reset-offsets", help="Plan (and with --execute, commit) new "
                                                                        "offsets for --group.")] = False,
    delete: Annotated[bool, typer.Option("--delete", help="Delete --group (it must have no members).")] = False,
    group: Annotated[Optional[list[str]], typer.Option("--group", help="A group id (repeatable).")] = None,
    all_groups: Annotated[bool, typer.Option("--all-groups", help="Every group (with --describe or --delete).")
                          ] = False,
    topic: Annotated[Optional[list[str]], typer.Option(
        "--topic", help="With --reset-offsets: a topic, or topic:p,p for some partitions (repeatable).")] = None,
    all_topics: Annotated[bool, typer.Option("--all-topics", help="With --reset-offsets: every topic the group "
                                                                  "has offsets for.")] = False,
    to_earliest: Annotated[bool, typer.Option("--to-earliest", help="Reset to the log start offset.")] = False,
    to_latest: Annotated[bool, typer.Option("--to-latest", help="Reset to the log end offset.")] = False,
    to_current: Annotated[bool, typer.Option("--to-current", help="Reset to the committed offset.")] = False,
    to_offset: Annotated[Optional[int], typer.Option("--to-offset", help="Reset to this offset.")] = None,
    shift_by: Annotated[Optional[int], typer.Option("--shift-by", help="Move the committed offset by this many "
                                                                       "(negative: back).")] = None,
    to_datetime: Annotated[Optional[str], typer.Option(
        "--to-datetime", help="Reset to the first offset at or after YYYY-MM-DDTHH:mm:SS[.sss][zone].")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Only show the new offsets (the default).")] = False,
    execute: Annotated[bool, typer.Option("--execute", help="Commit the new offsets.")] = False,
    members: Annotated[bool, typer.Option("--members", help="With --describe: the members instead of offsets.")
                       ] = False,
    state: Annotated[bool, typer.Option("--state", help="With --describe or --list: the group state.")] = False,
    bootstrap_server: BootstrapServer = DEFAULT_BOOTSTRAP_SERVER,
    command_config: CommandConfig = None,
    json_output: JsonOutput = False,
    debug: Debug = False,
) -> None:
    """List, describe, reset the offsets of, or delete consumer groups."""
    actions = [name for name, chosen in (("--list", list_groups), ("--describe", describe),
                                         ("--reset-offsets", reset_offsets), ("--delete", delete)) if chosen]
    if len(actions) != 1:
        fail("give exactly one of --list, --describe, --reset-offsets, --delete")
    groups = list(group or [])
    if not list_groups and not groups and not all_groups:
        fail(f"{actions[0]} needs --group (or --all-groups)")
    if reset_offsets:
        scenarios = [to_earliest, to_latest, to_current, to_offset is not None, shift_by is not None,
                     to_datetime is not None]
        if sum(scenarios) != 1:
            fail("--reset-offsets needs exactly one of --to-earliest, --to-latest, --to-current, --to-offset, "
                 "--shift-by, --to-datetime")
        if not topic and not all_topics:
            fail("--reset-offsets needs --topic or --all-topics")
        if dry_run and execute:
            fail("--dry-run and --execute cannot be used together")
    target_time = _parse_datetime(to_datetime) if to_datetime is not None else None

    with client_errors(debug):
        from kfk.client import Admin

        with Admin(client_config(bootstrap_server, command_config)) as admin:
            if all_groups:
                groups = [listing.group_id for listing in admin.list_consumer_groups()]
            if list_groups:
                _list(admin, state, json_output)
            elif describe:
                _describe(admin, groups, members, state, json_output)
            elif delete:
                _delete(admin, groups, json_output)
            else:
                for group_id in groups:
                    _reset(admin, group_id, topic or [], all_topics, execute, json_output, to_earliest=to_earliest,
                           to_latest=to_latest, to_current=to_current, to_offset=to_offset, shift_by=shift_by,
                           target_time=target_time)


def _parse_datetime(text: str) -> int:
    """Kafka's --to-datetime format; without a zone the local time zone, as Kafka's tool does."""
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        fail(f"--to-datetime {text!r} is not in the format YYYY-MM-DDTHH:mm:SS.sss")
    if moment.tzinfo is None:
        moment = moment.astimezone()
    return int(moment.astimezone(timezone.utc).timestamp() * 1000)


def _list(admin, with_state: bool, json_output: bool) -> None:
    listings = [listing for listing in admin.list_consumer_groups() if listing.protocol_type in ("consumer", "")]
    if json_output:
        print_json([{"group": listing.group_id, "state": listing.state, "type": listing.group_type}
                    for listing in listings])
        return
    if not with_state:
        for listing in listings:
            typer.echo(listing.group_id)
        return
    grid = table("GROUP", "STATE")
    for listing in listings:
        grid.add_row(listing.group_id, listing.state)
    console().print(grid)


def _describe(admin, groups: list[str], members: bool, with_state: bool, json_output: bool) -> None:
    from kfk.client import TopicPartition

    descriptions = admin.describe_consumer_groups(groups)
    result = []
    for group_id in groups:
        description = descriptions[group_id]
        owners = {tp: member for member in description.members for tp in member.assignment}
        committed = admin.list_consumer_group_offsets(group_id)
        partitions = sorted(set(committed) | set(owners))
        end_offsets = admin.end_offsets(partitions) if partitions else {}
        rows = []
        for tp in partitions:
            offset = committed.get(tp)
            owner = owners.get(tp)
            end = end_offsets.get(tp)
            rows.append({
                "group": group_id, "topic": tp.topic, "partition": tp.partition,
                "current_offset": offset.offset if offset is not None else None,
                "log_end_offset": end,
                "lag": (end - offset.offset) if offset is not None and end is not None else None,
                "consumer_id": owner.member_id if owner else None,
                "host": owner.host if owner else None,
                "client_id": owner.client_id if owner else None})
        result.append({
            "group": group_id, "state": description.state, "assignor": description.partition_assignor,
            "coordinator": description.coordinator,
            "members": [{"consumer_id": m.member_id, "group_instance_id": m.group_instance_id, "host": m.host,
                         "client_id": m.client_id, "partitions": [str(TopicPartition(*tp)) for tp in m.assignment]}
                        for m in description.members],
            "offsets": rows})
    if json_output:
        print_json(result)
        return
    out = console()
    for entry in result:
        if with_state:
            grid = table("GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS")
            grid.add_row(entry["group"], str(entry["coordinator"]), entry["assignor"] or "", entry["state"],
                         str(len(entry["members"])))
            out.print(grid)
            continue
        if entry["state"] in INACTIVE_STATES and not entry["members"]:
            typer.echo(f"Consumer group '{entry['group']}' has no active members.", err=True)
        if members:
            grid = table("GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS")
            for member in entry["members"]:
                grid.add_row(entry["group"], member["consumer_id"], member["host"], member["client_id"],
                             str(len(member["partitions"])))
            out.print(grid)
            continue
        grid = table("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST",
                     "CLIENT-ID")
        for row in entry["offsets"]:
            grid.add_row(row["group"], row["topic"], str(row["partition"]), _dash(row["current_offset"]),
                         _dash(row["log_end_offset"]), _dash(row["lag"]), _dash(row["consumer_id"]),
                         _dash(row["host"]), _dash(row["client_id"]))
        out.print(grid)


def _dash(value) -> str:
    return "-" if value is None else str(value)


def _delete(admin, groups: list[str], json_output: bool) -> None:
    results = admin.delete_consumer_groups(groups)
    failed = {group: error for group, error in results.items() if error is not None}
    if json_output:
        print_json({group: None if error is None else str(error) for group, error in results.items()})
    else:
        for group, error in results.items():
            if error is None:
                typer.echo(f"Deletion of requested consumer groups ('{group}') was successful.")
    if failed:
        first = next(iter(failed.values()))
        raise first


def _reset(admin, group_id: str, topics: list[str], all_topics: bool, execute: bool, json_output: bool, *,
           to_earliest: bool, to_latest: bool, to_current: bool, to_offset: int | None, shift_by: int | None,
           target_time: int | None) -> None:
    from kfk.client import OffsetAndMetadata

    from kfk.errors import GroupIdNotFoundError

    try:
        state = admin.describe_consumer_groups([group_id])[group_id].state
    except GroupIdNotFoundError:  # DescribeGroups v6+ (KIP-1043): a group with no members and no offsets yet
        state = "Dead"
    if state not in INACTIVE_STATES:
        fail(f"assignments can only be reset if the group '{group_id}' is inactive, but the current state is "
             f"{state}")
    committed = admin.list_consumer_group_offsets(group_id)
    partitions = sorted(committed) if all_topics else _partitions_of(admin, topics)
    if not partitions:
        fail(f"group '{group_id}' has no offsets to reset (give --topic)")
    new = _new_offsets(admin, partitions, {tp: offset.offset for tp, offset in committed.items()},
                       to_earliest=to_earliest, to_latest=to_latest, to_current=to_current, to_offset=to_offset,
                       shift_by=shift_by, target_time=target_time)
    if execute:
        results = admin.alter_consumer_group_offsets(group_id, {tp: OffsetAndMetadata(offset)
                                                                for tp, offset in new.items()})
        errors = [error for error in results.values() if error is not None]
        if errors:
            raise errors[0]
    elif not json_output:
        typer.echo("Dry run: no offsets were changed (add --execute to commit these).", err=True)
    if json_output:
        print_json([{"group": group_id, "topic": tp.topic, "partition": tp.partition, "new_offset": offset}
                    for tp, offset in sorted(new.items())])
        return
    grid = table("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET")
    for tp, offset in sorted(new.items()):
        grid.add_row(group_id, tp.topic, str(tp.partition), str(offset))
    console().print(grid)


def _partitions_of(admin, topics: list[str]) -> list:
    """The partitions --topic names: topic:0,1 for some, a bare topic for all of its partitions."""
    from kfk.client import TopicPartition

    partitions = []
    for spec in topics:
        name, _, numbers = spec.partition(":")
        if numbers:
            try:
                partitions.extend(TopicPartition(name, int(n)) for n in numbers.split(",") if n.strip())
            except ValueError:
                fail(f"--topic {spec!r}: partitions must be numbers, as in topic:0,1")
        else:
            partitions.extend(TopicPartition(name, p)
                              for p in range(len(admin.describe_topics([name])[name].partitions)))
    return partitions


def _new_offsets(admin, partitions: list, committed: dict, *, to_earliest: bool, to_latest: bool,
                 to_current: bool, to_offset: int | None, shift_by: int | None, target_time: int | None) -> dict:
    """Each partition's new offset under the chosen --to-*/--shift-by/--to-datetime rule, kept within the log
    (an offset before the log start or past the end is moved to that end, as Kafka does)."""
    from kfk.common.constants import LATEST_TIMESTAMP

    earliest = admin.beginning_offsets(partitions)
    latest = admin.end_offsets(partitions)

    def clamp(tp, offset: int) -> int:
        return max(earliest[tp], min(latest[tp], offset))

    new = {}
    if target_time is not None:
        found = admin.list_offsets(dict.fromkeys(partitions, target_time))
        found_latest = admin.list_offsets(dict.fromkeys([tp for tp, value in found.items() if value is None],
                                                        LATEST_TIMESTAMP)) if None in found.values() else {}
        for tp in partitions:
            value = found.get(tp) or found_latest.get(tp)
            new[tp] = value.offset if value is not None else latest[tp]
    for tp in partitions:
        current = committed.get(tp)
        if to_earliest:
            new[tp] = earliest[tp]
        elif to_latest:
            new[tp] = latest[tp]
        elif to_current:
            new[tp] = current if current is not None else latest[tp]
        elif to_offset is not None:
            new[tp] = clamp(tp, to_offset)
        elif shift_by is not None:
            new[tp] = clamp(tp, (current if current is not None else latest[tp]) + shift_by)
    return new
