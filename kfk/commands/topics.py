"""`kfk topics create|list|describe|delete|alter`: kafka-topics.sh, one subcommand per action, Kafka's flag names."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from kfk.commands.client_options import (
    DEFAULT_BOOTSTRAP_SERVER,
    BootstrapServer,
    CommandConfig,
    Debug,
    JsonOutput,
    Topic,
    client_config,
    client_errors,
    console,
    parse_key_values,
    print_json,
    table,
)
from kfk.commands.errors import fail

app = typer.Typer(help="Create, list, describe, change and delete topics (kafka-topics.sh).", no_args_is_help=True)



def _admin(bootstrap_server: str, command_config: str | None):
    from kfk.client import Admin

    return Admin(client_config(bootstrap_server, command_config))


@app.command()
def create(
    topic: Topic,
    partitions: Annotated[Optional[int], typer.Option("--partitions", min=1,
                                                      help="Partition count (default: the broker's).")] = None,
    replication_factor: Annotated[Optional[int], typer.Option(
        "--replication-factor", min=1, help="Replicas per partition (default: the broker's).")] = None,
    config: Annotated[Optional[list[str]], typer.Option("--config", help="A topic config key=value (repeatable).")
                      ] = None,
    if_not_exists: Annotated[bool, typer.Option("--if-not-exists", help="Succeed if the topic exists.")] = False,
    bootstrap_server: BootstrapServer = DEFAULT_BOOTSTRAP_SERVER,
    command_config: CommandConfig = None,
    debug: Debug = False,
) -> None:
    """Create a topic."""
    configs = parse_key_values(config, "--config")
    with client_errors(debug):
        from kfk.client import NewTopic
        from kfk.errors import TopicExistsError

        with _admin(bootstrap_server, command_config) as admin:
            new = NewTopic(topic, partitions if partitions is not None else -1,
                           replication_factor if replication_factor is not None else -1, configs)
            error = admin.create_topics([new])[topic]
        if isinstance(error, TopicExistsError) and if_not_exists:
            return
        if error is not None:
            raise error
    typer.echo(f"Created topic {topic}.")


@app.command("list")
def list_topics(
    exclude_internal: Annotated[bool, typer.Option("--exclude-internal", help="Leave out internal topics.")] = False,
    bootstrap_server: BootstrapServer = DEFAULT_BOOTSTRAP_SERVER,
    command_config: CommandConfig = None,
    json_output: JsonOutput = False,
    debug: Debug = False,
) -> None:
    """List topic names, one per line."""
    with client_errors(debug), _admin(bootstrap_server, command_config) as admin:
        names = admin.list_topics(include_internal=not exclude_internal)
    if json_output:
        print_json(names)
        return
    for name in names:
        typer.echo(name)


@app.command()
def describe(
    topic: Annotated[Optional[str], typer.Option("--topic", help="The topic (default: every topic).")] = None,
    under_replicated_partitions: Annotated[bool, typer.Option(
        "--under-replicated-partitions", help="Only partitions whose ISR is smaller than their replica set.")] = False,
    unavailable_partitions: Annotated[bool, typer.Option(
        "--unavailable-partitions", help="Only partitions without a live leader.")] = False,
    exclude_internal: Annotated[bool, typer.Option("--exclude-internal", help="Leave out internal topics.")] = False,
    bootstrap_server: BootstrapServer = DEFAULT_BOOTSTRAP_SERVER,
    command_config: CommandConfig = None,
    json_output: JsonOutput = False,
    debug: Debug = False,
) -> None:
    """Describe topics: id, partitions, replication, non-default configs, and leader/replicas/ISR per partition."""
    with client_errors(debug):
        from kfk.client import ConfigResource, ConfigResourceType, ConfigSource

        with _admin(bootstrap_server, command_config) as admin:
            descriptions = admin.describe_topics([topic] if topic else None, include_internal=not exclude_internal)
            resources = [ConfigResource(ConfigResourceType.TOPIC, name) for name in descriptions]
            configs = admin.describe_configs(resources) if resources else {}
    filtering = under_replicated_partitions or unavailable_partitions
    topics = []
    for name, description in sorted(descriptions.items()):
        overrides = {key: entry.value for key, entry in configs.get(ConfigResource(ConfigResourceType.TOPIC, name),
                                                                    {}).items()
                     if entry.source == ConfigSource.DYNAMIC_TOPIC_CONFIG}
        partitions = [p for p in description.partitions
                      if not filtering or (under_replicated_partitions and p.under_replicated)
                      or (unavailable_partitions and p.leader < 0)]
        topics.append({
            "topic": name, "topic_id": _topic_id(description.topic_id),
            "partition_count": len(description.partitions),
            "replication_factor": len(description.partitions[0].replicas) if description.partitions else 0,
            "configs": overrides,
            "partitions": [{"partition": p.partition, "leader": p.leader, "replicas": list(p.replicas),
                            "isr": list(p.in_sync_replicas), "offline": list(p.offline_replicas)}
                           for p in partitions]})
    if json_output:
        print_json(topics)
        return
    out = console()
    for entry in topics:
        if filtering and not entry["partitions"]:
            continue
        configs_text = ",".join(f"{key}={value}" for key, value in sorted(entry["configs"].items()))
        out.print(f"Topic: {entry['topic']}\tTopicId: {entry['topic_id']}\tPartitionCount: "
                  f"{entry['partition_count']}\tReplicationFactor: {entry['replication_factor']}\t"
                  f"Configs: {configs_text}")
        grid = table("PARTITION", "LEADER", "REPLICAS", "ISR", "OFFLINE")
        for p in entry["partitions"]:
            grid.add_row(str(p["partition"]), str(p["leader"]) if p["leader"] >= 0 else "none",
                         ",".join(map(str, p["replicas"])), ",".join(map(str, p["isr"])),
                         ",".join(map(str, p["offline"])))
        out.print(grid)


def _topic_id(topic_id) -> str:
    """Kafka prints topic ids as URL-safe base64 without padding (22 characters)."""
    import base64

    return base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")


def _refuse_cluster_managed(topic: str, what: str) -> None:
    """The broker refuses it too; saying so here needs no cluster."""
    from kfk.common.internal_topics import CLUSTER_MANAGED_TOPIC_NAMES

    if topic in CLUSTER_MANAGED_TOPIC_NAMES:
        fail(f"{topic} is an internal topic: {what}")


@app.command()
def delete(
    topic: Topic,
    if_exists: Annotated[bool, typer.Option("--if-exists", help="Succeed if the topic does not exist.")] = False,
    bootstrap_server: BootstrapServer = DEFAULT_BOOTSTRAP_SERVER,
    command_config: CommandConfig = None,
    debug: Debug = False,
) -> None:
    """Delete a topic."""
    _refuse_cluster_managed(topic, "it cannot be deleted")
    with client_errors(debug):
        from kfk.errors import UnknownTopicOrPartitionError

        with _admin(bootstrap_server, command_config) as admin:
            error = admin.delete_topics([topic])[topic]
        if isinstance(error, UnknownTopicOrPartitionError):
            if if_exists:
                return
            fail(f"topic {topic!r} does not exist")
        if error is not None:
            raise error
    typer.echo(f"Deleted topic {topic}.")


@app.command()
def alter(
    topic: Topic,
    partitions: Annotated[int, typer.Option("--partitions", min=1, help="The new, larger partition count.")],
    bootstrap_server: BootstrapServer = DEFAULT_BOOTSTRAP_SERVER,
    command_config: CommandConfig = None,
    debug: Debug = False,
) -> None:
    """Add partitions to a topic (configs are changed with `kfk configs --alter`)."""
    _refuse_cluster_managed(topic, "its number of partitions cannot be changed")
    with client_errors(debug), _admin(bootstrap_server, command_config) as admin:
        admin.describe_topics([topic])  # a clear "does not exist" first
        error = admin.create_partitions({topic: partitions})[topic]
        if error is not None:
            raise error
    typer.echo(f"Topic {topic} now has {partitions} partitions.")
