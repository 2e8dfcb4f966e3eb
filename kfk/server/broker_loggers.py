"""Broker loggers: the BROKER_LOGGER config resource (KIP-412), a broker's log levels read and changed at run time.

DescribeConfigs on resource type BROKER_LOGGER, name = this broker's id, lists every logger of the broker process
(Python's logging loggers: kfk.server, kfk.replication.partition, ..., and `root`) with its effective level;
IncrementalAlterConfigs SETs a logger's level or DELETEs it (the logger inherits its parent's level again). As in
Kafka, a change is made by the broker that receives the request (no controller, no metadata record) and lasts until
the process ends; the names and errors are Kafka's (RuntimeLoggerManager):
- levels are Kafka's TRACE, DEBUG, INFO, WARN, ERROR, FATAL (Python's WARNING and CRITICAL are shown as WARN and
  FATAL; TRACE is a level below DEBUG, where kfk logs nothing more today);
- an unknown logger or level: INVALID_CONFIG; removing the root logger's level, APPEND or SUBTRACT, a null
  value, another broker's id: INVALID_REQUEST.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from kfk.common.config_types import ConfigEntry, ConfigSource, WireConfigType
from kfk.errors import InvalidConfigurationError, InvalidRequestError
from kfk.protocol.messages.incremental_alter_configs import IncrementalAlterConfigsRequest

log = logging.getLogger(__name__)

ROOT_LOGGER = "root"  # Kafka keeps log4j 1's name for the root logger
TRACE = logging.DEBUG - 5
logging.addLevelName(TRACE, "TRACE")  # the broker's log lines name the level as Kafka's do

#: Kafka's log levels (LogLevelConfig.VALID_LOG_LEVELS) as Python's.
LEVELS = {"TRACE": TRACE, "DEBUG": logging.DEBUG, "INFO": logging.INFO, "WARN": logging.WARNING,
          "ERROR": logging.ERROR, "FATAL": logging.CRITICAL}

_SET, _DELETE = 0, 1  # AlterConfigOp.OpType


def _level_name(level: int) -> str:
    """Kafka's name of a Python level: the highest Kafka level at or below it."""
    return max(((value, name) for name, value in LEVELS.items() if value <= level), default=(TRACE, "TRACE"))[1]


def _logger(name: str) -> logging.Logger:
    return logging.getLogger() if name == ROOT_LOGGER else logging.getLogger(name)


def _exists(name: str) -> bool:
    return name == ROOT_LOGGER or name in logging.Logger.manager.loggerDict


def check_node_id(resource_name: str, node_id: int) -> None:
    try:
        requested = int(resource_name)
    except ValueError:
        raise InvalidRequestError(f"Node id must be an integer, but it is: {resource_name}") from None
    if requested != node_id:
        raise InvalidRequestError(f"Unexpected node id. Expected {node_id}, but received {requested}")


def describe_loggers() -> list[ConfigEntry]:
    """Every logger of this process with its effective level, root first."""
    names = sorted(name for name, logger in logging.Logger.manager.loggerDict.items()
                   if isinstance(logger, logging.Logger))
    return [ConfigEntry(name, _level_name(_logger(name).getEffectiveLevel()),
                        ConfigSource.DYNAMIC_BROKER_LOGGER_CONFIG, False, False, WireConfigType.UNKNOWN)
            for name in [ROOT_LOGGER, *names]]


def alter_loggers(operations: Iterable[IncrementalAlterConfigsRequest.AlterableConfig], validate_only: bool) -> None:
    """Check every operation, then (unless validate_only) apply them all; a KafkaError names the first bad one."""
    operations = list(operations)
    for operation in operations:
        name, value, op = operation.name, operation.value, operation.config_operation
        if op not in (_SET, _DELETE):
            kind = {2: "APPEND", 3: "SUBTRACT"}.get(op)
            raise InvalidRequestError(f"{kind} operation is not allowed for the BROKER_LOGGER resource" if kind else
                                      f"Unknown operation type {op} is not allowed for the BROKER_LOGGER resource")
        if op == _SET and value is None:
            raise InvalidRequestError(f"Null value not supported for : {name}")
        if not _exists(name):
            raise InvalidConfigurationError(f"Logger {name} does not exist!")
        if op == _SET and value not in LEVELS:
            raise InvalidConfigurationError(
                f"Cannot set the log level of {name} to {value} as it is not a supported log level. "
                f"Valid log levels are {', '.join(sorted(LEVELS))}")
        if op == _DELETE and name == ROOT_LOGGER:
            raise InvalidRequestError(f"Removing the log level of the {ROOT_LOGGER} logger is not allowed")
    if validate_only:
        return
    for operation in operations:
        if operation.config_operation == _SET:
            _logger(operation.name).setLevel(LEVELS[operation.value])
            log.warning("Updated the log level of %s to %s", operation.name, operation.value)
        else:
            _logger(operation.name).setLevel(logging.NOTSET)
            log.warning("Unset the log level of %s", operation.name)
