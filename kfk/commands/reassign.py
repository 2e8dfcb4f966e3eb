"""`kfk reassign-partitions` and `kfk leader-election` (kafka-reassign-partitions.sh, kafka-leader-election.sh).

reassign-partitions, with Kafka's JSON files:
- `--generate --topics-to-move-json-file F --broker-list 1,2`: prints the current assignment and a proposed one
  (Kafka's placement on those brokers); F is {"version":1,"topics":[{"topic":"foo"}]}.
- `--execute --reassignment-json-file F`: starts the reassignment (AlterPartitionReassignments to the controller)
  and prints the current assignment to keep for a rollback; F is
  {"version":1,"partitions":[{"topic":"foo","partition":0,"replicas":[2,3]}]}.
- `--verify --reassignment-json-file F`: says per partition whether the reassignment is complete and, once no
  reassignment runs in the cluster, clears the throttles (unless --preserve-throttles) as Kafka's tool does; kfk's
  exit code is 1 while a partition of F is not complete (Kafka's tool exits 0), so that scripts can wait on it.
- `--cancel --reassignment-json-file F`: cancels the reassignments in progress for F's partitions.
leader-election: `--election-type preferred|unclean` for `--topic T --partition P`, `--path-to-json-file F`
({"partitions":[{"topic":"foo","partition":1}]}) or `--all-topic-partitions`.
The requests go to the controller through kfk.client.Admin; the proposal is kfk.controller.reassignment's placement.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from kfk.commands.client_options import (
    DEFAULT_BOOTSTRAP_SERVER,
    BootstrapServer,
    CommandConfig,
    Debug,
    client_config,
    client_errors,
    command_config_option,
)
from kfk.commands.errors import fail

app = typer.Typer()

#: kafka-leader-election.sh names its admin client's properties file --admin.config.
AdminConfig = command_config_option("--admin.config", help="A properties file of the admin client's settings "
                                                           "(security, timeouts...).")
TIMEOUT_MS = 30_000

LEADER_THROTTLED_RATE = "leader.replication.throttled.rate"
FOLLOWER_THROTTLED_RATE = "follower.replication.throttled.rate"
LEADER_THROTTLED_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_THROTTLED_REPLICAS = "follower.replication.throttled.replicas"

Assignment = dict[tuple[str, int], list[int]]


# --- JSON files ------------------------------------------------------------------------------------------------------

def _read_json(path: str) -> Any:
    try:
        return json.loads(Path(path).read_text())
    except OSError as error:
        fail(f"cannot read {path}: {error.strerror or error}")
    except ValueError as error:
        fail(f"{path} is not valid JSON: {error}")


def _reassignment_partitions(path: str) -> Assignment:
    data = _read_json(path)
    try:
        return {(entry["topic"], int(entry["partition"])): [int(r) for r in entry["replicas"]]
                for entry in data["partitions"]}
    except (KeyError, TypeError, ValueError) as error:
        fail(f"{path} is not a reassignment JSON file (missing {error}): expected "
             '{"version":1,"partitions":[{"topic":"foo","partition":0,"replicas":[1,2]}]}')


def _assignment_json(assignment: Assignment) -> str:
    return json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": partition, "replicas": replicas, "log_dirs": ["any"] * len(replicas)}
        for (topic, partition), replicas in sorted(assignment.items())]}, separators=(",", ":"))


# --- calls -----------------------------------------------------------------------------------------------------------

def _admin(bootstrap_server: str, command_config: str | None):
    from kfk.client import Admin

    return Admin(client_config(bootstrap_server, command_config))


def _current_assignment(admin, topics: list[str]) -> Assignment:
    described = admin.describe_topics(topics)
    return {(name, info.partition): list(info.replicas)
            for name, description in described.items() for info in description.partitions}


def _alter_configs(admin, changes: dict[tuple[str, str], dict[str, str | None]]) -> None:
    """SET (or DELETE for None) per (resource type name, resource name)."""
    from kfk.client import AlterConfigOp, AlterConfigOpType, ConfigResource, ConfigResourceType

    outcomes = admin.incremental_alter_configs(timeout_ms=TIMEOUT_MS, changes={
        ConfigResource(ConfigResourceType[kind], name): [
            AlterConfigOp(key, value, AlterConfigOpType.DELETE if value is None else AlterConfigOpType.SET)
            for key, value in keys.items()]
        for (kind, name), keys in changes.items()})
    failures = [f"{resource.name}: {error}" for resource, error in outcomes.items() if error is not None]
    if failures:
        fail("setting the throttle failed: " + "; ".join(failures))


def _throttle_changes(wanted: Assignment, current: Assignment, rate: int) -> dict[tuple[str, str], dict[str, str]]:
    """Kafka's throttle of a reassignment: the rate on every broker involved, and per topic the replicas it
    applies to (leader side: the current replicas; follower side: the ones being added)."""
    changes: dict[tuple[str, str], dict[str, str]] = {}
    for (topic, partition), target in wanted.items():
        existing = current.get((topic, partition), [])
        topic_changes = changes.setdefault(("TOPIC", topic), {})
        leaders = [f"{partition}:{b}" for b in existing]
        followers = [f"{partition}:{b}" for b in target if b not in existing]
        for key, entries in ((LEADER_THROTTLED_REPLICAS, leaders), (FOLLOWER_THROTTLED_REPLICAS, followers)):
            if entries:
                topic_changes[key] = ",".join(filter(None, [topic_changes.get(key) or "", *entries]))
        for broker in set(existing) | set(target):
            changes[("BROKER", str(broker))] = {LEADER_THROTTLED_RATE: str(rate), FOLLOWER_THROTTLED_RATE: str(rate)}
    return changes


def _clear_throttle_changes(topics: list[str], brokers: list[int]) -> dict[tuple[str, str], dict[str, None]]:
    changes: dict[tuple[str, str], dict[str, None]] = {
        ("TOPIC", topic): {LEADER_THROTTLED_REPLICAS: None, FOLLOWER_THROTTLED_REPLICAS: None} for topic in topics}
    for broker in brokers:
        changes[("BROKER", str(broker))] = {LEADER_THROTTLED_RATE: None, FOLLOWER_THROTTLED_RATE: None}
    return changes


# --- reassign-partitions ---------------------------------------------------------------------------------------------

@app.command("reassign-partitions")
def reassign_partitions(
    bootstrap_server: BootstrapServer = DEFAULT_BOOTSTRAP_SERVER,
    command_config: CommandConfig = None,
    generate: Annotated[bool, typer.Option("--generate", help="Propose an assignment.")] = False,
    execute: Annotated[bool, typer.Option("--execute", help="Start the reassignment of the JSON file.")] = False,
    verify: Annotated[bool, typer.Option("--verify", help="Check whether the reassignment is done.")] = False,
    cancel: Annotated[bool, typer.Option("--cancel", help="Cancel the reassignment in progress.")] = False,
    topics_to_move_json_file: Annotated[Optional[str], typer.Option(
        "--topics-to-move-json-file", help='{"version":1,"topics":[{"topic":"foo"}]} (with --generate).')] = None,
    broker_list: Annotated[Optional[str], typer.Option(
        "--broker-list", help="Brokers to place the topics on, e.g. 1,2,3 (with --generate).")] = None,
    reassignment_json_file: Annotated[Optional[str], typer.Option(
        "--reassignment-json-file", help="The partitions and their target replicas.")] = None,
    throttle: Annotated[int, typer.Option(
        "--throttle", help="Replication throttle of the move in bytes/s (-1: none); --verify removes it.")] = -1,
    preserve_throttles: Annotated[bool, typer.Option(
        "--preserve-throttles", help="With --verify: leave the throttles in place.")] = False,
    debug: Debug = False,
) -> None:
    """Move partitions between brokers: generate, execute, verify or cancel a reassignment
    (kafka-reassign-partitions.sh)."""
    if sum([generate, execute, verify, cancel]) != 1:
        fail("give exactly one of --generate, --execute, --verify, --cancel")
    if generate:
        if topics_to_move_json_file is None or broker_list is None:
            fail("--generate needs --topics-to-move-json-file and --broker-list")
        topics, brokers = _topics_and_brokers(topics_to_move_json_file, broker_list)
        with client_errors(debug), _admin(bootstrap_server, command_config) as admin:
            _generate(admin, topics, brokers)
        return
    if reassignment_json_file is None:
        fail("--execute, --verify and --cancel need --reassignment-json-file")
    wanted = _reassignment_partitions(reassignment_json_file)
    with client_errors(debug), _admin(bootstrap_server, command_config) as admin:
        if execute:
            _execute(admin, wanted, throttle)
        elif cancel:
            _current_assignment(admin, sorted({topic for topic, _ in wanted}))  # an unknown topic says so first
            _alter_reassignments(admin, wanted, cancel=True)
        else:
            _verify(admin, wanted, preserve_throttles)


def _topics_and_brokers(topics_to_move_json_file: str, broker_list: str) -> tuple[list[str], list[int]]:
    data = _read_json(topics_to_move_json_file)
    try:
        return [entry["topic"] for entry in data["topics"]], [int(b) for b in broker_list.split(",") if b.strip()]
    except (KeyError, TypeError, ValueError) as error:
        fail(f"bad --topics-to-move-json-file or --broker-list: {error}")


def _generate(admin, topics: list[str], brokers: list[int]) -> None:
    """Kafka's placement of the topics' partitions (same replication factor) on ``brokers``."""
    from kfk.controller.reassignment import propose_assignment

    current = _current_assignment(admin, topics)
    by_topic: dict[str, dict[int, list[int]]] = {}
    for (topic, partition), replicas in current.items():
        by_topic.setdefault(topic, {})[partition] = replicas
    proposal = propose_assignment(by_topic, brokers)
    proposed = {(topic, partition): replicas for topic, partitions in proposal.items()
                for partition, replicas in partitions.items()}
    typer.echo(f"Current partition replica assignment\n{_assignment_json(current)}\n")
    typer.echo(f"Proposed partition reassignment configuration\n{_assignment_json(proposed)}")


def _execute(admin, wanted: Assignment, throttle: int) -> None:
    current = _current_assignment(admin, sorted({topic for topic, _ in wanted}))
    typer.echo(f"Current partition replica assignment\n\n{_assignment_json(current)}\n\n"
               "Save this to use as the --reassignment-json-file option during rollback")
    if throttle >= 0:
        _alter_configs(admin, _throttle_changes(wanted, current, throttle))
        typer.echo(f"Warning: You must run --verify periodically, until the reassignment completes, "
                   f"to ensure the throttle is removed. The inter-broker throttle limit was set to "
                   f"{throttle} B/s")
    _alter_reassignments(admin, wanted, cancel=False)


def _alter_reassignments(admin, wanted: Assignment, cancel: bool) -> None:
    """Start (or cancel) the reassignments of ``wanted``."""
    from kfk.client import NewPartitionReassignment, TopicPartition

    outcomes = admin.alter_partition_reassignments({
        TopicPartition(topic, partition): None if cancel else NewPartitionReassignment(replicas)
        for (topic, partition), replicas in sorted(wanted.items())}, timeout_ms=TIMEOUT_MS)
    failures = [str(error) for error in outcomes.values() if error is not None]
    if failures:
        fail("reassignment failed for " + "; ".join(failures))
    done = [f"{topic}-{partition}" for topic, partition in sorted(wanted)]
    typer.echo(f"Successfully {'cancelled' if cancel else 'started'} partition reassignment"
               f"{'s' if len(done) > 1 else ''} for {','.join(done)}")


def _verify(admin, wanted: Assignment, preserve_throttles: bool) -> None:
    """Per partition whether its reassignment is complete. Once no reassignment runs in the cluster the throttles
    go, as Kafka's tool clears them: the rate on every broker of the cluster and of the file (the brokers the moves
    came from included, which the file does not name), the replica lists on the file's topics."""
    topics = sorted({topic for topic, _ in wanted})
    ongoing = {(tp.topic, tp.partition) for tp in admin.list_partition_reassignments(timeout_ms=TIMEOUT_MS)}
    current = _current_assignment(admin, topics)
    typer.echo("Status of partition reassignment:")
    complete = True
    for key, replicas in sorted(wanted.items()):
        name = f"{key[0]}-{key[1]}"
        if key in ongoing:
            typer.echo(f"Reassignment of partition {name} is still in progress.")
            complete = False
        elif current.get(key) == replicas:
            typer.echo(f"Reassignment of partition {name} is completed.")
        else:
            typer.echo(f"There is no active reassignment of partition {name}, but replica set is "
                       f"{_broker_list(current.get(key, []))} rather than {_broker_list(replicas)}.")
            complete = False
    typer.echo()  # Kafka's tool prints the log dir moves here: kfk's reassignments move no replica between log dirs
    if not ongoing and not preserve_throttles:
        brokers = sorted({broker.node_id for broker in admin.describe_cluster().brokers}
                         | {broker for replicas in wanted.values() for broker in replicas})
        typer.echo(f"Clearing broker-level throttles on broker{'s' if len(brokers) > 1 else ''} "
                   f"{_broker_list(brokers)}")
        typer.echo(f"Clearing topic-level throttles on topic{'s' if len(topics) > 1 else ''} {','.join(topics)}")
        _alter_configs(admin, _clear_throttle_changes(topics, brokers))
    if not complete:
        raise typer.Exit(1)


def _broker_list(brokers: list[int]) -> str:
    return ",".join(map(str, brokers))


# --- leader-election -------------------------------------------------------------------------------------------------

@app.command("leader-election")
def leader_election(
    bootstrap_server: BootstrapServer = DEFAULT_BOOTSTRAP_SERVER,
    admin_config: AdminConfig = None,
    election_type: Annotated[str, typer.Option("--election-type", help="preferred or unclean.")] = "preferred",
    topic: Annotated[Optional[str], typer.Option("--topic", help="The topic (with --partition).")] = None,
    partition: Annotated[Optional[int], typer.Option("--partition", help="The partition (with --topic).")] = None,
    path_to_json_file: Annotated[Optional[str], typer.Option(
        "--path-to-json-file", help='{"partitions":[{"topic":"foo","partition":1}]}')] = None,
    all_topic_partitions: Annotated[bool, typer.Option("--all-topic-partitions",
                                                       help="Every partition of the cluster.")] = False,
    debug: Debug = False,
) -> None:
    """Elect partition leaders: the preferred replica, or any live one (unclean) (kafka-leader-election.sh)."""
    from kfk.client import ElectionType, TopicPartition
    from kfk.errors import ElectionNotNeededError

    if election_type.upper() not in ElectionType.__members__:
        fail("--election-type must be preferred or unclean")
    chosen = sum([topic is not None, path_to_json_file is not None, all_topic_partitions])
    if chosen != 1 or (topic is not None) != (partition is not None):
        fail("give one of --topic with --partition, --path-to-json-file, --all-topic-partitions")
    wanted: list[TopicPartition] | None = None
    if topic is not None:
        wanted = [TopicPartition(topic, partition)]
    elif path_to_json_file is not None:
        wanted = _election_partitions(path_to_json_file)
    with client_errors(debug), _admin(bootstrap_server, admin_config) as admin:
        outcomes = admin.elect_leaders(ElectionType[election_type.upper()], wanted, timeout_ms=TIMEOUT_MS)
    succeeded = [str(tp) for tp, error in outcomes.items() if error is None]
    not_needed = [str(tp) for tp, error in outcomes.items() if isinstance(error, ElectionNotNeededError)]
    failed = [f"{tp}: {error.error_code.name}" for tp, error in outcomes.items()
              if error is not None and not isinstance(error, ElectionNotNeededError)]
    label = election_type.upper()
    if succeeded:
        typer.echo(f"Successfully completed leader election ({label}) for partitions {', '.join(succeeded)}")
    if not_needed:
        typer.echo(f"Valid replica already elected for partitions {', '.join(not_needed)}")
    if failed:
        fail(f"Error completing leader election ({label}) for partitions: {'; '.join(failed)}")


def _election_partitions(path: str):
    from kfk.client import TopicPartition

    data = _read_json(path)
    try:
        return [TopicPartition(entry["topic"], int(entry["partition"])) for entry in data["partitions"]]
    except (KeyError, TypeError, ValueError) as error:
        fail(f"{path} is not a partitions JSON file: {error}")
