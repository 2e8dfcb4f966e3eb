"""`kfk metadata-quorum describe --status | --replication`: kafka-metadata-quorum.sh over DescribeQuorum, printed
as Kafka's tool prints it (so scripts written for it read kfk's output), through a broker (--bootstrap-server) or
straight to a controller (--bootstrap-controller).

--status: ClusterId, LeaderId, LeaderEpoch, HighWatermark, MaxFollowerLag (the leader's log end offset minus the
furthest-behind voter's), MaxFollowerLagTimeMs (how long ago that voter was last caught up, relative to the
leader), CurrentVoters and CurrentObservers (id, directory id, endpoints). --replication: one row per replica,
the leader first, then the other voters and the observers, with its log end offset, its lag behind the high
watermark and the leader's last fetch and caught-up times for it (`--human-readable`: "N ms ago").
add-controller and remove-controller (KIP-853's AddRaftVoter/RemoveRaftVoter) come with the multi-voter quorum.
"""

from __future__ import annotations

import time
from typing import Annotated, Optional

import typer

from kfk.commands.client_options import (
    DEFAULT_BOOTSTRAP_SERVER,
    CommandConfig,
    Debug,
    JsonOutput,
    client_config,
    client_errors,
    print_json,
)
from kfk.commands.errors import fail

app = typer.Typer(help="Describe the KRaft metadata quorum (kafka-metadata-quorum.sh).", no_args_is_help=True)


@app.command()
def describe(
    status: Annotated[bool, typer.Option("--status", help="The quorum's leader, epoch, lag and members.")] = False,
    replication: Annotated[bool, typer.Option(
        "--replication", help="Each replica's log end offset, lag and last fetch.")] = False,
    human_readable: Annotated[bool, typer.Option(
        "--human-readable", help="With --replication: times as 'N ms ago'.")] = False,
    bootstrap_server: Annotated[Optional[str], typer.Option(
        "--bootstrap-server", envvar="KFK_BOOTSTRAP_SERVER", show_envvar=True,
        help=f"host:port of brokers to ask (default {DEFAULT_BOOTSTRAP_SERVER}).")] = None,
    bootstrap_controller: Annotated[Optional[str], typer.Option(
        "--bootstrap-controller", help="host:port of controllers to ask instead of brokers.")] = None,
    command_config: CommandConfig = None,
    json_output: JsonOutput = False,
    debug: Debug = False,
) -> None:
    """Describe the metadata quorum: --status or --replication."""
    if status == replication:
        fail("give one of --status or --replication")
    if human_readable and not replication:
        fail("--human-readable goes with --replication")
    if bootstrap_server and bootstrap_controller:
        fail("give only one of --bootstrap-server or --bootstrap-controller")
    with client_errors(debug):
        from kfk.client import Admin

        servers = bootstrap_controller or bootstrap_server or DEFAULT_BOOTSTRAP_SERVER
        with Admin(client_config(servers, command_config)) as admin:
            quorum = admin.describe_metadata_quorum()
            cluster_id = admin.describe_cluster_id(controllers=bootstrap_controller is not None) if status else None
    if status:
        _print_status(cluster_id, quorum, json_output)
    else:
        _print_replication(quorum, human_readable, json_output)


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
    from kfk.commands.log_decoders import kafka_uuid

    directory_id = replica.replica_directory_id
    member = {"id": replica.replica_id, "directoryId": None if directory_id.int == 0 else kafka_uuid(directory_id)}
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

    from kfk.commands.log_decoders import kafka_uuid

    kinds = ([(voter, "Leader") for voter in quorum.voters if voter.replica_id == quorum.leader_id]
             + [(voter, "Follower") for voter in quorum.voters if voter.replica_id != quorum.leader_id]
             + [(observer, "Observer") for observer in quorum.observers])
    headers = ["NodeId", "DirectoryId", "LogEndOffset", "Lag", "LastFetchTimestamp", "LastCaughtUpTimestamp",
               "Status"]
    rows = [[str(replica.replica_id), kafka_uuid(replica.replica_directory_id), str(replica.log_end_offset),
             str(quorum.high_watermark - replica.log_end_offset), when(replica.last_fetch_timestamp),
             when(replica.last_caught_up_timestamp), kind] for replica, kind in kinds]
    if json_output:
        print_json([dict(zip(headers, row)) for row in rows])
        return
    widths = [max(len(row[column]) for row in [headers, *rows]) for column in range(len(headers))]
    for row in [headers, *rows]:  # Kafka's ToolsUtils table: each cell padded to its column, then a tab
        typer.echo("".join(f"{cell:<{width}}\t" for cell, width in zip(row, widths)))
