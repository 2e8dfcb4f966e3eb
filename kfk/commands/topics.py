"""`kfk topics`: kafka-topics.sh, both as one subcommand per action (`kfk topics describe --topic t`) and in Kafka's
own spelling (`kfk topics --describe --topic t`), with Kafka's flag names.

--topic is a topic name for --create and, as in kafka-topics.sh, a regular expression over the whole name for
list, describe, alter and delete (commas separate alternatives; escape dots to mean a dot: ``"my\\.topic"``).
describe prints Kafka's lines: a ``Topic: t<TAB>TopicId: ...<TAB>PartitionCount: ...<TAB>ReplicationFactor: ...
<TAB>Configs: k=v,...`` line (every config not at its default, as Kafka lists them), then one
``<TAB>Topic: t<TAB>Partition: 0<TAB>Leader: 1<TAB>Replicas: ...<TAB>Isr: ...<TAB>Elr: ...<TAB>LastKnownElr: ...``
line per partition (Adding/Removing Replicas while a reassignment moves it; the eligible leader replicas "N/A"
when the broker cannot tell them). --pretty shows a table instead and --json the same data as JSON.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated, Any, Optional

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
    include_list,
    parse_key_values,
    print_json,
    table,
)
from kfk.commands.errors import fail
from kfk.common.internal_topics import CLUSTER_MANAGED_TOPIC_NAMES
from kfk.common.topic_collisions import has_collision_chars
from kfk.common.uuids import uuid_to_base64

app = typer.Typer(help="Create, list, describe, change and delete topics (kafka-topics.sh): `kfk topics describe "
                       "--topic t` or, as Kafka spells it, `kfk topics --describe --topic t`.",
                  no_args_is_help=True, invoke_without_command=True)

KAFKA_FLAGS = "kafka-topics.sh spelling (instead of a subcommand)"
#: kafka-topics.sh --create prints this (on stdout) for a name with a '.' or '_', whether or not the topic is then
#: created; the broker logs nothing about it.
COLLISION_WARNING = ("WARNING: Due to limitations in metric names, topics with a period ('.') or underscore ('_') "
                     "could collide. To avoid issues it is best to use either, but not both.")

TopicPattern = Annotated[Optional[str], typer.Option(
    "--topic", help="A topic name, or a regular expression matching whole names (commas separate alternatives).")]
Partitions = Annotated[Optional[int], typer.Option("--partitions", min=1,
                                                   help="Partition count (default: the broker's).")]
ReplicationFactor = Annotated[Optional[int], typer.Option("--replication-factor", min=1,
                                                          help="Replicas per partition (default: the broker's).")]
TopicConfigs = Annotated[Optional[list[str]], typer.Option("--config",
                                                           help="A topic config key=value (repeatable).")]
IfNotExists = Annotated[bool, typer.Option("--if-not-exists", help="Succeed if the topic exists.")]
IfExists = Annotated[bool, typer.Option("--if-exists", help="Succeed if no topic matches.")]
ExcludeInternal = Annotated[bool, typer.Option("--exclude-internal", help="Leave out internal topics.")]
UnderReplicated = Annotated[bool, typer.Option(
    "--under-replicated-partitions", help="Only partitions whose ISR is smaller than their replica set.")]
UnderMinIsr = Annotated[bool, typer.Option(
    "--under-min-isr-partitions", help="Only partitions whose ISR is smaller than min.insync.replicas.")]
AtMinIsr = Annotated[bool, typer.Option(
    "--at-min-isr-partitions", help="Only partitions whose ISR is exactly min.insync.replicas.")]
Unavailable = Annotated[bool, typer.Option(
    "--unavailable-partitions", help="Only partitions without a leader on a live broker.")]
WithOverrides = Annotated[bool, typer.Option(
    "--topics-with-overrides", help="Only topics with configs not at their default (no partition lines).")]
Pretty = Annotated[bool, typer.Option("--pretty", help="A table per topic instead of Kafka's lines.")]


@dataclass(frozen=True)
class DescribeFilter:
    """What kafka-topics.sh --describe reports: everything, or only the partitions one of the report flags asks
    for (then without the topic line), or only the topic lines of topics with overrides."""

    under_replicated: bool = False
    under_min_isr: bool = False
    at_min_isr: bool = False
    unavailable: bool = False
    with_overrides: bool = False

    @property
    def reporting(self) -> bool:
        return self.under_replicated or self.under_min_isr or self.at_min_isr or self.unavailable

    def shows(self, partition: dict[str, Any], min_isr: int, live_brokers: set[int]) -> bool:
        if not self.reporting:
            return True
        has_leader = partition["leader"] >= 0
        isr = len(partition["isr"])
        return ((self.under_replicated and partition["replication_factor"] > isr)
                or (self.unavailable and (not has_leader or partition["leader"] not in live_brokers))
                or (self.under_min_isr and (not has_leader or isr < min_isr))
                or (self.at_min_isr and isr == min_isr))


def _admin(bootstrap_server: str, command_config: str | None):
    from kfk.client import Admin

    return Admin(client_config(bootstrap_server, command_config))


@app.callback()
def kafka_topics(
    ctx: typer.Context,
    create: Annotated[bool, typer.Option("--create", help="Create --topic.", rich_help_panel=KAFKA_FLAGS)] = False,
    list_topics_: Annotated[bool, typer.Option("--list", help="List topics.", rich_help_panel=KAFKA_FLAGS)] = False,
    describe_: Annotated[bool, typer.Option("--describe", help="Describe topics.", rich_help_panel=KAFKA_FLAGS)
                         ] = False,
    alter_: Annotated[bool, typer.Option("--alter", help="Add partitions.", rich_help_panel=KAFKA_FLAGS)] = False,
    delete_: Annotated[bool, typer.Option("--delete", help="Delete topics.", rich_help_panel=KAFKA_FLAGS)] = False,
    topic: TopicPattern = None,
    partitions: Partitions = None,
    replication_factor: ReplicationFactor = None,
    config: TopicConfigs = None,
    if_not_exists: IfNotExists = False,
    if_exists: IfExists = False,
    exclude_internal: ExcludeInternal = False,
    under_replicated_partitions: UnderReplicated = False,
    under_min_isr_partitions: UnderMinIsr = False,
    at_min_isr_partitions: AtMinIsr = False,
    unavailable_partitions: Unavailable = False,
    topics_with_overrides: WithOverrides = False,
    bootstrap_server: BootstrapServer = DEFAULT_BOOTSTRAP_SERVER,
    command_config: CommandConfig = None,
    json_output: JsonOutput = False,
    pretty: Pretty = False,
    debug: Debug = False,
) -> None:
    """Create, list, describe, change and delete topics (kafka-topics.sh)."""
    actions = [name for name, chosen in (("--create", create), ("--list", list_topics_), ("--describe", describe_),
                                         ("--alter", alter_), ("--delete", delete_)) if chosen]
    if ctx.invoked_subcommand is not None:
        if actions:
            fail(f"give either the subcommand {ctx.invoked_subcommand!r} or {actions[0]}, not both")
        return
    if len(actions) != 1:
        fail("Command must include exactly one action: --list, --describe, --create, --alter or --delete")
    if topic is None and (create or alter_ or delete_):
        fail(f"{actions[0]} needs --topic")
    if alter_ and partitions is None:
        fail("--alter needs --partitions")
    with client_errors(debug), _admin(bootstrap_server, command_config) as admin:
        if create:
            assert topic is not None
            _create(admin, topic, partitions, replication_factor, parse_key_values(config, "--config"),
                    if_not_exists)
        elif list_topics_:
            _list(admin, topic, exclude_internal, json_output)
        elif describe_:
            _describe(admin, topic, exclude_internal, if_exists, json_output, pretty,
                      DescribeFilter(under_replicated_partitions, under_min_isr_partitions, at_min_isr_partitions,
                                     unavailable_partitions, topics_with_overrides))
        elif alter_:
            assert topic is not None and partitions is not None
            _alter(admin, topic, partitions, if_exists)
        else:
            assert topic is not None
            _delete(admin, topic, exclude_internal, if_exists)


@app.command()
def create(
    topic: Topic,
    partitions: Partitions = None,
    replication_factor: ReplicationFactor = None,
    config: TopicConfigs = None,
    if_not_exists: IfNotExists = False,
    bootstrap_server: BootstrapServer = DEFAULT_BOOTSTRAP_SERVER,
    command_config: CommandConfig = None,
    debug: Debug = False,
) -> None:
    """Create a topic."""
    configs = parse_key_values(config, "--config")
    with client_errors(debug), _admin(bootstrap_server, command_config) as admin:
        _create(admin, topic, partitions, replication_factor, configs, if_not_exists)


def _create(admin, topic: str, partitions: int | None, replication_factor: int | None, configs: dict[str, str],
            if_not_exists: bool) -> None:
    from kfk.client import NewTopic
    from kfk.errors import TopicExistsError

    if has_collision_chars(topic):
        typer.echo(COLLISION_WARNING)
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
    topic: TopicPattern = None,
    exclude_internal: ExcludeInternal = False,
    bootstrap_server: BootstrapServer = DEFAULT_BOOTSTRAP_SERVER,
    command_config: CommandConfig = None,
    json_output: JsonOutput = False,
    debug: Debug = False,
) -> None:
    """List topic names, one per line (--topic: only those the regular expression matches)."""
    with client_errors(debug), _admin(bootstrap_server, command_config) as admin:
        _list(admin, topic, exclude_internal, json_output)


def _list(admin, topic: str | None, exclude_internal: bool, json_output: bool) -> None:
    names = _matching(admin, topic, exclude_internal)
    if json_output:
        print_json(names)
        return
    for name in names:
        typer.echo(name)


def _matching(admin, topic: str | None, exclude_internal: bool) -> list[str]:
    """The topics --topic matches as a whole-name regular expression (every topic without it), sorted."""
    pattern: re.Pattern[str] | None = None if topic is None else include_list(topic, "--topic")
    names = admin.list_topics(include_internal=not exclude_internal)
    return names if pattern is None else [name for name in names if pattern.fullmatch(name)]


def _existing(admin, topic: str, exclude_internal: bool, if_exists: bool) -> list[str]:
    """The topics --topic matches; none is an error unless --if-exists."""
    names = _matching(admin, topic, exclude_internal)
    if not names and not if_exists:
        fail(f"topic {topic!r} does not exist")
    return names


@app.command()
def describe(
    topic: TopicPattern = None,
    under_replicated_partitions: UnderReplicated = False,
    under_min_isr_partitions: UnderMinIsr = False,
    at_min_isr_partitions: AtMinIsr = False,
    unavailable_partitions: Unavailable = False,
    topics_with_overrides: WithOverrides = False,
    exclude_internal: ExcludeInternal = False,
    if_exists: IfExists = False,
    bootstrap_server: BootstrapServer = DEFAULT_BOOTSTRAP_SERVER,
    command_config: CommandConfig = None,
    json_output: JsonOutput = False,
    pretty: Pretty = False,
    debug: Debug = False,
) -> None:
    """Describe topics: id, partitions, replication, non-default configs, and leader/replicas/ISR per partition."""
    with client_errors(debug), _admin(bootstrap_server, command_config) as admin:
        _describe(admin, topic, exclude_internal, if_exists, json_output, pretty,
                  DescribeFilter(under_replicated_partitions, under_min_isr_partitions, at_min_isr_partitions,
                                 unavailable_partitions, topics_with_overrides))


def _describe(admin, topic: str | None, exclude_internal: bool, if_exists: bool, json_output: bool, pretty: bool,
              selection: DescribeFilter) -> None:
    topics = _descriptions(admin, topic, exclude_internal, if_exists, selection)
    if json_output:
        print_json([{key: value for key, value in entry.items() if key != "show_topic"} for entry in topics])
    elif pretty:
        _print_tables(topics)
    else:
        for entry in topics:
            if entry["show_topic"]:
                typer.echo(_topic_line(entry))
            for partition in entry["partitions"]:
                typer.echo(_partition_line(entry["topic"], partition))


def _descriptions(admin, topic: str | None, exclude_internal: bool, if_exists: bool,
                  selection: DescribeFilter) -> list[dict[str, Any]]:
    """What describe shows, topic by topic: the fields of Kafka's lines, and only the partitions (and topics)
    the report flags select."""
    from kfk.client import ConfigResource, ConfigResourceType, ConfigSource, TopicPartition

    names = _existing(admin, topic, exclude_internal, if_exists) if topic is not None else \
        admin.list_topics(include_internal=not exclude_internal)
    if not names:
        return []
    descriptions = admin.describe_topics(names)
    configs = admin.describe_configs(ConfigResource(ConfigResourceType.TOPIC, name) for name in names)
    live_brokers = {broker.node_id for broker in admin.describe_cluster().brokers}
    reassignments = admin.list_partition_reassignments(
        TopicPartition(name, p.partition) for name in names for p in descriptions[name].partitions)
    topics = []
    for name in names:
        description = descriptions[name]
        entries = configs.get(ConfigResource(ConfigResourceType.TOPIC, name), {})
        overrides = {key: "null" if entry.value is None else entry.value for key, entry in entries.items()
                     if entry.source != ConfigSource.DEFAULT_CONFIG}
        min_isr = int(entries["min.insync.replicas"].value) if "min.insync.replicas" in entries else 1
        partitions = [_partition(p, reassignments.get(TopicPartition(name, p.partition)))
                      for p in description.partitions]
        shown = [] if selection.with_overrides else [
            p for p in partitions if selection.shows(p, min_isr, live_brokers)]
        show_topic = not selection.reporting and (not selection.with_overrides or bool(overrides))
        if not show_topic and not shown:
            continue
        topics.append({
            "topic": name, "topic_id": uuid_to_base64(description.topic_id), "partition_count": len(partitions),
            "replication_factor": partitions[0]["replication_factor"] if partitions else 0,
            "configs": overrides, "show_topic": show_topic, "partitions": shown})
    return topics


def _partition(info, reassignment) -> dict[str, Any]:
    """One partition as describe shows it. While a reassignment moves it, the replica list holds the old and the
    new replicas together; the replication factor is then the target's (the replicas minus those being added)."""
    moving = reassignment is not None and bool(
        set(info.replicas) & (set(reassignment.adding_replicas) | set(reassignment.removing_replicas)))
    return {"partition": info.partition, "leader": info.leader, "replicas": list(info.replicas),
            "isr": list(info.in_sync_replicas), "offline": list(info.offline_replicas),
            "replication_factor": (len(reassignment.replicas) - len(reassignment.adding_replicas) if moving
                                   else len(info.replicas)),
            "elr": None if info.eligible_leader_replicas is None else list(info.eligible_leader_replicas),
            "last_known_elr": None if info.last_known_elr is None else list(info.last_known_elr),
            "adding_replicas": list(reassignment.adding_replicas) if moving else None,
            "removing_replicas": list(reassignment.removing_replicas) if moving else None}


def _ids(ids: list[int]) -> str:
    return ",".join(map(str, ids))


def _topic_line(entry: dict[str, Any]) -> str:
    configs = ",".join(f"{key}={value}" for key, value in sorted(entry["configs"].items()))
    return (f"Topic: {entry['topic']}\tTopicId: {entry['topic_id']}\tPartitionCount: {entry['partition_count']}\t"
            f"ReplicationFactor: {entry['replication_factor']}\tConfigs: {configs}")


def _partition_line(topic: str, p: dict[str, Any]) -> str:
    leader = str(p["leader"]) if p["leader"] >= 0 else "none"
    line = (f"\tTopic: {topic}\tPartition: {p['partition']}\tLeader: {leader}\tReplicas: {_ids(p['replicas'])}\t"
            f"Isr: {_ids(p['isr'])}")
    if p["adding_replicas"] is not None:
        line += f"\tAdding Replicas: {_ids(p['adding_replicas'])}\tRemoving Replicas: {_ids(p['removing_replicas'])}"
    for label, ids in (("Elr", p["elr"]), ("LastKnownElr", p["last_known_elr"])):
        line += f"\t{label}: {'N/A' if ids is None else _ids(ids)}"
    return line


def _print_tables(topics: list[dict[str, Any]]) -> None:
    out = console()
    for entry in topics:
        if entry["show_topic"]:
            out.print(_topic_line(entry), markup=False)
        if not entry["partitions"]:
            continue
        grid = table("PARTITION", "LEADER", "REPLICAS", "ISR", "OFFLINE")
        for p in entry["partitions"]:
            grid.add_row(str(p["partition"]), str(p["leader"]) if p["leader"] >= 0 else "none",
                         _ids(p["replicas"]), _ids(p["isr"]), _ids(p["offline"]))
        out.print(grid)



def _changeable(admin, topic: str, exclude_internal: bool, if_exists: bool, refusal: str) -> list[str]:
    """The topics --topic names, none of them internal: the broker refuses those too, and saying so here needs no
    request. An internal topic typed by name is refused without listing (the cluster need not list it:
    __cluster_metadata never is); a pattern's matches are checked one by one."""
    names = [topic] if topic in CLUSTER_MANAGED_TOPIC_NAMES else _existing(admin, topic, exclude_internal, if_exists)
    for name in names:
        if name in CLUSTER_MANAGED_TOPIC_NAMES:
            fail(f"{name} is an internal topic: {refusal}")
    return names


@app.command()
def delete(
    topic: Annotated[str, typer.Option("--topic", help="A topic name, or a regular expression matching whole "
                                                       "names (every match is deleted).")],
    if_exists: IfExists = False,
    exclude_internal: ExcludeInternal = False,
    bootstrap_server: BootstrapServer = DEFAULT_BOOTSTRAP_SERVER,
    command_config: CommandConfig = None,
    debug: Debug = False,
) -> None:
    """Delete the topics --topic matches."""
    with client_errors(debug), _admin(bootstrap_server, command_config) as admin:
        _delete(admin, topic, exclude_internal, if_exists)


def _delete(admin, topic: str, exclude_internal: bool, if_exists: bool) -> None:
    from kfk.errors import UnknownTopicOrPartitionError

    names = _changeable(admin, topic, exclude_internal, if_exists, "it cannot be deleted")
    results = admin.delete_topics(names) if names else {}
    for name in names:
        error = results[name]
        if isinstance(error, UnknownTopicOrPartitionError):  # deleted by someone else in the meantime
            if if_exists:
                continue
            fail(f"topic {name!r} does not exist")
        if error is not None:
            raise error
        typer.echo(f"Deleted topic {name}.")


@app.command()
def alter(
    topic: Annotated[str, typer.Option("--topic", help="A topic name, or a regular expression matching whole "
                                                       "names (every match is changed).")],
    partitions: Annotated[int, typer.Option("--partitions", min=1, help="The new, larger partition count.")],
    if_exists: IfExists = False,
    bootstrap_server: BootstrapServer = DEFAULT_BOOTSTRAP_SERVER,
    command_config: CommandConfig = None,
    debug: Debug = False,
) -> None:
    """Add partitions to topics (configs are changed with `kfk configs --alter`)."""
    with client_errors(debug), _admin(bootstrap_server, command_config) as admin:
        _alter(admin, topic, partitions, if_exists)


def _alter(admin, topic: str, partitions: int, if_exists: bool) -> None:
    names = _changeable(admin, topic, False, if_exists, "its number of partitions cannot be changed")
    results = admin.create_partitions(dict.fromkeys(names, partitions)) if names else {}
    for name in names:
        if results[name] is not None:
            raise results[name]
        typer.echo(f"Topic {name} now has {partitions} partitions.")
