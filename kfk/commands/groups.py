"""`kfk consumer-groups`: kafka-consumer-groups.sh, with Kafka's action flags (--list, --describe, --reset-offsets,
--delete, --delete-offsets) on one command, printing Kafka's lines (its columns, widths and row order).

--list [--state [S,S]] lists the groups (with their state, or only those in the given states). --describe shows,
per partition the group has an offset for or is assigned, the committed offset, the log end offset and the lag,
and the member that owns it (--offsets, the default); --members lists the members and --state the group's
coordinator, assignor, state and size (--verbose adds Kafka's extra columns to each). --reset-offsets plans new offsets
(--to-earliest, --to-latest, --to-current, --to-offset, --shift-by, --to-datetime, --by-duration, --from-file) for
--topic t[:p,p] or --all-topics, prints them (or with --export, Kafka's CSV that --from-file reads back), and
commits them only with --execute (--dry-run is the default, as in Kafka); the group must have no active members.
--delete-offsets removes a group's committed offsets of --topic. --timeout bounds each call to the cluster (ms).
"""

from __future__ import annotations

import csv
import re
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Annotated, Any, Optional

import typer

from kfk.commands.client_options import (
    DEFAULT_BOOTSTRAP_SERVER,
    BootstrapServer,
    CommandConfig,
    Debug,
    JsonOutput,
    client_config,
    client_errors,
    print_json,
)
from kfk.commands.errors import fail
from kfk.commands.kafka_layout import columns, hash_map_order, java_string_hash, partitions_in_kafka_order

app = typer.Typer()

INACTIVE_STATES = ("Empty", "Dead")
# What kafka-consumer-groups.sh --reset-offsets (Kafka 4.4's) says on stderr when neither --dry-run nor --execute is
# given.
DRY_RUN_WARNING = ("WARN: No action will be performed as the --execute option is missing. In version 5.0, this "
                   "command will require either --dry-run or --execute to be specified. You should add the --dry-run "
                   "option explicitly if you are scripting this command and want to keep the current default "
                   "behavior without prompting.")


@app.command("consumer-groups")
def consumer_groups(
    list_groups: Annotated[bool, typer.Option("--list", help="List the consumer groups.")] = False,
    describe: Annotated[bool, typer.Option("--describe", help="Offsets, lag and members of --group.")] = False,
    reset_offsets: Annotated[bool, typer.Option("--reset-offsets", help="Plan (and with --execute, commit) new "
                                                                        "offsets for --group.")] = False,
    delete: Annotated[bool, typer.Option("--delete", help="Delete --group (it must have no members).")] = False,
    delete_offsets: Annotated[bool, typer.Option("--delete-offsets", help="Delete the committed offsets of --topic "
                                                                          "from one --group.")] = False,
    group: Annotated[Optional[list[str]], typer.Option("--group", help="A group id (repeatable).")] = None,
    all_groups: Annotated[bool, typer.Option("--all-groups", help="Every group (with --describe or --delete).")
                          ] = False,
    topic: Annotated[Optional[list[str]], typer.Option(
        "--topic", help="With --reset-offsets or --delete-offsets: a topic, or topic:p,p for some partitions "
                        "(repeatable).")] = None,
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
    by_duration: Annotated[Optional[str], typer.Option(
        "--by-duration", help="Reset to the first offset at or after this long ago: PnDTnHnMnS, e.g. PT15M.")
    ] = None,
    from_file: Annotated[Optional[str], typer.Option(
        "--from-file", help="Reset to the offsets of a CSV file: topic,partition,offset (or group,topic,"
                            "partition,offset) lines, as --export writes them.")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Only show the new offsets (the default).")] = False,
    execute: Annotated[bool, typer.Option("--execute", help="Commit the new offsets.")] = False,
    export: Annotated[bool, typer.Option("--export", help="With --reset-offsets: print the plan as CSV "
                                                          "(for --from-file) instead of a table.")] = False,
    offsets: Annotated[bool, typer.Option("--offsets", help="With --describe: offsets and lag per partition "
                                                            "(the default).")] = False,
    members: Annotated[bool, typer.Option("--members", help="With --describe: the members instead of offsets.")
                       ] = False,
    verbose: Annotated[bool, typer.Option("--verbose", help="With --describe: more columns (the offsets' leader "
                                                            "epochs, the members' assignments, the group's epochs).")
                       ] = False,
    state: Annotated[bool, typer.Option(
        "--state", help="With --describe: the group's state. With --list: each group's state, or, followed by "
                        "states (Stable,Empty...), only the groups in them.")] = False,
    states: Annotated[Optional[list[str]], typer.Argument(
        help="The states after --list --state (comma-separated).", show_default=False)] = None,
    timeout: Annotated[int, typer.Option("--timeout", min=1, help="How long each call to the cluster may "
                                                                   "take, in ms.")] = 5000,
    bootstrap_server: BootstrapServer = DEFAULT_BOOTSTRAP_SERVER,
    command_config: CommandConfig = None,
    json_output: JsonOutput = False,
    debug: Debug = False,
) -> None:
    """List, describe, reset the offsets of, or delete consumer groups and their offsets."""
    actions = [name for name, chosen in (("--list", list_groups), ("--describe", describe),
                                         ("--reset-offsets", reset_offsets), ("--delete", delete),
                                         ("--delete-offsets", delete_offsets)) if chosen]
    if len(actions) != 1:
        fail("give exactly one of --list, --describe, --reset-offsets, --delete, --delete-offsets")
    groups = list(group or [])
    if not list_groups and not groups and not all_groups:
        fail(f"{actions[0]} needs --group (or --all-groups)")
    state_filter = _state_filter(states, state, list_groups)
    if describe and offsets + members + state > 1:
        fail("--describe takes at most one of --offsets, --members, --state")
    if verbose and not describe:
        fail("--verbose goes with --describe")
    if delete_offsets and (len(groups) != 1 or not topic):
        fail("--delete-offsets needs one --group and --topic")
    if export and not reset_offsets:
        fail("--export goes with --reset-offsets")
    target_time = None
    if reset_offsets:
        scenarios = [to_earliest, to_latest, to_current, to_offset is not None, shift_by is not None,
                     to_datetime is not None, by_duration is not None, from_file is not None]
        if sum(scenarios) != 1:
            fail("--reset-offsets needs exactly one of --to-earliest, --to-latest, --to-current, --to-offset, "
                 "--shift-by, --to-datetime, --by-duration, --from-file")
        if not topic and not all_topics and from_file is None:
            fail("--reset-offsets needs --topic or --all-topics")
        if dry_run and execute:
            fail("--dry-run and --execute cannot be used together")
        if to_datetime is not None:
            target_time = _parse_datetime(to_datetime)
        elif by_duration is not None:
            target_time = int(time.time() * 1000) - _parse_duration(by_duration)
    plan = _read_plan(from_file, groups) if reset_offsets and from_file is not None else None
    if reset_offsets and not dry_run and not execute:  # once the flags are known good: a mistake stays one line
        typer.echo(DRY_RUN_WARNING, err=True)

    with client_errors(debug):
        from kfk.client import Admin

        config = client_config(bootstrap_server, command_config, {"default.api.timeout.ms": timeout})
        with Admin(config) as admin:
            if all_groups:
                groups = [listing.group_id for listing in admin.list_consumer_groups()]
            if list_groups:
                _list(admin, state, state_filter, json_output)
            elif describe:
                _describe(admin, groups, members, verbose, state, json_output)
            elif delete:
                _delete(admin, groups, json_output)
            elif delete_offsets:
                _delete_offsets(admin, groups[0], topic or [], json_output)
            else:
                rule = ResetRule(to_earliest=to_earliest, to_latest=to_latest, to_current=to_current,
                                 to_offset=to_offset, shift_by=shift_by, target_time=target_time)
                new_offsets = {group_id: _reset(admin, group_id, topic or [], all_topics, execute, rule,
                                                plan.get(group_id, {}) if plan is not None else None)
                               for group_id in groups}
                _print_reset(new_offsets, export, json_output)


@dataclass(frozen=True, kw_only=True)
class ResetRule:
    """Which new offset --reset-offsets gives each partition: one of the --to-*/--shift-by rules, or a target time
    (--to-datetime, --by-duration); --from-file gives its offsets instead."""

    to_earliest: bool
    to_latest: bool
    to_current: bool
    to_offset: int | None
    shift_by: int | None
    target_time: int | None


GROUP_STATES = ("PreparingRebalance", "CompletingRebalance", "Stable", "Dead", "Empty")


def _state_filter(states: list[str] | None, state: bool, list_groups: bool) -> set[str] | None:
    """The states after `--list --state` (Kafka's optional value of --state), in the broker's spelling."""
    if not states:
        return None
    if not (state and list_groups):
        fail(f"unexpected argument {states[0]!r} (states go after --list --state)")
    by_lower = {name.lower(): name for name in GROUP_STATES}
    wanted = set()
    for name in (part.strip() for item in states for part in item.split(",")):
        if name.lower() not in by_lower:
            fail(f"unknown group state {name!r} (one of {', '.join(GROUP_STATES)})")
        wanted.add(by_lower[name.lower()])
    return wanted


_DURATION = re.compile(r"([-+]?)P(?:([-+]?\d+)D)?(?:T(?:([-+]?\d+)H)?(?:([-+]?\d+)M)?(?:([-+]?\d+(?:[.,]\d{1,9})?)S)?)?",
                       re.IGNORECASE)


def _parse_duration(text: str) -> int:
    """--by-duration as Java's Duration.parse reads PnDTnHnMnS, in milliseconds."""
    match = _DURATION.fullmatch(text.strip())
    if match is None or not any(match.groups()[1:]) or text.strip().upper().endswith("T"):
        fail(f"--by-duration {text!r} is not a duration in the format PnDTnHnMnS (e.g. PT15M, P1DT2H)")
    sign, days, hours, minutes, seconds = match.groups()
    total = (int(days or 0) * 86400 + int(hours or 0) * 3600 + int(minutes or 0) * 60
             + float((seconds or "0").replace(",", ".")))
    return int(total * 1000) * (-1 if sign == "-" else 1)


def _read_plan(path: str, groups: list[str]) -> dict[str, dict[Any, int]]:
    """A --from-file reset plan, per group: Kafka's CSV of topic,partition,offset lines (for the one --group) or
    group,topic,partition,offset lines."""
    from kfk.client import TopicPartition

    try:
        with open(path, encoding="utf-8") as handle:
            lines = [line.strip() for line in handle if line.strip()]
    except OSError as error:
        fail(f"cannot read {path}: {error.strerror or error}")
    plan: dict[str, dict[Any, int]] = {}
    for number, line in enumerate(lines, 1):
        fields = [field.strip() for field in next(csv.reader([line]))]  # Kafka quotes long names
        if len(fields) == 3 and len(groups) == 1:
            fields.insert(0, groups[0])
        if len(fields) != 4:
            fail(f"{path} line {number}: expected topic,partition,offset"
                 f"{' (one --group)' if len(fields) == 3 else ''} or group,topic,partition,offset, got {line!r}")
        group_id, topic_name, partition, offset = fields
        try:
            plan.setdefault(group_id, {})[TopicPartition(topic_name, int(partition))] = int(offset)
        except ValueError:
            fail(f"{path} line {number}: partition and offset must be numbers, got {line!r}")
    missing = [group_id for group_id in groups if group_id not in plan]
    if missing:
        fail(f"{path} has no offsets for group '{missing[0]}'")
    return plan


def _parse_datetime(text: str) -> int:
    """Kafka's --to-datetime format; without a zone the local time zone, as Kafka's tool does."""
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        fail(f"--to-datetime {text!r} is not in the format YYYY-MM-DDTHH:mm:SS.sss")
    if moment.tzinfo is None:
        moment = moment.astimezone()
    return int(moment.astimezone(timezone.utc).timestamp() * 1000)


def _list(admin, with_state: bool, state_filter: set[str] | None, json_output: bool) -> None:
    listings = [listing for listing in admin.list_consumer_groups() if listing.protocol_type in ("consumer", "")
                and (state_filter is None or listing.state in state_filter)]
    if json_output:
        print_json([{"group": listing.group_id, "state": listing.state, "type": listing.group_type}
                    for listing in listings])
        return
    if not with_state:
        for listing in listings:
            typer.echo(listing.group_id)
        return
    # Kafka's widths: the group column 10 wider than the longest id (at least 15), the state 20.
    widths = [max([15, *(len(listing.group_id) for listing in listings)]) + 10, 20]
    typer.echo(columns(["GROUP", "STATE"], widths))
    for listing in listings:
        typer.echo(columns([listing.group_id, listing.state], widths))


def _describe(admin, groups: list[str], members: bool, verbose: bool, with_state: bool, json_output: bool) -> None:
    from kfk.client import TopicPartition
    from kfk.errors import GroupIdNotFoundError

    result = []
    for group_id in sorted(set(groups)):  # Kafka's tool describes the groups in the order of their ids
        try:
            description = admin.describe_consumer_groups([group_id])[group_id]
        except GroupIdNotFoundError:  # DescribeGroups v6+ (KIP-1043)
            description = None
        committed = admin.list_consumer_group_offsets(group_id)
        if description is None or (description.state == "Dead" and not committed):
            fail(f"Consumer group '{group_id}' does not exist.")
        partitions = _offset_partitions(description.members, committed)
        end_offsets = admin.end_offsets([tp for tp, _ in partitions]) if partitions else {}
        rows = []
        for tp, owner in partitions:
            offset = committed.get(tp)
            end = end_offsets.get(tp)
            rows.append({
                "group": group_id, "topic": tp.topic, "partition": tp.partition,
                "leader_epoch": offset.leader_epoch if offset is not None and offset.leader_epoch >= 0 else None,
                "current_offset": offset.offset if offset is not None else None,
                "log_end_offset": end,
                "lag": (end - offset.offset) if offset is not None and end is not None else None,
                "consumer_id": owner.member_id if owner else None,
                "host": owner.host if owner else None,
                "client_id": owner.client_id if owner else None})
        result.append({
            "group": group_id, "state": description.state, "assignor": description.partition_assignor,
            "coordinator": description.coordinator,
            "group_epoch": description.group_epoch, "target_assignment_epoch": description.target_assignment_epoch,
            "members": [{"consumer_id": m.member_id, "group_instance_id": m.group_instance_id, "host": m.host,
                         "client_id": m.client_id, "partitions": [str(TopicPartition(*tp)) for tp in m.assignment],
                         "assignment": _assignment(m.assignment), "member_epoch": m.member_epoch,
                         "target_assignment": None if m.target_assignment is None
                         else _assignment(m.target_assignment), "upgraded": m.upgraded}
                        for m in description.members],
            "offsets": rows})
    if json_output:
        print_json(result)
        return
    brokers = {broker.node_id: broker for broker in admin.describe_cluster().brokers} if with_state else {}
    for entry in result:
        _state_note(entry["group"], entry["state"])
        if with_state:
            node = brokers.get(entry["coordinator"])
            coordinator = f"{node.host}:{node.port}  ({node.node_id})" if node else f"({entry['coordinator']})"
            lines = _state_lines(entry, coordinator, verbose)
        elif members:
            lines = _member_lines(entry, verbose)
        elif entry["offsets"]:
            lines = _offset_lines(entry, verbose)
        else:
            lines = []  # Kafka's tool prints no table for a group without offsets or assignments
        for line in lines:
            typer.echo(line)


def _offset_partitions(members, committed: dict) -> list:
    """The partitions --describe shows, each with its owner (or None), in the order Kafka's tool prints them: the
    members' partitions, the member with the most first, then the partitions the group has offsets for but no
    member owns; each set by topic, then partition (Kafka 4.4's tool sorts them; 4.0's kept its HashMap's order)."""
    def in_order(partitions) -> list:
        return sorted(partitions, key=lambda tp: (tp.topic, tp.partition))

    owned = [(member, in_order(member.assignment))
             for member in sorted((m for m in members if m.assignment), key=lambda m: -len(m.assignment))]
    assigned = {tp for _, partitions in owned for tp in partitions}
    return [(tp, member) for member, partitions in owned for tp in partitions] + \
        [(tp, None) for tp in in_order(tp for tp in committed if tp not in assigned)]


def _state_note(group_id: str, state: str) -> None:
    """What Kafka's tool says on stderr about a group that is empty or rebalancing."""
    if state == "Empty":
        typer.echo(f"\nConsumer group '{group_id}' has no active members.", err=True)
    elif state in ("PreparingRebalance", "CompletingRebalance", "Assigning", "Reconciling"):
        typer.echo(f"\nWarning: Consumer group '{group_id}' is rebalancing.", err=True)


def _offset_lines(entry: dict, verbose: bool) -> list[str]:
    """--describe [--offsets]: a blank line, the header and a line per partition; --verbose adds the leader epoch of
    each committed offset."""
    rows = entry["offsets"]
    widths = [max(15, len(entry["group"])), max([15, *(len(row["topic"]) for row in rows)]), 10,
              *([15] if verbose else []), 15, 15, 15,
              max([15, *(len(_dash(row["consumer_id"])) for row in rows)]),
              max([15, *(len(_dash(row["host"])) for row in rows)]), None]
    header = ["GROUP", "TOPIC", "PARTITION", *(["LEADER-EPOCH"] if verbose else []), "CURRENT-OFFSET",
              "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID"]
    return ["", columns(header, widths)] + [
        columns([row["group"], row["topic"], row["partition"], *([_dash(row["leader_epoch"])] if verbose else []),
                 _dash(row["current_offset"]), _dash(row["log_end_offset"]), _dash(row["lag"]),
                 _dash(row["consumer_id"]), _dash(row["host"]), _dash(row["client_id"])], widths)
        for row in rows]


def _member_lines(entry: dict, verbose: bool) -> list[str]:
    """--describe --members: a blank line, the header and a line per member (each cell padded, the last one too,
    and followed by a space); --verbose adds the epochs and assignments, which a classic group's members have only
    the current assignment of. The group instance id column appears only if a member has one."""
    members = entry["members"]
    with_instance_id = any(member["group_instance_id"] for member in members)
    widths = [max(15, len(entry["group"])), max([15, *(len(m["consumer_id"]) for m in members)]),
              *([max([17, *(len(m["group_instance_id"] or "") for m in members)])] if with_instance_id else []),
              max([15, *(len(m["host"]) for m in members)]), max([15, *(len(m["client_id"]) for m in members)]), 15]
    assignment_width = max([20, *(len(m["assignment"]) for m in members)])
    target_width = max([20, *(len(m["target_assignment"] or "-") for m in members)])
    # A group being migrated (a classic member among consumer-protocol ones) also shows which members upgraded.
    with_upgraded = any(member["upgraded"] is False for member in members)
    verbose_widths = [15, assignment_width, 15, target_width, *([None] if with_upgraded else [])]

    def line(cells: list, verbose_cells: list) -> str:
        return columns(cells, widths) + " " + (columns(verbose_cells, verbose_widths) if verbose else "")

    header = line(["GROUP", "CONSUMER-ID", *(["GROUP-INSTANCE-ID"] if with_instance_id else []), "HOST", "CLIENT-ID",
                   "#PARTITIONS"], ["CURRENT-EPOCH", "CURRENT-ASSIGNMENT", "TARGET-EPOCH", "TARGET-ASSIGNMENT",
                                    *(["UPGRADED"] if with_upgraded else [])])
    return ["", header] + [
        line([entry["group"], member["consumer_id"],
              *([member["group_instance_id"] or ""] if with_instance_id else []), member["host"],
              member["client_id"], len(member["partitions"])],
             [_dash(member["member_epoch"]), member["assignment"],
              _dash(entry["target_assignment_epoch"] if member["member_epoch"] is not None else None),
              member["target_assignment"] or "-",
              *([str(member["upgraded"]).lower()] if with_upgraded else [])])
        for member in members]


def _state_lines(entry: dict, coordinator: str, verbose: bool) -> list[str]:
    """--describe --state: a blank line, the header and the group's line; --verbose adds the group epoch and the
    target assignment epoch, which a classic group has none of."""
    widths = [max(15, len(entry["group"])), max(25, len(coordinator)), 20, 20, *([15, 25] if verbose else []), None]
    header = ["GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE",
              *(["GROUP-EPOCH", "TARGET-ASSIGNMENT-EPOCH"] if verbose else []), "#MEMBERS"]
    values = [entry["group"], coordinator, entry["assignor"] or "-", entry["state"],
              *([_dash(entry["group_epoch"]), _dash(entry["target_assignment_epoch"])] if verbose else []),
              len(entry["members"])]
    return ["", columns(header, widths), columns(values, widths)]


def _assignment(assignment) -> str:
    """A member's partitions as Kafka's --members --verbose shows them: ``t1:0,1;t2:0``, or ``-``."""
    by_topic: dict[str, list[int]] = {}
    for topic, partition in assignment:
        by_topic.setdefault(topic, []).append(partition)
    return ";".join(sorted(f"{topic}:{','.join(map(str, sorted(partitions)))}"
                           for topic, partitions in by_topic.items())) or "-"


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


def _delete_offsets(admin, group_id: str, topics: list[str], json_output: bool) -> None:
    """Kafka's --delete-offsets: the outcome per partition; exit 1 if any partition kept its offset."""
    from kfk.errors import GroupIdNotFoundError, GroupNotEmptyError

    try:
        results = admin.delete_consumer_group_offsets(group_id, _partitions_of(admin, topics))
    except GroupIdNotFoundError:
        fail(f"'{group_id}' does not exist.")
    except GroupNotEmptyError:
        fail(f"Deleting offsets of a consumer group '{group_id}' is forbidden if the group is not empty.")
    if json_output:
        print_json([{"group": group_id, "topic": tp.topic, "partition": tp.partition,
                     "error": None if error is None else str(error)} for tp, error in sorted(results.items())])
    else:
        if any(results.values()):
            typer.echo("Encounter some partition level error, see the follow-up details:", err=True)
        else:
            typer.echo(f"Request succeeded for deleting offsets from group {group_id}.")  # Kafka 4.4's words
        # Kafka's table: a blank line, then the partitions in the order of "<topic><partition>" as text.
        # Kafka 4.4 sizes the topic column to the longest topic (4.0 used a fixed 30).
        widths = [max([len("TOPIC"), *(len(tp.topic) for tp in results)]), 10, 15]
        typer.echo("\n" + columns(["TOPIC", "PARTITION", "STATUS"], widths))
        for tp, error in sorted(results.items(), key=lambda item: f"{item[0].topic}{item[0].partition}"):
            typer.echo(columns([tp.topic, tp.partition, "Successful" if error is None else f"Error: {error}"],
                               widths))
    if any(results.values()):
        raise typer.Exit(1)


def _reset(admin, group_id: str, topics: list[str], all_topics: bool, execute: bool, rule: ResetRule,
           planned: dict | None) -> dict:
    """The group's new offsets (committed with --execute); ``planned`` holds --from-file's offsets."""
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
    if planned is not None:
        partitions = sorted(planned)
    else:
        partitions = sorted(committed) if all_topics else _partitions_of(admin, topics)
    if not partitions:
        fail(f"group '{group_id}' has no offsets to reset (give --topic)")
    new = _new_offsets(admin, partitions, {tp: offset.offset for tp, offset in committed.items()}, rule, planned)
    if execute:
        results = admin.alter_consumer_group_offsets(group_id, {tp: OffsetAndMetadata(offset)
                                                                for tp, offset in new.items()})
        errors = [error for error in results.values() if error is not None]
        if errors:
            raise errors[0]
    return new


def _print_reset(new_offsets: dict[str, dict], export: bool, json_output: bool) -> None:
    """The reset plan: Kafka's lines (a blank line, the header, a line per partition), Kafka's CSV with --export
    (without the group column for one group, as Kafka writes it and --from-file reads it), both in the order
    Kafka's tool prints them, or JSON (sorted)."""
    plan = [(group_id, tp, new_offsets[group_id][tp]) for group_id in hash_map_order(new_offsets, java_string_hash)
            for tp in partitions_in_kafka_order(new_offsets[group_id])]
    if export:
        single = len(new_offsets) == 1
        typer.echo("".join(f"{'' if single else _csv_field(group_id) + ','}{_csv_field(tp.topic)},{tp.partition},"
                           f"{offset}\n" for group_id, tp, offset in plan))
    elif json_output:
        print_json([{"group": group_id, "topic": tp.topic, "partition": tp.partition, "new_offset": offset}
                    for group_id, offsets in new_offsets.items() for tp, offset in sorted(offsets.items())])
    elif new_offsets:
        # Kafka 4.4's widths (4.0's were fixed: 30, 30, 10, 15): as --describe's, from the longest group and topic.
        widths = [max([15, *(len(group_id) for group_id, _, _ in plan)]),
                  max([15, *(len(tp.topic) for _, tp, _ in plan)]), 10, None]
        typer.echo("\n" + columns(["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"], widths))
        for group_id, tp, offset in plan:
            typer.echo(columns([group_id, tp.topic, tp.partition, offset], widths))


#: Kafka's tools write their CSV with Jackson, which quotes any text longer than this without looking at it.
_CSV_QUOTE_CHECK_LENGTH = 24


def _csv_field(text: str) -> str:
    """A text cell as Kafka's CSV writer writes it: quoted (its quotes doubled) when long or holding a separator,
    a quote or a line break."""
    if len(text) > _CSV_QUOTE_CHECK_LENGTH or any(char in text for char in ',"\r\n'):
        return '"' + text.replace('"', '""') + '"'
    return text


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


def _new_offsets(admin, partitions: list, committed: dict, rule: ResetRule, planned: dict | None) -> dict:
    """Each partition's new offset under the chosen rule (or --from-file's plan), kept within the log (an offset
    before the log start or past the end is moved to that end, as Kafka does)."""
    from kfk.common.constants import LATEST_TIMESTAMP

    earliest = admin.beginning_offsets(partitions)
    latest = admin.end_offsets(partitions)

    def clamp(tp, offset: int) -> int:
        return max(earliest[tp], min(latest[tp], offset))

    if planned is not None:
        return {tp: clamp(tp, planned[tp]) for tp in partitions}
    new = {}
    if rule.target_time is not None:
        found = admin.list_offsets(dict.fromkeys(partitions, rule.target_time))
        found_latest = admin.list_offsets(dict.fromkeys([tp for tp, value in found.items() if value is None],
                                                        LATEST_TIMESTAMP)) if None in found.values() else {}
        for tp in partitions:
            value = found.get(tp) or found_latest.get(tp)
            new[tp] = value.offset if value is not None else latest[tp]
    for tp in partitions:
        current = committed.get(tp)
        if rule.to_earliest:
            new[tp] = earliest[tp]
        elif rule.to_latest:
            new[tp] = latest[tp]
        elif rule.to_current:
            new[tp] = current if current is not None else latest[tp]
        elif rule.to_offset is not None:
            new[tp] = clamp(tp, rule.to_offset)
        elif rule.shift_by is not None:
            new[tp] = clamp(tp, (current if current is not None else latest[tp]) + rule.shift_by)
    return new
