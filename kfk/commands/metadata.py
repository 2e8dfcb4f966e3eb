"""`kfk metadata show [PATH...]`: the cluster metadata image as a tree, in the manner of kafka-metadata-shell.

Offline (`--log-dir`, a node's first log dir: its newest valid snapshot, then the __cluster_metadata log after it;
or `--snapshot`, one .checkpoint file) the tree is the whole image: /clusterId, /offset, /features,
/brokers/<id>, /topics/<name>/partitions/<n>, /configs/<TOPIC|BROKER|...>/<name>, /producerIds. Online
(`--bootstrap-server`) it is what a client can ask of any Kafka cluster: /clusterId, /controllerId, /brokers
(id, host, port, rack), /topics (id, partitions: replicas, isr, leader, leaderEpoch) and /configs (the values set
dynamically on topics and brokers; Kafka's defaults and server.properties are not metadata). A path prints that
node as JSON; several paths print an object keyed by path.
"""

from __future__ import annotations

from typing import Annotated, Any, Optional

import typer

from kfk.commands.client_options import CommandConfig, Debug, client_config, client_errors, print_json
from kfk.commands.errors import fail

app = typer.Typer(help="Inspect the cluster metadata image (kafka-metadata-shell).", no_args_is_help=True)


@app.command()
def show(
    paths: Annotated[Optional[list[str]], typer.Argument(help="Paths in the tree, e.g. /brokers /topics/foo.")] = None,
    log_dir: Annotated[Optional[str], typer.Option(
        "--log-dir", help="Read offline: a node's (first) log dir, snapshot and log.")] = None,
    snapshot: Annotated[Optional[str], typer.Option(
        "--snapshot", help="Read offline: one KRaft snapshot (.checkpoint) file.")] = None,
    bootstrap_server: Annotated[Optional[str], typer.Option(
        "--bootstrap-server", envvar="KFK_BOOTSTRAP_SERVER", help="Read from a running cluster.")] = None,
    command_config: CommandConfig = None,
    debug: Debug = False,
) -> None:
    """Print the metadata image, or the nodes at PATHS, as JSON."""
    if sum(source is not None for source in (log_dir, snapshot, bootstrap_server)) != 1:
        fail("give one of --log-dir, --snapshot or --bootstrap-server")
    if bootstrap_server is not None:
        with client_errors(debug):
            tree = _cluster_tree(bootstrap_server, command_config)
    else:
        tree = _offline_tree(log_dir, snapshot)
    from kfk.backends.embedded.metadata_shell import lookup

    wanted = paths or ["/"]
    try:
        nodes = {path: lookup(tree, path) for path in wanted}
    except KeyError as error:
        fail(f"no such path in the metadata image: {error.args[0]}")
    print_json(nodes[wanted[0]] if len(wanted) == 1 else nodes)


def _offline_tree(log_dir: str | None, snapshot: str | None) -> dict[str, Any]:
    from kfk.backends.embedded.metadata_shell import image_tree, read_image, read_snapshot_image
    from kfk.errors import KafkaError

    try:
        image = read_image(log_dir) if log_dir is not None else read_snapshot_image(snapshot)
    except (KafkaError, OSError) as error:
        fail(str(error) if isinstance(error, KafkaError) else f"cannot read {log_dir or snapshot}: {error}")
    return image_tree(image)


def _cluster_tree(bootstrap_server: str, command_config: str | None) -> dict[str, Any]:
    from kfk.client import Admin
    from kfk.client.structs import ConfigResource
    from kfk.common.uuids import uuid_to_base64
    from kfk.common.config_types import ConfigResourceType, ConfigSource

    with Admin(client_config(bootstrap_server, command_config)) as admin:
        cluster = admin.describe_cluster()
        topics = list(admin.describe_topics(include_internal=True).values())
        resources = ([ConfigResource(ConfigResourceType.TOPIC, topic.name) for topic in topics]
                     + [ConfigResource(ConfigResourceType.BROKER, str(broker.node_id)) for broker in cluster.brokers])
        configs = admin.describe_configs(resources)
    config_tree: dict[str, dict[str, dict[str, str]]] = {}
    for resource, entries in sorted(configs.items()):
        # What the image holds under the resource: its own overrides, not the defaults it inherits (a cluster-wide
        # dynamic default such as ELR's min.insync.replicas is the BROKER "" resource's).
        wanted = ConfigSource.DYNAMIC_BROKER_CONFIG if resource.type == ConfigResourceType.BROKER \
            else ConfigSource.DYNAMIC_TOPIC_CONFIG
        values = {name: entry.value for name, entry in sorted(entries.items())
                  if entry.source == wanted and entry.value is not None}
        if values:
            config_tree.setdefault(resource.type.name, {})[resource.name] = values
    return {
        "clusterId": cluster.cluster_id,
        "controllerId": cluster.controller_id,
        "brokers": {str(broker.node_id): {"brokerId": broker.node_id, "host": broker.host, "port": broker.port,
                                          "rack": broker.rack} for broker in cluster.brokers},
        "topics": {topic.name: {"topicId": uuid_to_base64(topic.topic_id), "partitions": {
            str(partition.partition): {"replicas": list(partition.replicas), "isr": list(partition.in_sync_replicas),
                                       "leader": partition.leader, "leaderEpoch": partition.leader_epoch}
            for partition in topic.partitions}} for topic in sorted(topics, key=lambda topic: topic.name)},
        "configs": config_tree,
    }
