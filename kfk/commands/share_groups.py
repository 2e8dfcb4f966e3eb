"""`kfk share-groups`: kafka-share-groups.sh (KIP-932), with Kafka's action flags on one command and its lines.

--list prints the share groups' ids. --describe --group G (or --all-groups) shows, per partition the group has read,
the share-partition start offset and the lag (--offsets, the default; --verbose adds the leader epoch); --members
its members, their clients and assignments; --state its coordinator, state and size.
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
from kfk.commands.groups import _assignment
from kfk.commands.kafka_layout import columns

app = typer.Typer()

SHARE = "share"


@app.command("share-groups")
def share_groups(
    list_groups: Annotated[bool, typer.Option("--list", help="List the share groups.")] = False,
    describe: Annotated[bool, typer.Option("--describe", help="Start offsets and lag, members or state of --group."
                                           )] = False,
    group: Annotated[Optional[list[str]], typer.Option("--group", help="A group id (repeatable).")] = None,
    all_groups: Annotated[bool, typer.Option("--all-groups", help="Every share group (with --describe).")] = False,
    offsets: Annotated[bool, typer.Option("--offsets", help="With --describe: each partition's start offset and "
                                                            "lag (the default).")] = False,
    members: Annotated[bool, typer.Option("--members", help="With --describe: the members.")] = False,
    state: Annotated[bool, typer.Option("--state", help="With --describe: coordinator, state and size.")] = False,
    verbose: Annotated[bool, typer.Option("--verbose", help="With --describe --offsets: the leader epochs too.")
                       ] = False,
    bootstrap_server: BootstrapServer = DEFAULT_BOOTSTRAP_SERVER,
    command_config: CommandConfig = None,
    timeout: Annotated[int, typer.Option("--timeout", help="Timeout of each call to the cluster (ms).")] = 5000,
    debug: Debug = False,
) -> None:
    """Share groups (KIP-932): kafka-share-groups.sh's --list and --describe."""
    if list_groups == describe:
        fail("Command must include exactly one action: --list or --describe.")
    if describe and not group and not all_groups:
        fail("Option --describe needs --group or --all-groups.")
    if sum((offsets, members, state)) > 1:
        fail("Option --describe takes at most one of --offsets, --members and --state.")
    from kfk.client import Admin

    with client_errors(debug):
        config = client_config(bootstrap_server, command_config, {"default.api.timeout.ms": timeout})
        with Admin(config) as admin:
            share_ids = [listing.group_id for listing in admin.list_consumer_groups()
                         if listing.group_type == SHARE]
            if list_groups:
                for group_id in share_ids:
                    typer.echo(group_id)
                return
            for group_id in sorted(set(share_ids if all_groups else group or [])):
                for line in _describe(admin, group_id, members, state, verbose):
                    typer.echo(line)


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
