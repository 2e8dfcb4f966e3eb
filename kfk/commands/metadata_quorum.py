"""`kfk metadata-quorum describe --status | --replication`: kafka-metadata-quorum.sh over DescribeQuorum, printed
as Kafka's tool prints it (so scripts written for it read kfk's output), through a broker (--bootstrap-server) or
straight to a controller (--bootstrap-controller).

--status: ClusterId, LeaderId, LeaderEpoch, HighWatermark, MaxFollowerLag (the leader's log end offset minus the
furthest-behind voter's), MaxFollowerLagTimeMs (how long ago that voter was last caught up, relative to the
leader), CurrentVoters and CurrentObservers (id, directory id, endpoints). --replication: one row per replica,
the leader first, then the other voters and the observers, with its log end offset, its lag behind the high
watermark and the leader's last fetch and caught-up times for it (`--human-readable`: "N ms ago").

add-controller (AddRaftVoter, KIP-853) adds to a dynamic quorum the controller whose server.properties
--command-config names (as Kafka's tool, the same file is the admin client's config): its node.id, the directory id
`kfk storage format --no-initial-controllers` wrote in its metadata log dir, and its controller endpoints; the
controller must run (as an observer) and have caught up. remove-controller (RemoveRaftVoter) takes --controller-id and
--controller-directory-id. Both print what they did, or with --dry-run what they would do.
"""

from __future__ import annotations

import time
from typing import Annotated, Optional

import typer

from kfk.commands.client_options import (
    BootstrapController,
    BrokersOrControllersBootstrapServer,
    DEFAULT_BOOTSTRAP_SERVER,
    CommandConfig,
    ConnectionOptionsFirst,
    Debug,
    JsonOutput,
    client_config,
    client_errors,
    print_json,
)
from kfk.commands.errors import fail
from kfk.commands.kafka_layout import tools_table

app = typer.Typer(help="Describe the KRaft metadata quorum, add and remove controllers (kafka-metadata-quorum.sh).",
                  no_args_is_help=True, cls=ConnectionOptionsFirst)


BootstrapServer = BrokersOrControllersBootstrapServer
DryRun = Annotated[bool, typer.Option("--dry-run", help="Print what would be done, but do not do it.")]


@app.command()
def describe(
    status: Annotated[bool, typer.Option("--status", help="The quorum's leader, epoch, lag and members.")] = False,
    replication: Annotated[bool, typer.Option(
        "--replication", help="Each replica's log end offset, lag and last fetch.")] = False,
    human_readable: Annotated[bool, typer.Option(
        "--human-readable", help="With --replication: times as 'N ms ago'.")] = False,
    bootstrap_server: BootstrapServer = None,
    bootstrap_controller: BootstrapController = None,
    command_config: CommandConfig = None,
    json_output: JsonOutput = False,
    debug: Debug = False,
) -> None:
    """Describe the metadata quorum: --status or --replication."""
    if status == replication:
        fail("give one of --status or --replication")
    if human_readable and not replication:
        fail("--human-readable goes with --replication")
    servers = _servers(bootstrap_server, bootstrap_controller)
    with client_errors(debug):
        from kfk.client import Admin

        with Admin(client_config(servers, command_config)) as admin:
            quorum = admin.describe_metadata_quorum()
            cluster_id = admin.describe_cluster_id(controllers=bootstrap_controller is not None) if status else None
    if status:
        _print_status(cluster_id, quorum, json_output)
    else:
        _print_replication(quorum, human_readable, json_output)


def _servers(bootstrap_server: str | None, bootstrap_controller: str | None) -> str:
    if bootstrap_server and bootstrap_controller:
        fail("give only one of --bootstrap-server or --bootstrap-controller")
    return bootstrap_controller or bootstrap_server or DEFAULT_BOOTSTRAP_SERVER


def _admin_config(servers: str, command_config: str | None) -> dict:
    """The admin client's settings from --command-config (a controller's server.properties for add-controller:
    only the client's keys are passed on)."""
    from kfk.client.config import ADMIN_CONFIG_DEF

    return {key: value for key, value in client_config(servers, command_config).items()
            if key in ADMIN_CONFIG_DEF.keys}


@app.command("add-controller")
def add_controller(
    command_config: Annotated[Optional[str], typer.Option(
        "--command-config", help="The new controller's server.properties (also the admin client's settings).")
    ] = None,
    bootstrap_server: BootstrapServer = None,
    bootstrap_controller: BootstrapController = None,
    dry_run: DryRun = False,
    debug: Debug = False,
) -> None:
    """Add the controller of --command-config to the KRaft quorum's voters."""
    if command_config is None:
        fail("add-controller needs --command-config: the new controller's properties file")
    servers = _servers(bootstrap_server, bootstrap_controller)
    with client_errors(debug):
        from kfk.client import Admin
        from kfk.common.uuids import uuid_to_base64
        from kfk.commands.server import load_broker_properties
        from kfk.config import BrokerConfig
        from kfk.server.storage_format import controller_voter

        node_id, directory_id, endpoints = controller_voter(BrokerConfig(load_broker_properties(command_config, None)))
        described = (f"controller {node_id} with directory id {uuid_to_base64(directory_id)} and endpoints: "
                     + ", ".join(f"{name}://{host}:{port}" for name, host, port in endpoints))
        if dry_run:
            typer.echo(f"DRY RUN of adding {described}")
            return
        with Admin(_admin_config(servers, command_config)) as admin:
            admin.add_raft_voter(node_id, directory_id, endpoints)
    typer.echo(f"Added {described}")


@app.command("remove-controller")
def remove_controller(
    controller_id: Annotated[Optional[int], typer.Option(
        "--controller-id", "-i", help="The id of the controller to remove.")] = None,
    controller_directory_id: Annotated[Optional[str], typer.Option(
        "--controller-directory-id", "-d", help="The directory id of the controller to remove.")] = None,
    bootstrap_server: BootstrapServer = None,
    bootstrap_controller: BootstrapController = None,
    command_config: CommandConfig = None,
    dry_run: DryRun = False,
    debug: Debug = False,
) -> None:
    """Remove a controller from the KRaft quorum's voters."""
    if controller_id is None or controller_directory_id is None:
        fail("remove-controller needs --controller-id and --controller-directory-id")
    servers = _servers(bootstrap_server, bootstrap_controller)
    with client_errors(debug):
        from kfk.client import Admin
        from kfk.server.storage_format import parse_directory_id

        directory_id = parse_directory_id(controller_directory_id)
        described = f"KRaft controller {controller_id} with directory id {controller_directory_id}"
        if dry_run:
            typer.echo(f"DRY RUN of removing {described}")
            return
        with Admin(_admin_config(servers, command_config)) as admin:
            admin.remove_raft_voter(controller_id, directory_id)
    typer.echo(f"Removed {described}")


def _print_status(cluster_id: str | None, quorum, json_output: bool) -> None:
    leader = next((voter for voter in quorum.voters if voter.replica_id == quorum.leader_id), None)
    furthest = min(quorum.voters, key=lambda voter: voter.log_end_offset, default=None)
    max_lag = 0 if leader is None or furthest is None else leader.log_end_offset - furthest.log_end_offset
    if leader is None or furthest is None or furthest is leader:
        max_lag_time_ms = 0
    elif leader.last_caught_up_timestamp is None or furthest.last_caught_up_timestamp is None:
        max_lag_time_ms = -1
    else:
        max_lag_time_ms = leader.last_caught_up_timestamp - furthest.last_caught_up_timestamp
    if json_output:
        print_json({"ClusterId": cluster_id, "LeaderId": quorum.leader_id, "LeaderEpoch": quorum.leader_epoch,
                    "HighWatermark": quorum.high_watermark, "MaxFollowerLag": max_lag,
                    "MaxFollowerLagTimeMs": max_lag_time_ms,
                    "CurrentVoters": [_member(quorum, voter) for voter in quorum.voters],
                    "CurrentObservers": [_member(quorum, observer) for observer in quorum.observers]})
        return
    for name, value in (("ClusterId", cluster_id), ("LeaderId", quorum.leader_id),
                        ("LeaderEpoch", quorum.leader_epoch), ("HighWatermark", quorum.high_watermark),
                        ("MaxFollowerLag", max_lag), ("MaxFollowerLagTimeMs", max_lag_time_ms),
                        ("CurrentVoters", _members(quorum, quorum.voters)),
                        ("CurrentObservers", _members(quorum, quorum.observers))):
        typer.echo(f"{name + ':':<24}{value}")


def _member(quorum, replica) -> dict:
    from kfk.common.uuids import uuid_to_base64

    directory_id = replica.replica_directory_id
    member = {"id": replica.replica_id}
    if directory_id.int != 0:  # Kafka 4.4's tool leaves a replica without a directory id without the key (4.0: null)
        member["directoryId"] = uuid_to_base64(directory_id)
    endpoints = quorum.nodes.get(replica.replica_id)
    if endpoints:
        member["endpoints"] = endpoints
    return member


def _members(quorum, replicas) -> str:
    """Kafka's text for a list of quorum members: JSON objects with ", " and ": " separators, a replica without a
    directory id (the zero uuid: a static voter) as null."""
    import json

    return "[" + ", ".join(json.dumps(_member(quorum, replica)) for replica in replicas) + "]"


def _print_replication(quorum, human_readable: bool, json_output: bool) -> None:
    now_ms = int(time.time() * 1000)

    def when(timestamp: int | None) -> str:
        if timestamp is None:
            return "-1"
        return f"{now_ms - timestamp} ms ago" if human_readable else str(timestamp)

    from kfk.common.uuids import uuid_to_base64

    kinds = ([(voter, "Leader") for voter in quorum.voters if voter.replica_id == quorum.leader_id]
             + [(voter, "Follower") for voter in quorum.voters if voter.replica_id != quorum.leader_id]
             + [(observer, "Observer") for observer in quorum.observers])
    headers = ["NodeId", "DirectoryId", "LogEndOffset", "Lag", "LastFetchTimestamp", "LastCaughtUpTimestamp",
               "Status"]
    rows = [[str(replica.replica_id), uuid_to_base64(replica.replica_directory_id), str(replica.log_end_offset),
             str(quorum.high_watermark - replica.log_end_offset), when(replica.last_fetch_timestamp),
             when(replica.last_caught_up_timestamp), kind] for replica, kind in kinds]
    if json_output:
        print_json([dict(zip(headers, row)) for row in rows])
        return
    for line in tools_table(headers, rows):
        typer.echo(line)
