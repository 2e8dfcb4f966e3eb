"""The standalone herder (Kafka's StandaloneHerder): the connectors of one worker, their tasks and states, and the
operations Kafka's REST API exposes, answering in Kafka's JSON shapes.

Target states are Kafka's: STARTED (tasks running), PAUSED (tasks kept, idle) and STOPPED (no tasks; the state in
which KIP-875 lets offsets be altered or reset). Connector configs live in memory, as in Kafka's standalone mode.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from typing import Any, Mapping

from kfk.client import Admin, NewTopic, OffsetAndMetadata, Producer, TopicPartition
from kfk.connect import plugins
from kfk.connect.config_def import ConfigException
from kfk.connect.connector import (
    Connector,
    SinkConnectorContext,
    SourceConnectorContext,
    frozen_partition,
)
from kfk.connect.connector_config import (
    build_transformations,
    java_map,
    prefixed,
    sink_config_def,
    source_config_def,
    validate_connector_config,
)
from kfk.connect.error_handling import DeadLetterQueueReporter, ErrorHandler
from kfk.connect.errors import (
    AlreadyExistsException,
    BadRequestException,
    ConnectException,
    NotFoundException,
)
from kfk.connect.offsets import OffsetStore, offset_key, offset_value
from kfk.connect.worker_tasks import ExactlyOnce, TaskStatus, WorkerSinkTask, WorkerSourceTask, WorkerTask

log = logging.getLogger("kfk.connect.herder")

NOT_STOPPED = ("Connectors must be in the STOPPED state before their offsets can be modified. This can be done for "
               "the specified connector by issuing a 'PUT' request to the '/connectors/{name}/stop' endpoint")


class _Context(SourceConnectorContext, SinkConnectorContext):
    def __init__(self, herder: StandaloneHerder, name: str) -> None:
        self.herder, self.name = herder, name
        self.offset_storage_reader = herder.offset_store.reader(name)

    def request_task_reconfiguration(self) -> None:
        threading.Thread(target=self.herder.reconfigure_tasks, args=(self.name,), daemon=True).start()

    def raise_error(self, error: Exception) -> None:
        state = self.herder.connectors.get(self.name)
        if state is not None:
            state.status.failed(error)


@dataclass
class ConnectorState:
    name: str
    config: dict[str, str]
    kind: str
    connector: Connector | None = None
    version: str | None = None
    target_state: str = "STARTED"
    status: TaskStatus = field(default_factory=TaskStatus)
    task_configs: list[dict[str, str]] = field(default_factory=list)
    tasks: dict[int, WorkerTask] = field(default_factory=dict)
    failed_tasks: dict[int, TaskStatus] = field(default_factory=dict)


def validated_config(name: str, config: Mapping[str, str]) -> dict[str, str]:
    """The connector's config as strings with its name, or Kafka's 400 listing every validation error."""
    config = {**{key: str(value) for key, value in config.items()}, "name": name}
    try:
        infos = validate_connector_config(config)
    except ConnectException as error:
        raise BadRequestException(str(error)) from None
    if infos.error_count:
        messages = [message for item in infos.configs for message in item["value"]["errors"]]
        raise BadRequestException(
            f"Connector configuration is invalid and contains the following {len(messages)} error(s):\n"
            + "\n".join(messages) + "\nYou can also find the above list of errors at the endpoint "
            "`/connector-plugins/{connectorType}/config/validate`")
    return config


class StandaloneHerder:
    def __init__(self, worker_config: Mapping[str, str], worker_id: str, offset_store: OffsetStore) -> None:
        self.worker_config = dict(worker_config)
        self.worker_id = worker_id
        self.offset_store = offset_store
        self.connectors: dict[str, ConnectorState] = {}
        self.lock = threading.RLock()

    # --- connectors ----------------------------------------------------------------------------------------------

    def _get(self, name: str) -> ConnectorState:
        state = self.connectors.get(name)
        if state is None:
            raise NotFoundException(f"Connector {name} not found")
        return state

    def write_leader_url(self) -> str | None:
        """Where REST writes go: None takes them here (the distributed herder names its group's leader)."""
        return None

    def connector_names(self) -> list[str]:
        return list(self.connectors)

    def put_connector_config(self, name: str, config: Mapping[str, str], allow_replace: bool
                             ) -> tuple[bool, dict[str, Any]]:
        """Create (or with `allow_replace` update) a connector; (created, its info)."""
        with self.lock:
            if name in self.connectors and not allow_replace:
                raise AlreadyExistsException(f"Connector {name} already exists")
            config = validated_config(name, config)
            created = name not in self.connectors
            if not created:
                self._stop_connector(self.connectors[name])
            target = self.connectors[name].target_state if not created else "STARTED"
            state = ConnectorState(name, config, plugins.find_connector(config["connector.class"]).kind,
                                   target_state=target)
            self.connectors[name] = state
            self._start_connector(state)
            return created, self.connector_info(name)

    def patch_connector_config(self, name: str, patch: Mapping[str, str | None]) -> dict[str, Any]:
        """KIP-477: merge `patch` into the connector's config (a null value removes the key) and apply it."""
        with self.lock:
            config = dict(self._get(name).config)
            for key, value in patch.items():
                if value is None:
                    config.pop(key, None)
                else:
                    config[key] = str(value)
            return self.put_connector_config(name, config, allow_replace=True)[1]

    def _start_connector(self, state: ConnectorState) -> None:
        try:
            connector = plugins.find_connector(state.config["connector.class"]).instantiate()
            state.connector, state.version = connector, connector.version()
            if state.target_state == "STOPPED":
                state.status = TaskStatus("STOPPED")
                state.task_configs = []
                return
            connector.initialize(_Context(self, state.name))
            connector.start(state.config)
            state.status = TaskStatus("RUNNING" if state.target_state == "STARTED" else "PAUSED")
            self._start_tasks(state)
        except Exception as error:
            log.error("Connector %s failed to start", state.name, exc_info=error)
            state.status.failed(error)

    def _task_configs(self, state: ConnectorState) -> list[dict[str, str]]:
        max_tasks = int(state.config.get("tasks.max", "1"))
        configs = state.connector.task_configs(max_tasks)
        if len(configs) > max_tasks and state.config.get("tasks.max.enforce", "true") == "true":
            raise ConnectException(f"The connector {state.name} has generated {len(configs)} tasks, which is greater "
                                   f"than {max_tasks}, the maximum number of tasks it is configured to create. ")
        task_class = state.connector.task_class()
        task_class_name = plugins.find_connector(state.config["connector.class"]).task_class_name(task_class)
        configs = [{**config, "task.class": task_class_name} for config in configs]
        if state.kind == "sink":
            for config in configs:
                for key in ("topics", "topics.regex"):
                    if key in state.config:
                        config[key] = state.config[key]
        return configs

    def _start_tasks(self, state: ConnectorState) -> None:
        state.task_configs = self._task_configs(state)
        for task_id, task_config in enumerate(state.task_configs):
            self._start_task(state, task_id, task_config)

    def _start_task(self, state: ConnectorState, task_id: int, task_config: dict[str, str]) -> None:
        state.failed_tasks.pop(task_id, None)
        try:
            worker_task = self._build_task(state, task_id, task_config)
        except Exception as error:
            log.error("Task %s-%d failed to start", state.name, task_id, exc_info=error)
            status = TaskStatus()
            status.failed(error)
            state.failed_tasks[task_id] = status
            return
        state.tasks[task_id] = worker_task
        worker_task.start(paused=state.target_state == "PAUSED")

    def _converter(self, config: Mapping[str, str], key: str, is_key: bool) -> Any:
        source = config if key in config else self.worker_config
        default = {"key.converter": "org.apache.kafka.connect.json.JsonConverter",
                   "value.converter": "org.apache.kafka.connect.json.JsonConverter",
                   "header.converter": "org.apache.kafka.connect.storage.SimpleHeaderConverter"}[key]
        name = source.get(key, default)
        kinds = ("header_converter",) if key == "header.converter" else ("converter",)
        converter = plugins.new_instance(name, kinds)
        props = prefixed(source, key + ".")
        if key == "header.converter":
            converter.configure(props)
        else:
            converter.configure(props, is_key)
        return converter

    def _build_task(self, state: ConnectorState, task_id: int, task_config: dict[str, str]) -> WorkerTask:
        task_class = state.connector.task_class()
        task = task_class()
        config = state.config
        arguments = (state.name, task_id, task, task_config, self.worker_config,
                     self._converter(config, "key.converter", True), self._converter(config, "value.converter", False),
                     self._converter(config, "header.converter", False), build_transformations(config))
        if state.kind == "source":
            parsed = source_config_def(state.version).parse(config)
            return WorkerSourceTask(*arguments, ErrorHandler(parsed, state.name, task_id),
                                    offset_store=self.offset_store,
                                    exactly_once=self._exactly_once(state.name, task_id, parsed))
        parsed = sink_config_def(state.version).parse(config)
        dead_letter_queue = None
        if parsed["errors.deadletterqueue.topic.name"]:
            dead_letter_queue = self._dead_letter_queue(state, task_id, parsed)
        return WorkerSinkTask(*arguments, ErrorHandler(parsed, state.name, task_id, dead_letter_queue))

    def _exactly_once(self, connector: str, task_id: int, parsed: Mapping[str, Any]) -> ExactlyOnce | None:
        """A standalone worker runs source tasks at least once (exactly-once source support is a distributed
        worker's, as in Kafka)."""
        return None

    def _dead_letter_queue(self, state: ConnectorState, task_id: int, parsed: Mapping[str, Any]
                           ) -> DeadLetterQueueReporter:
        topic = parsed["errors.deadletterqueue.topic.name"]
        client = {key: value for key, value in self.worker_config.items()
                  if key == "bootstrap.servers" or key.startswith(("security.", "sasl.", "ssl."))}
        with Admin(client) as admin:
            if topic not in admin.list_topics():
                admin.create_topics([NewTopic(topic, 1, parsed["errors.deadletterqueue.topic.replication.factor"])])
        producer = Producer({**client, "client.id": f"connector-dlq-producer-{state.name}-{task_id}"})
        return DeadLetterQueueReporter(producer, topic)

    def _stop_tasks(self, state: ConnectorState) -> None:
        for task in state.tasks.values():
            task.stop()
        state.tasks.clear()
        state.failed_tasks.clear()

    def _stop_connector(self, state: ConnectorState) -> None:
        self._stop_tasks(state)
        if state.connector is not None and state.status.state not in ("STOPPED", "FAILED", "UNASSIGNED"):
            try:
                state.connector.stop()
            except Exception:
                log.exception("Connector %s failed to stop", state.name)

    def reconfigure_tasks(self, name: str) -> None:
        with self.lock:
            state = self.connectors.get(name)
            if state is None or state.target_state == "STOPPED":
                return
            self._stop_tasks(state)
            self._start_tasks(state)

    def delete_connector(self, name: str) -> None:
        with self.lock:
            state = self._get(name)
            self._stop_connector(state)
            del self.connectors[name]

    def stop(self) -> None:
        with self.lock:
            for state in self.connectors.values():
                self._stop_connector(state)

    # --- views ---------------------------------------------------------------------------------------------------

    def connector_info(self, name: str) -> dict[str, Any]:
        state = self._get(name)
        return {"name": name, "config": dict(state.config),
                "tasks": [{"connector": name, "task": task_id} for task_id in range(len(state.task_configs))],
                "type": state.kind}

    def connector_config(self, name: str) -> dict[str, str]:
        return dict(self._get(name).config)

    def _task_status(self, state: ConnectorState, task_id: int) -> dict[str, Any]:
        worker_task = state.tasks.get(task_id)
        status = worker_task.status if worker_task is not None else state.failed_tasks.get(task_id, TaskStatus())
        body: dict[str, Any] = {"id": task_id, "state": status.state, "worker_id": self.worker_id,
                                "version": state.version if worker_task is not None else None}
        if status.trace is not None:
            body["trace"] = status.trace
        return body

    def connector_status(self, name: str) -> dict[str, Any]:
        state = self.connectors.get(name)
        if state is None:
            raise NotFoundException(f"No status found for connector {name}")
        connector: dict[str, Any] = {"state": state.status.state, "worker_id": self.worker_id,
                                     "version": state.version}
        if state.status.trace is not None:
            connector["trace"] = state.status.trace
        return {"name": name, "connector": connector,
                "tasks": [self._task_status(state, task_id) for task_id in range(len(state.task_configs))],
                "type": state.kind}

    def task_status(self, name: str, task_id: int) -> dict[str, Any]:
        state = self._get(name)
        if not 0 <= task_id < len(state.task_configs):
            raise NotFoundException(f"No status found for task {name}-{task_id}")
        return self._task_status(state, task_id)

    def task_configs(self, name: str) -> list[dict[str, Any]]:
        state = self._get(name)
        return [{"id": {"connector": name, "task": task_id}, "config": {**state.config, **config}}
                for task_id, config in enumerate(state.task_configs)]

    def connector_topics(self, name: str) -> dict[str, Any]:
        state = self._get(name)
        if state.kind == "sink":
            topics = [topic.strip() for topic in state.config.get("topics", "").split(",") if topic.strip()]
        else:
            topics = sorted({state.config["topic"]} if "topic" in state.config else set())
        return {name: {"topics": topics}}

    # --- state changes -------------------------------------------------------------------------------------------

    def pause(self, name: str) -> None:
        with self.lock:
            state = self._get(name)
            state.target_state = "PAUSED"
            if state.status.state == "RUNNING":
                state.status.state = "PAUSED"
            elif state.status.state == "STOPPED":
                self._start_connector(state)
            for task in state.tasks.values():
                task.pause()

    def resume(self, name: str) -> None:
        with self.lock:
            state = self._get(name)
            previous, state.target_state = state.target_state, "STARTED"
            if previous == "STOPPED" or state.status.state == "STOPPED":
                self._start_connector(state)
                return
            if state.status.state == "PAUSED":
                state.status.state = "RUNNING"
            for task in state.tasks.values():
                task.resume()

    def stop_connector(self, name: str) -> None:
        with self.lock:
            state = self._get(name)
            self._stop_connector(state)
            state.target_state = "STOPPED"
            state.status = TaskStatus("STOPPED")
            state.task_configs = []

    def restart_connector(self, name: str, include_tasks: bool, only_failed: bool) -> dict[str, Any] | None:
        """Kafka's restart: the connector (unless only_failed and it is not FAILED) and, with include_tasks, its
        tasks (only the FAILED ones with only_failed). Returns the status with RESTARTING marks for 202."""
        with self.lock:
            state = self._get(name)
            restart_connector = not only_failed or state.status.state == "FAILED"
            restart_tasks = [task_id for task_id in range(len(state.task_configs))
                             if include_tasks and (not only_failed or self._task_status(state, task_id)["state"]
                                                   == "FAILED")]
            status = self.connector_status(name)
            if restart_connector:
                status["connector"]["state"] = "RESTARTING"
            for task in status["tasks"]:
                if task["id"] in restart_tasks:
                    task["state"] = "RESTARTING"
            if restart_connector and state.target_state != "STOPPED":
                for task_id in restart_tasks:
                    task = state.tasks.pop(task_id, None)
                    if task is not None:
                        task.stop()
                if state.connector is not None and state.status.state != "FAILED":
                    state.connector.stop()
                state.status = TaskStatus()
                connector = plugins.find_connector(state.config["connector.class"]).instantiate()
                state.connector = connector
                try:
                    connector.initialize(_Context(self, name))
                    connector.start(state.config)
                    state.status = TaskStatus("RUNNING" if state.target_state == "STARTED" else "PAUSED")
                except Exception as error:
                    state.status.failed(error)
            else:
                for task_id in restart_tasks:
                    task = state.tasks.pop(task_id, None)
                    if task is not None:
                        task.stop()
            for task_id in restart_tasks:
                if task_id < len(state.task_configs):
                    self._start_task(state, task_id, state.task_configs[task_id])
            return status if (include_tasks or only_failed) else None

    def put_task_configs(self, name: str, task_configs: list[dict[str, Any]], headers: Mapping[str, str],
                         body: bytes) -> None:
        """Kafka's internal POST /connectors/{name}/tasks, which only a distributed group's leader takes."""
        raise ConnectException("Kafka Connect in standalone mode does not support externally setting task "
                               "configurations.")

    def restart_task(self, name: str, task_id: int, may_forward: bool = True) -> str | None:
        """Restart one task here; a distributed worker that does not run it answers with the URL of the worker the
        request goes on to (None: restarted)."""
        with self.lock:
            state = self._get(name)
            if not 0 <= task_id < len(state.task_configs):
                raise NotFoundException(f"Task {name}-{task_id} not found")
            self._restart_task_here(state, task_id)
        return None

    def _restart_task_here(self, state: ConnectorState, task_id: int) -> None:
        """Stop the task if it runs and start it again with its config."""
        task = state.tasks.pop(task_id, None)
        if task is not None:
            task.stop()
        self._start_task(state, task_id, state.task_configs[task_id])

    # --- offsets (KIP-875) ---------------------------------------------------------------------------------------

    def _admin(self) -> Admin:
        return Admin({key: value for key, value in self.worker_config.items()
                      if key == "bootstrap.servers" or key.startswith(("security.", "sasl.", "ssl."))})

    def connector_offsets(self, name: str) -> dict[str, Any]:
        state = self._get(name)
        if state.kind == "source":
            return {"offsets": [{"partition": partition, "offset": offset}
                                for partition, offset in self.offset_store.connector_offsets(name)]}
        with self._admin() as admin:
            committed = admin.list_consumer_group_offsets(f"connect-{name}")
        return {"offsets": [{"partition": {"kafka_topic": partition.topic, "kafka_partition": partition.partition},
                             "offset": {"kafka_offset": offset.offset}}
                            for partition, offset in sorted(committed.items())
                            if offset is not None and offset.offset >= 0]}

    def _require_stopped(self, name: str) -> ConnectorState:
        state = self._get(name)
        if state.target_state != "STOPPED":
            raise BadRequestException(NOT_STOPPED.replace("{name}", name))
        return state

    def alter_offsets(self, name: str, offsets: list[dict[str, Any]]) -> str:
        with self.lock:
            state = self._require_stopped(name)
            connector = plugins.find_connector(state.config["connector.class"]).instantiate()
            if state.kind == "source":
                by_partition = {frozen_partition(item["partition"]): item.get("offset") for item in offsets}
                handled = connector.alter_offsets(state.config, by_partition)
                self.offset_store.set_all({offset_key(name, item["partition"]): offset_value(item.get("offset"))
                                           for item in offsets})
            else:
                sink_offsets = _sink_offsets(offsets)
                handled = connector.alter_offsets(state.config, sink_offsets)
                with self._admin() as admin:
                    alter = {tp: OffsetAndMetadata(offset) for tp, offset in sink_offsets.items() if offset is not None}
                    if alter:
                        admin.alter_consumer_group_offsets(f"connect-{name}", alter)
                    delete = [tp for tp, offset in sink_offsets.items() if offset is None]
                    if delete:
                        admin.delete_consumer_group_offsets(f"connect-{name}", delete)
            if handled:
                return "The offsets for this connector have been altered successfully"
            return ("The Connect framework-managed offsets for this connector have been altered successfully. However, "
                    "if this connector manages offsets externally, they will need to be manually altered in the system "
                    "that the connector uses.")

    def reset_offsets(self, name: str) -> str:
        with self.lock:
            state = self._require_stopped(name)
            connector = plugins.find_connector(state.config["connector.class"]).instantiate()
            if state.kind == "source":
                current = list(self.offset_store.connector_offsets(name))
                handled = connector.alter_offsets(state.config, {frozen_partition(partition): None
                                                                 for partition, _ in current})
                self.offset_store.set_all({offset_key(name, partition): None for partition, _ in current})
            else:
                with self._admin() as admin:
                    committed = admin.list_consumer_group_offsets(f"connect-{name}")
                    handled = connector.alter_offsets(state.config, {tp: None for tp in committed})
                    if committed:
                        admin.delete_consumer_group_offsets(f"connect-{name}", list(committed))
            if handled:
                return "The offsets for this connector have been reset successfully"
            return ("The Connect framework-managed offsets for this connector have been reset successfully. However, "
                    "if this connector manages offsets externally, they will need to be manually reset in the system "
                    "that the connector uses.")

    # --- plugins -------------------------------------------------------------------------------------------------

    def validate(self, plugin_name: str, config: Mapping[str, str]) -> dict[str, Any]:
        config = {key: str(value) for key, value in config.items()}
        if "connector.class" not in config:  # Kafka answers this one with 500 and the exception's class name
            raise ConnectException("org.apache.kafka.connect.runtime.rest.errors.BadRequestException: Connector "
                                   f"config {java_map(config)} contains no connector type")
        try:
            return validate_connector_config(config).to_json()
        except ConfigException as error:
            raise BadRequestException(str(error)) from None

    def plugin_config(self, plugin_name: str) -> list[dict[str, Any]]:
        try:
            plugin = plugins.find(plugin_name, ("source", "sink", "converter", "header_converter", "transformation",
                                                "predicate"))
        except ConnectException:
            raise NotFoundException(f"Unknown plugin {plugin_name}.") from None
        instance = plugin.instantiate()
        keys = list(instance.config().keys.values())
        if plugin.kind in ("source", "sink"):
            version = instance.version()
            framework = source_config_def(version) if plugin.kind == "source" else sink_config_def(version)
            keys += [key for key in framework.keys.values() if key.name not in instance.config().keys]
        return [key.definition_json() for key in keys]


def _sink_offsets(offsets: list[dict[str, Any]]) -> dict[TopicPartition, int | None]:
    result: dict[TopicPartition, int | None] = {}
    for item in offsets:
        partition = item.get("partition") or {}
        if "kafka_topic" not in partition or "kafka_partition" not in partition:
            raise BadRequestException("The partition for a sink connector offset must contain the keys 'kafka_topic' "
                                      "and 'kafka_partition'")
        offset = item.get("offset")
        if offset is not None and "kafka_offset" not in offset:
            raise BadRequestException("Offset objects should either be null or contain the key 'kafka_offset'")
        result[TopicPartition(partition["kafka_topic"], int(partition["kafka_partition"]))] = \
            None if offset is None else int(offset["kafka_offset"])
    return result
