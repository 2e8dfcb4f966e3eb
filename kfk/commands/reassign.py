"""`kfk reassign-partitions` and `kfk leader-election` (kafka-reassign-partitions.sh, kafka-leader-election.sh).

reassign-partitions, with Kafka's JSON files:
- `--generate --topics-to-move-json-file F --broker-list 1,2`: prints the current assignment and a proposed one
  (Kafka's placement on those brokers); F is {"version":1,"topics":[{"topic":"foo"}]}.
- `--execute --reassignment-json-file F`: starts the reassignment (AlterPartitionReassignments to the controller)
  and prints the current assignment to keep for a rollback; F is
  {"version":1,"partitions":[{"topic":"foo","partition":0,"replicas":[2,3]}]}.
- `--verify --reassignment-json-file F`: says per partition whether the reassignment is complete.
- `--cancel --reassignment-json-file F`: cancels the reassignments in progress for F's partitions.
leader-election: `--election-type preferred|unclean` for `--topic T --partition P`, `--path-to-json-file F`
({"partitions":[{"topic":"foo","partition":1}]}) or `--all-topic-partitions`.
The requests go to the controller; the logic lives in kfk.controller.reassignment (proposal) and the controller.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from kfk.commands.errors import fail

app = typer.Typer()

BootstrapServer = Annotated[str, typer.Option("--bootstrap-server", envvar="KFK_BOOTSTRAP_SERVER",
                                              help="host:port of a broker (several separated by commas).")]
TIMEOUT_MS = 30_000


def _read_json(path: str) -> Any:
    try:
        return json.loads(Path(path).read_text())
    except OSError as error:
        fail(f"cannot read {path}: {error.strerror or error}")
    except ValueError as error:
        fail(f"{path} is not valid JSON: {error}")


def _reassignment_partitions(path: str) -> dict[tuple[str, int], list[int]]:
    data = _read_json(path)
    try:
        return {(entry["topic"], int(entry["partition"])): [int(r) for r in entry["replicas"]]
                for entry in data["partitions"]}
    except (KeyError, TypeError, ValueError) as error:
        fail(f"{path} is not a reassignment JSON file (missing {error}): expected "
             '{"version":1,"partitions":[{"topic":"foo","partition":0,"replicas":[1,2]}]}')


def _assignment_json(assignment: dict[tuple[str, int], list[int]]) -> str:
    return json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": partition, "replicas": replicas, "log_dirs": ["any"] * len(replicas)}
        for (topic, partition), replicas in sorted(assignment.items())]}, separators=(",", ":"))


def _admin(bootstrap_server: str):
    from kfk.client.admin import Admin

    return Admin({"bootstrap.servers": bootstrap_server})


def _send_to_controller(admin, request, api_version: int):
    """One request to the controller, retried while the broker asked is not (or no longer) the controller."""
    from kfk.errors import ErrorCode, NotControllerError

    async def call(deadline: float):
        controller = await admin._controller(deadline)
        response = await admin._network.send(controller, request, version=api_version)
        if getattr(response, "error_code", ErrorCode.NONE) == ErrorCode.NOT_CONTROLLER:
            raise NotControllerError("the broker asked is not the controller")
        return response

    return admin._run(call, TIMEOUT_MS)


def _current_assignment(admin, topics: list[str]) -> dict[tuple[str, int], list[int]]:
    described = admin.describe_topics(topics)
    return {(name, info.partition): list(info.replicas)
            for name, description in described.items() for info in description.partitions}


LEADER_THROTTLED_RATE = "leader.replication.throttled.rate"
FOLLOWER_THROTTLED_RATE = "follower.replication.throttled.rate"
LEADER_THROTTLED_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_THROTTLED_REPLICAS = "follower.replication.throttled.replicas"


def _alter_configs(admin, changes: dict[tuple[int, str], dict[str, str | None]]) -> None:
    """IncrementalAlterConfigs through the controller: SET (or DELETE for None) per resource."""
    from kfk.errors import ErrorCode
    from kfk.protocol.messages.incremental_alter_configs import IncrementalAlterConfigsRequest

    Resource = IncrementalAlterConfigsRequest.AlterConfigsResource
    Config = IncrementalAlterConfigsRequest.AlterableConfig
    request = IncrementalAlterConfigsRequest(resources=[
        Resource(resource_type=resource_type, resource_name=name, configs=[
            Config(name=key, config_operation=1 if value is None else 0, value=value) for key, value in keys.items()])
        for (resource_type, name), keys in changes.items()])
    response = _send_to_controller(admin, request, 1)
    failures = [f"{r.resource_name}: {ErrorCode(r.error_code).name} {r.error_message}" for r in response.responses
                if r.error_code != 0]
    if failures:
        fail("setting the throttle failed: " + "; ".join(failures))


def _set_throttle(admin, wanted: dict[tuple[str, int], list[int]], current: dict[tuple[str, int], list[int]],
                  rate: int) -> None:
    """Kafka's throttle of a reassignment: the rate on every broker involved, and per topic the replicas it
    applies to (leader side: the current replicas; follower side: the ones being added)."""
    from kfk.common.config_types import ConfigResourceType

    changes: dict[tuple[int, str], dict[str, str | None]] = {}
    for (topic, partition), target in wanted.items():
        existing = current.get((topic, partition), [])
        topic_changes = changes.setdefault((ConfigResourceType.TOPIC, topic), {})
        leaders = [f"{partition}:{b}" for b in existing]
        followers = [f"{partition}:{b}" for b in target if b not in existing]
        for key, entries in ((LEADER_THROTTLED_REPLICAS, leaders), (FOLLOWER_THROTTLED_REPLICAS, followers)):
            if entries:
                joined = ",".join(filter(None, [topic_changes.get(key) or "", *entries]))
                topic_changes[key] = joined
        for broker in set(existing) | set(target):
            changes[(ConfigResourceType.BROKER, str(broker))] = {LEADER_THROTTLED_RATE: str(rate),
                                                                 FOLLOWER_THROTTLED_RATE: str(rate)}
    _alter_configs(admin, changes)


def _clear_throttle(admin, topics: list[str], brokers: list[int]) -> None:
    from kfk.common.config_types import ConfigResourceType

    changes: dict[tuple[int, str], dict[str, str | None]] = {
        (ConfigResourceType.TOPIC, topic): {LEADER_THROTTLED_REPLICAS: None, FOLLOWER_THROTTLED_REPLICAS: None}
        for topic in topics}
    for broker in brokers:
        changes[(ConfigResourceType.BROKER, str(broker))] = {LEADER_THROTTLED_RATE: None,
                                                             FOLLOWER_THROTTLED_RATE: None}
    _alter_configs(admin, changes)


@app.command("reassign-partitions")
def reassign_partitions(
    bootstrap_server: BootstrapServer = "localhost:9092",
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
) -> None:
    """Move partitions between brokers: generate, execute, verify or cancel a reassignment
    (kafka-reassign-partitions.sh)."""
    if sum([generate, execute, verify, cancel]) != 1:
        fail("give exactly one of --generate, --execute, --verify, --cancel")
    from kfk.errors import ErrorCode, KafkaError
    from kfk.protocol.messages.alter_partition_reassignments import AlterPartitionReassignmentsRequest
    from kfk.protocol.messages.list_partition_reassignments import ListPartitionReassignmentsRequest

    try:
        with _admin(bootstrap_server) as admin:
            if generate:
                if topics_to_move_json_file is None or broker_list is None:
                    fail("--generate needs --topics-to-move-json-file and --broker-list")
                from kfk.controller.reassignment import propose_assignment

                data = _read_json(topics_to_move_json_file)
                try:
                    topics = [entry["topic"] for entry in data["topics"]]
                    brokers = [int(b) for b in broker_list.split(",") if b.strip()]
                except (KeyError, TypeError, ValueError) as error:
                    fail(f"bad --topics-to-move-json-file or --broker-list: {error}")
                current = _current_assignment(admin, topics)
                by_topic: dict[str, dict[int, list[int]]] = {}
                for (topic, partition), replicas in current.items():
                    by_topic.setdefault(topic, {})[partition] = replicas
                try:
                    proposal = propose_assignment(by_topic, brokers)
                except KafkaError as error:
                    fail(str(error))
                proposed = {(topic, partition): replicas for topic, partitions in proposal.items()
                            for partition, replicas in partitions.items()}
                typer.echo(f"Current partition replica assignment\n{_assignment_json(current)}\n")
                typer.echo(f"Proposed partition reassignment configuration\n{_assignment_json(proposed)}")
                return
            if reassignment_json_file is None:
                fail("--execute, --verify and --cancel need --reassignment-json-file")
            wanted = _reassignment_partitions(reassignment_json_file)
            topics = sorted({topic for topic, _ in wanted})
            if execute or cancel:
                current = _current_assignment(admin, topics)
                if execute:
                    typer.echo(f"Current partition replica assignment\n\n{_assignment_json(current)}\n\n"
                               "Save this to use as the --reassignment-json-file option during rollback")
                if execute and throttle >= 0:
                    _set_throttle(admin, wanted, current, throttle)
                    typer.echo(f"Warning: You must run --verify periodically, until the reassignment completes, "
                               f"to ensure the throttle is removed. The inter-broker throttle limit was set to "
                               f"{throttle} B/s")
                Topic = AlterPartitionReassignmentsRequest.ReassignableTopic
                Partition = AlterPartitionReassignmentsRequest.ReassignablePartition
                request = AlterPartitionReassignmentsRequest(timeout_ms=TIMEOUT_MS, topics=[
                    Topic(name=topic, partitions=[Partition(partition_index=partition,
                                                            replicas=None if cancel else replicas)
                                                  for (name, partition), replicas in sorted(wanted.items())
                                                  if name == topic])
                    for topic in topics])
                response = _send_to_controller(admin, request, 0)
                failures = [f"{topic.name}-{p.partition_index}: {ErrorCode(p.error_code).name} {p.error_message or ''}"
                            for topic in response.responses for p in topic.partitions if p.error_code != 0]
                if response.error_code != 0:
                    fail(f"reassignment failed: {ErrorCode(response.error_code).name} {response.error_message}")
                done = [f"{topic}-{partition}" for topic, partition in sorted(wanted)]
                if failures:
                    fail("reassignment failed for " + "; ".join(failures))
                verb = "cancelled" if cancel else "started"
                typer.echo(f"Successfully {verb} partition reassignment{'s' if len(done) > 1 else ''} for "
                           f"{','.join(done)}")
                return
            request = ListPartitionReassignmentsRequest(timeout_ms=TIMEOUT_MS, topics=None)
            ongoing_response = _send_to_controller(admin, request, 0)
            ongoing = {(topic.name, p.partition_index) for topic in ongoing_response.topics for p in topic.partitions}
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
                               f"{current.get(key)} rather than {replicas}.")
                    complete = False
            if not complete:
                raise typer.Exit(1)
            _clear_throttle(admin, topics, sorted({b for replicas in current.values() for b in replicas}
                                                  | {b for replicas in wanted.values() for b in replicas}))
            typer.echo("Clearing broker-level throttles on brokers "
                       f"{','.join(str(b) for b in sorted({b for r in wanted.values() for b in r}))}\n"
                       f"Clearing topic-level throttles on topic {','.join(topics)}")
    except KafkaError as error:
        fail(str(error))


@app.command("leader-election")
def leader_election(
    bootstrap_server: BootstrapServer = "localhost:9092",
    election_type: Annotated[str, typer.Option("--election-type", help="preferred or unclean.")] = "preferred",
    topic: Annotated[Optional[str], typer.Option("--topic", help="The topic (with --partition).")] = None,
    partition: Annotated[Optional[int], typer.Option("--partition", help="The partition (with --topic).")] = None,
    path_to_json_file: Annotated[Optional[str], typer.Option(
        "--path-to-json-file", help='{"partitions":[{"topic":"foo","partition":1}]}')] = None,
    all_topic_partitions: Annotated[bool, typer.Option("--all-topic-partitions",
                                                       help="Every partition of the cluster.")] = False,
) -> None:
    """Elect partition leaders: the preferred replica, or any live one (unclean) (kafka-leader-election.sh)."""
    from kfk.errors import ErrorCode, KafkaError
    from kfk.protocol.messages.elect_leaders import ElectLeadersRequest

    kinds = {"preferred": 0, "unclean": 1}
    if election_type.lower() not in kinds:
        fail("--election-type must be preferred or unclean")
    chosen = sum([topic is not None, path_to_json_file is not None, all_topic_partitions])
    if chosen != 1 or (topic is not None) != (partition is not None):
        fail("give one of --topic with --partition, --path-to-json-file, --all-topic-partitions")
    wanted: list[tuple[str, int]] | None
    if topic is not None:
        wanted = [(topic, partition)]
    elif path_to_json_file is not None:
        data = _read_json(path_to_json_file)
        try:
            wanted = [(entry["topic"], int(entry["partition"])) for entry in data["partitions"]]
        except (KeyError, TypeError, ValueError) as error:
            fail(f"{path_to_json_file} is not a partitions JSON file: {error}")
    else:
        wanted = None
    by_topic: dict[str, list[int]] = {}
    for name, index in wanted or ():
        by_topic.setdefault(name, []).append(index)
    request = ElectLeadersRequest(election_type=kinds[election_type.lower()], timeout_ms=TIMEOUT_MS,
                                  topic_partitions=None if wanted is None else [
                                      ElectLeadersRequest.TopicPartitions(topic=name, partitions=indexes)
                                      for name, indexes in by_topic.items()])
    try:
        with _admin(bootstrap_server) as admin:
            response = _send_to_controller(admin, request, 1)
    except KafkaError as error:
        fail(str(error))
    succeeded, not_needed, failed = [], [], []
    for result in response.replica_election_results:
        for entry in result.partition_result:
            name = f"{result.topic}-{entry.partition_id}"
            if entry.error_code == ErrorCode.NONE:
                succeeded.append(name)
            elif entry.error_code == ErrorCode.ELECTION_NOT_NEEDED:
                not_needed.append(name)
            else:
                failed.append(f"{name}: {ErrorCode(entry.error_code).name}")
    label = election_type.upper()
    if succeeded:
        typer.echo(f"Successfully completed leader election ({label}) for partitions {', '.join(succeeded)}")
    if not_needed:
        typer.echo(f"Valid replica already elected for partitions {', '.join(not_needed)}")
    if failed:
        fail(f"Error completing leader election ({label}) for partitions: {'; '.join(failed)}")
