"""`kfk share-groups`: kafka-share-groups.sh (KIP-932), with Kafka's action flags on one command and its lines.

--list prints the share groups' ids (--list --state [S,S]: with their states, or only those in the given states). --describe --group G (or --all-groups) shows, per partition the group has read,
the share-partition start offset and the lag (--offsets, the default; --verbose adds the leader epoch); --members
its members, their clients and assignments; --state its coordinator, state and size. --reset-offsets plans new
start offsets for one empty group (--to-earliest, --to-latest, --to-current, --to-offset, --to-datetime,
--from-file; for --topic t[:p,p] or --all-topics), prints them (or Kafka's CSV with --export) and sets them only
with --execute (Kafka's share tool requires --dry-run or --execute). --delete-offsets forgets an empty group's
state of whole topics; --delete deletes empty share groups. Refusals are Kafka's words.
"""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from kfk.commands.client_options import (
    DEFAULT_BOOTSTRAP_SERVER,
    BootstrapServer,
    CommandConfig,
    Debug,
    client_config,
    client_errors,
)
from kfk.commands.errors import fail
from kfk.commands.groups import (INACTIVE_STATES, ResetRule, _assignment, _new_offsets, _parse_datetime,
                                 _partitions_of, _print_reset, _read_plan)
from kfk.commands.kafka_layout import columns, hash_map_order, java_string_hash

app = typer.Typer()

SHARE = "share"


@app.command("share-groups")
def share_groups(
    list_groups: Annotated[bool, typer.Option("--list", help="List the share groups.")] = False,
    describe: Annotated[bool, typer.Option("--describe", help="Start offsets and lag, members or state of --group."
                                           )] = False,
    reset_offsets: Annotated[bool, typer.Option("--reset-offsets", help="Plan (and with --execute, set) new start "
                                                                        "offsets for one empty --group.")] = False,
    delete: Annotated[bool, typer.Option("--delete", help="Delete --group (it must have no members).")] = False,
    delete_offsets: Annotated[bool, typer.Option("--delete-offsets", help="Forget one empty --group's state of "
                                                                          "--topic.")] = False,
    group: Annotated[Optional[list[str]], typer.Option("--group", help="A group id (repeatable).")] = None,
    all_groups: Annotated[bool, typer.Option("--all-groups", help="Every share group (with --describe or "
                                                                  "--delete).")] = False,
    topic: Annotated[Optional[list[str]], typer.Option(
        "--topic", help="With --reset-offsets: a topic, or topic:p,p for some partitions; with --delete-offsets: a "
                        "topic (repeatable).")] = None,
    all_topics: Annotated[bool, typer.Option("--all-topics", help="With --reset-offsets: every topic the group "
                                                                  "has state for.")] = False,
    to_earliest: Annotated[bool, typer.Option("--to-earliest", help="Reset to the log start offset.")] = False,
    to_latest: Annotated[bool, typer.Option("--to-latest", help="Reset to the log end offset.")] = False,
    to_current: Annotated[bool, typer.Option("--to-current", help="Reset to the current start offset.")] = False,
    to_offset: Annotated[Optional[int], typer.Option("--to-offset", help="Reset to this offset.")] = None,
    to_datetime: Annotated[Optional[str], typer.Option(
        "--to-datetime", help="Reset to the first offset at or after YYYY-MM-DDTHH:mm:SS[.sss][zone].")] = None,
    from_file: Annotated[Optional[str], typer.Option(
        "--from-file", help="Reset to the offsets of a CSV file of topic,partition,offset lines, as --export "
                            "writes them.")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Only show the new offsets.")] = False,
    execute: Annotated[bool, typer.Option("--execute", help="Set the new offsets.")] = False,
    export: Annotated[bool, typer.Option("--export", help="With --reset-offsets: print the plan as CSV "
                                                          "(for --from-file) instead of a table.")] = False,
    offsets: Annotated[bool, typer.Option("--offsets", help="With --describe: each partition's start offset and "
                                                            "lag (the default).")] = False,
    members: Annotated[bool, typer.Option("--members", help="With --describe: the members.")] = False,
    state: Annotated[bool, typer.Option(
        "--state", help="With --describe: coordinator, state and size. With --list: each group's state, or, "
                        "followed by states (Empty,Stable,Dead), only the groups in them.")] = False,
    verbose: Annotated[bool, typer.Option("--verbose", help="With --describe --offsets: the leader epochs too.")
                       ] = False,
    states: Annotated[Optional[list[str]], typer.Argument(
        help="The states after --list --state (comma-separated).", show_default=False)] = None,
    bootstrap_server: BootstrapServer = DEFAULT_BOOTSTRAP_SERVER,
    command_config: CommandConfig = None,
    timeout: Annotated[int, typer.Option("--timeout", help="Timeout of each call to the cluster (ms).")] = 5000,
    debug: Debug = False,
) -> None:
    """Share groups (KIP-932): kafka-share-groups.sh's --list, --describe, --reset-offsets, --delete-offsets and
    --delete."""
    if sum((list_groups, describe, reset_offsets, delete, delete_offsets)) != 1:
        fail("Command must include exactly one action: --list, --describe, --delete, --reset-offsets, "
             "--delete-offsets.")
    groups = list(dict.fromkeys(group or []))
    if describe and not groups and not all_groups:
        fail("Option --describe needs --group or --all-groups.")
    if sum((offsets, members, state)) > 1:
        fail("Option --describe takes at most one of --offsets, --members and --state.")
    if delete and not groups and not all_groups:
        fail("Option [delete] takes the options [group] or [all-groups].")
    if delete_offsets and (not groups or not topic):
        fail("Option [delete-offsets] takes the following options: [group], [topic]")
    wanted_states = _wanted_states(states, state and list_groups)
    rule, plan = _reset_rule(reset_offsets, groups, topic, all_topics, to_earliest, to_latest, to_current,
                             to_offset, to_datetime, from_file, dry_run, execute)
    from kfk.client import Admin

    with client_errors(debug):
        config = client_config(bootstrap_server, command_config, {"default.api.timeout.ms": timeout})
        with Admin(config) as admin:
            listings = {listing.group_id: listing for listing in admin.list_consumer_groups()
                        if listing.group_type == SHARE}
            if list_groups and state:
                shown = [listing for listing in listings.values()
                         if wanted_states is None or listing.state in wanted_states]
                width = max([15, *(len(listing.group_id) for listing in shown)])
                for cells in [("GROUP", "STATE"), *((listing.group_id, listing.state) for listing in shown)]:
                    typer.echo(columns(cells, [width, None]))
            elif list_groups:
                for group_id in listings:
                    typer.echo(group_id)
            elif describe:
                for group_id in sorted(set(listings if all_groups else groups)):
                    for line in _describe(admin, group_id, members, state, verbose):
                        typer.echo(line)
            elif delete:
                _delete(admin, list(listings) if all_groups else groups, listings)
            elif delete_offsets:
                _delete_offsets(admin, groups[0], topic or [])
            else:
                _reset(admin, groups[0], topic or [], all_topics, rule, plan, execute, export)


#: The states a share group can be in (Kafka's GroupState for share groups).
SHARE_GROUP_STATES = ("Empty", "Stable", "Dead")


def _wanted_states(states: list[str] | None, list_with_state: bool) -> set[str] | None:
    """The states after `--list --state` (Kafka's optional value of --state), in the broker's spelling; None for
    every group."""
    if not states:
        return None
    if not list_with_state:
        fail(f"unexpected argument {states[0]!r} (states go after --list --state)")
    by_lower = {name.lower(): name for name in SHARE_GROUP_STATES}
    text = ",".join(states)
    names = [part.strip() for part in text.split(",")]
    if any(name.lower() not in by_lower for name in names):
        fail(f"Invalid state list '{text}'. Valid states are: {', '.join(SHARE_GROUP_STATES)}")
    return {by_lower[name.lower()] for name in names}


#: The reset scenarios, by flag, in the order Kafka's tool names them.
_SCENARIOS = ("from-file", "to-current", "to-datetime", "to-earliest", "to-latest", "to-offset")


def _reset_rule(reset_offsets: bool, groups: list[str], topic: list[str] | None, all_topics: bool,
                to_earliest: bool, to_latest: bool, to_current: bool, to_offset: int | None, to_datetime: str | None,
                from_file: str | None, dry_run: bool, execute: bool) -> tuple[ResetRule | None, dict | None]:
    """--reset-offsets' flags checked in Kafka's order and with its words: what to reset to (and --from-file's
    plan)."""
    if not reset_offsets:
        return None, None
    if not groups:
        fail("Option [reset-offsets] takes the option: [group]")
    if len(groups) > 1:
        fail("Found multiple arguments for option group, but you asked for only one")
    if not topic and not all_topics and from_file is None:
        fail("Option [reset-offsets] takes one of these options: [all-topics], [from-file], [topic]")
    chosen = [name for name, given in zip(_SCENARIOS, (from_file is not None, to_current, to_datetime is not None,
                                                        to_earliest, to_latest, to_offset is not None)) if given]
    if not chosen:
        fail(f"Option [reset-offsets] takes one of these options: {', '.join(f'[{name}]' for name in _SCENARIOS)}")
    if len(chosen) > 1:
        fail(f'Option "[{chosen[0]}]" can\'t be used with option "[{chosen[1]}]"')
    if dry_run and execute:
        fail("Option [reset-offsets] only accepts one of [execute] and [dry-run]")
    if not dry_run and not execute:
        fail("Option [reset-offsets] takes the option: [execute] or [dry-run]")
    target_time = _parse_datetime(to_datetime) if to_datetime is not None else None
    rule = ResetRule(to_earliest=to_earliest, to_latest=to_latest, to_current=to_current, to_offset=to_offset,
                     shift_by=None, target_time=target_time)
    return rule, _read_plan(from_file, groups) if from_file is not None else None


def _reset(admin, group_id: str, topics: list[str], all_topics: bool, rule: ResetRule, plan: dict | None,
           execute: bool, export: bool) -> None:
    """Plan the group's new start offsets, set them with --execute, and print them as Kafka's tool does."""
    from kfk.errors import ERROR_INFO, GroupIdNotFoundError, KafkaError

    try:
        group_state = admin.describe_share_groups([group_id])[group_id].state
    except GroupIdNotFoundError:  # no such group yet: the alter creates it
        group_state = "Dead"
    if group_state not in INACTIVE_STATES:
        fail(f"Share group '{group_id}' is not empty.")
    try:
        current = {tp: start for tp, (start, _, _) in admin.list_share_group_offsets(group_id).items()
                   if start >= 0}
        if plan is not None:
            partitions = sorted(plan.get(group_id, {}))
        else:
            partitions = sorted(current) if all_topics else _partitions_of(admin, topics)
        new = _new_offsets(admin, partitions, current, rule, plan.get(group_id, {}) if plan is not None else None)
        if execute:
            errors = [error for error in admin.alter_share_group_offsets(group_id, new).values() if error]
            if errors:
                raise errors[0]
    except KafkaError as error:
        # Kafka's tool's own words for an error of the cluster, on stdout (its stack trace goes to stderr).
        typer.echo(f"\nError: Executing share group command failed due to {ERROR_INFO[error.error_code].message}")
        raise typer.Exit(1) from None
    _print_reset({group_id: new}, export, False)


def _delete_offsets(admin, group_id: str, topics: list[str]) -> None:
    """Kafka's --delete-offsets lines: a group-level error first, then each topic's outcome (that error again
    when the whole group was refused)."""
    from kfk.errors import KafkaError

    names = list(dict.fromkeys(topics))
    try:
        results: dict[str, KafkaError | None] = admin.delete_share_group_offsets(group_id, names)
    except KafkaError as error:
        typer.echo(f"\nError: {error.message}")
        results = dict.fromkeys(names, error)
    width = max([15, *(len(name) for name in results)])
    typer.echo("\n" + columns(["TOPIC", "STATUS"], [width, None]))
    for name, error in sorted(results.items()):
        typer.echo(columns([name, "Successful" if error is None else f"Error: {error.message}"], [width, None]))
    if any(results.values()):
        raise typer.Exit(1)


def _java_exception(error: Exception) -> str:
    """An error as Java's Throwable.toString names it: the client exception's class, then the message."""
    return f"org.apache.kafka.common.errors.{type(error).__name__.removesuffix('Error')}Exception: {error}"


def _delete(admin, groups: list[str], listings: dict) -> None:
    """Kafka's --delete: groups that are not empty share groups are refused before anything is sent; the others
    go in one DeleteGroups; then one line of success, or the failures (in Kafka's hash-map order)."""
    from kfk.errors import GroupIdNotFoundError, GroupNotEmptyError, KafkaError

    failed: dict[str, Exception] = {}
    for group_id in dict.fromkeys(groups):
        listing = listings.get(group_id)
        if listing is None:
            failed[group_id] = GroupIdNotFoundError(f"Group '{group_id}' is not a share group.")
        elif listing.state == "Dead":
            failed[group_id] = GroupIdNotFoundError(f"Share group '{group_id}' group state is DEAD.")
        elif listing.state != "Empty":
            failed[group_id] = GroupNotEmptyError(f"Share group '{group_id}' is not EMPTY.")
    wanted = [group_id for group_id in dict.fromkeys(groups) if group_id not in failed]
    results: dict[str, KafkaError | None] = admin.delete_consumer_groups(wanted) if wanted else {}
    succeeded = [group_id for group_id, error in results.items() if error is None]
    # The broker answers DeleteGroups without messages: Kafka's client then says the code's own words.
    failed.update((group_id, type(error)()) for group_id, error in results.items() if error is not None)

    def quoted(names) -> str:
        return ", ".join(f"'{name}'" for name in hash_map_order(names, java_string_hash))

    if not failed:
        typer.echo(f"Deletion of requested share groups ({quoted(succeeded)}) was successful.")
        return
    typer.echo("\nError: Deletion of some share groups failed:")
    for group_id in hash_map_order(failed, java_string_hash):
        typer.echo(f"* Group '{group_id}' could not be deleted due to: {_java_exception(failed[group_id])}")
    if succeeded:
        typer.echo(f"\nThese share groups were deleted successfully: {quoted(succeeded)}")
    raise typer.Exit(1)


def _describe(admin, group_id: str, members: bool, state: bool, verbose: bool) -> list[str]:
    from kfk.errors import GroupIdNotFoundError

    try:
        description = admin.describe_share_groups([group_id])[group_id]
    except GroupIdNotFoundError:
        fail(f"Group {group_id} not found.")
    if state:
        brokers = {broker.node_id: broker for broker in admin.describe_cluster().brokers}
        node = brokers.get(description.coordinator)
        coordinator = f"{node.host}:{node.port}  ({node.node_id})" if node else f"({description.coordinator})"
        widths = [max(15, len(group_id)), max(25, len(coordinator)), 15, None]
        return ["", columns(["GROUP", "COORDINATOR (ID)", "STATE", "#MEMBERS"], widths),
                columns([group_id, coordinator, description.state, len(description.members)], widths)]
    if members:
        widths = [max(15, len(group_id)), max([15, *(len(m.member_id) for m in description.members)]),
                  max([15, *(len(m.host) for m in description.members)]),
                  max([15, *(len(m.client_id) for m in description.members)]), 12, None]
        return ["", columns(["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT"], widths),
                *(columns([group_id, m.member_id, m.host, m.client_id, len(m.assignment), _assignment(m.assignment)],
                          widths) for m in description.members)]
    partitions = sorted(admin.list_share_group_offsets(group_id).items())
    widths = [max(15, len(group_id)), max([15, *(len(tp.topic) for tp, _ in partitions)]), 10,
              *([13] if verbose else []), 13, None]
    header = ["GROUP", "TOPIC", "PARTITION", *(["LEADER-EPOCH"] if verbose else []), "START-OFFSET", "LAG"]
    rows = [columns([group_id, tp.topic, tp.partition, *([_dash(epoch)] if verbose else []), _dash(start),
                     _dash(lag)], widths) for tp, (start, epoch, lag) in partitions]
    return ["", columns(header, widths), *rows]


def _dash(value: int) -> str:
    return "-" if value < 0 else str(value)
