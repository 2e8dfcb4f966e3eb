"""`kfk cluster describe`: a cluster's health at a glance, with Kafka Manager's (CMAK's) statistics; `kfk cluster
cluster-id` and `kfk cluster unregister --id N`: kafka-cluster.sh's two commands, with its flags and lines.

The cluster (id, controller, under-replicated and offline partition counts), the brokers (replicas and leaderships
held, skewed topics), every topic's CMAK statistics, each topic's per-broker table, and the consumer groups' total
lag. The numbers come from kfk.client.cluster_statistics (its docstring defines them), so they mean the same against
any Kafka cluster. `--output json` (or `--json`) prints them for scripts.
"""

from __future__ import annotations

from enum import Enum
from typing import Annotated, Optional

import typer

from kfk.commands.client_options import (
    DEFAULT_BOOTSTRAP_SERVER,
    BootstrapServer,
    CommandConfig,
    Debug,
    JsonOutput,
    Timeout,
    client_config,
    client_errors,
    console,
    print_json,
    table,
)

app = typer.Typer(help="A cluster's brokers, topics, partitions and groups at a glance; its id; unregister a broker.",
                  no_args_is_help=True)

#: kafka-cluster.sh names its properties file --config (-c).
ClusterToolConfig = Annotated[Optional[str], typer.Option(
    "--command-config", "--config", "-c", help="A properties file of client settings (security, timeouts...).")]


@app.command("cluster-id")
def cluster_id(
    bootstrap_server: BootstrapServer = DEFAULT_BOOTSTRAP_SERVER,
    command_config: ClusterToolConfig = None,
    debug: Debug = False,
) -> None:
    """Print the cluster's id."""
    from kfk.client import Admin

    with client_errors(debug), Admin(client_config(bootstrap_server, command_config)) as admin:
        found = admin.describe_cluster().cluster_id
    typer.echo(f"Cluster ID: {found}" if found else "No cluster ID found. The Kafka version is probably too old.")


@app.command()
def unregister(
    broker_id: Annotated[int, typer.Option("--id", "-i", help="The id of the broker to unregister.")],
    bootstrap_server: BootstrapServer = DEFAULT_BOOTSTRAP_SERVER,
    command_config: ClusterToolConfig = None,
    debug: Debug = False,
) -> None:
    """Drop the registration of a broker that is gone for good (KRaft; it must no longer be running)."""
    from kfk.client import Admin
    from kfk.errors import UnsupportedVersionError

    with client_errors(debug), Admin(client_config(bootstrap_server, command_config)) as admin:
        try:
            admin.unregister_broker(broker_id)
        except UnsupportedVersionError:
            typer.echo("The target cluster does not support the broker unregistration API.")
            return
    typer.echo(f"Broker {broker_id} is no longer registered.")


class OutputFormat(str, Enum):
    table = "table"
    json = "json"


@app.command()
def describe(
    exclude_internal: Annotated[bool, typer.Option("--exclude-internal", help="Leave out internal topics.")] = False,
    output: Annotated[OutputFormat, typer.Option("--output", "-o", help="table, or json for scripts.")
                      ] = OutputFormat.table,
    bootstrap_server: BootstrapServer = DEFAULT_BOOTSTRAP_SERVER,
    command_config: CommandConfig = None,
    json_output: JsonOutput = False,
    timeout_ms: Timeout = 30000,
    debug: Debug = False,
) -> None:
    """Brokers, controller, CMAK's topic statistics (skew, spread, preferred replicas, under-replication) and the
    consumer groups' lag."""
    with client_errors(debug):
        from kfk.client import Admin
        from kfk.client.cluster_statistics import describe_cluster_statistics

        with Admin(client_config(bootstrap_server, command_config)) as admin:
            stats = describe_cluster_statistics(admin, include_internal=not exclude_internal, timeout_ms=timeout_ms)
    if json_output or output is OutputFormat.json:
        from dataclasses import asdict

        print_json(asdict(stats))
        return
    _render(stats)


def _yes_no(value: bool) -> str:
    return "true" if value else "false"


def _render(stats) -> None:
    out = console()
    online = sum(broker.online for broker in stats.brokers)
    summary = table("CLUSTER-ID", "CONTROLLER", "BROKERS (ONLINE)", "TOPICS", "UNDER-REPLICATED", "OFFLINE",
                    title="Cluster")
    summary.add_row(str(stats.cluster_id), str(stats.controller_id), f"{len(stats.brokers)} ({online})",
                    str(len(stats.topics)), str(stats.under_replicated_partitions), str(stats.offline_partitions))
    out.print(summary)

    brokers = table("BROKER", "ONLINE", "# OF PARTITIONS", "# AS LEADER", "SKEWED TOPICS", "LEADER SKEWED TOPICS",
                    title="Brokers")
    for broker in stats.brokers:
        brokers.add_row(str(broker.broker_id), _yes_no(broker.online), str(broker.partition_count),
                        str(broker.leader_count), ",".join(broker.skewed_topics) or "-",
                        ",".join(broker.leader_skewed_topics) or "-")
    out.print(brokers)

    topics = table("TOPIC", "REPLICATION", "PARTITIONS", "SUM OF OFFSETS", "TOTAL BROKERS", "BROKERS FOR TOPIC",
                   "PREFERRED REPLICAS %", "BROKERS SKEWED %", "BROKERS LEADER SKEWED %", "BROKERS SPREAD %",
                   "UNDER-REPLICATED %", title="Topics")
    for topic in stats.topics:
        topics.add_row(topic.topic, str(topic.replication), str(topic.partition_count),
                       str(topic.sum_of_partition_offsets), str(topic.total_brokers), str(topic.brokers_for_topic),
                       str(topic.preferred_replicas_percent), str(topic.brokers_skewed_percent),
                       str(topic.brokers_leader_skewed_percent), str(topic.brokers_spread_percent),
                       str(topic.under_replicated_percent))
    out.print(topics)

    shares = table("TOPIC", "BROKER", "# OF PARTITIONS", "# AS LEADER", "PARTITIONS", "SKEWED?", "LEADER SKEWED?",
                   title="Topics by broker")
    for topic in stats.topics:
        for share in topic.brokers:
            shares.add_row(topic.topic, str(share.broker_id), str(share.partition_count), str(share.leader_count),
                           "(" + ",".join(map(str, share.partitions)) + ")", _yes_no(share.skewed),
                           _yes_no(share.leader_skewed))
    out.print(shares)

    for title, listed in (("Consumer groups", stats.groups), ("Share groups", stats.share_groups)):
        groups = table("GROUP", "STATE", "PARTITIONS", "TOTAL LAG", title=title)
        for group in listed:
            groups.add_row(group.group_id, group.state, str(group.partition_count), str(group.total_lag))
        out.print(groups)
