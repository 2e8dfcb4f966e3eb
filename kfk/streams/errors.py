"""Kafka Streams' exception handlers (org.apache.kafka.streams.errors): what a task does with a record whose bytes its
source serde cannot read (deserialization.exception.handler), whose processing raised in user code
(processing.exception.handler, KIP-1033) or whose write failed (production.exception.handler).

A handler answers each failure with a Result: RESUME drops the record (counted as a dropped record, Kafka's
dropped-records metric) and processing goes on; FAIL stops the stream thread with a StreamsException, before the
failed record's offset is committed, so a restarted application meets it again. Kafka's handlers answer with a
Response holding a Result (RESUME, FAIL; RETRY for production errors); its deprecated responses said CONTINUE, which
is accepted here as RESUME.

A handler is configured as in Kafka by class name (``org.apache.kafka.streams.errors.LogAndContinueExceptionHandler``
or the short ``LogAndContinueExceptionHandler``), or with a Python class, a ``module:attribute`` path to one, an
instance, or a plain callable ``(context, record, exception) -> Result``. A class or instance answers with
``handle_error(context, record, exception)`` (a production handler may also define ``handle_serialization_error``,
whose default is FAIL, as Kafka's), and may define ``configure(configs)``, which receives the application's config
as Kafka's Configurable does. A class is instantiated for each task, as Kafka Streams does.
"""

from __future__ import annotations

import enum
import importlib
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from kfk.errors import InvalidConfigurationError, KafkaError

__all__ = [
    "DefaultProductionExceptionHandler", "ErrorHandlerContext", "ExceptionHandlers", "FailedProcessingException",
    "LogAndContinueExceptionHandler", "LogAndContinueProcessingExceptionHandler", "LogAndFailExceptionHandler",
    "LogAndFailProcessingExceptionHandler", "ProducerRecord", "Result", "SerializationExceptionOrigin",
    "StreamsException",
]

log = logging.getLogger("kfk.streams")

#: Kafka's package of these classes: its config values name them with it.
_KAFKA_PACKAGE = "org.apache.kafka.streams.errors."


class StreamsException(KafkaError):
    """Kafka's StreamsException: what stops a stream thread (the application goes to ERROR)."""


class FailedProcessingException(StreamsException):
    """A processing error its handler answered with FAIL (Kafka's FailedProcessingException): the processor nodes
    above the one that failed pass it on instead of handling it again."""

    def __init__(self, node: str, cause: BaseException, message: str | None = None) -> None:
        super().__init__(message or f"{type(cause).__name__}: {cause}")
        self.node = node
        self.__cause__ = cause


class Result(enum.Enum):
    """A handler's answer (Kafka's Response.result(): RESUME, FAIL, and RETRY for production errors)."""

    RESUME = "RESUME"
    FAIL = "FAIL"
    RETRY = "RETRY"
    #: Kafka's deprecated DeserializationHandlerResponse / ProcessingHandlerResponse name for RESUME.
    CONTINUE = "RESUME"


class SerializationExceptionOrigin(enum.Enum):
    """Whether a sink's key or value serializer failed (Kafka's SerializationExceptionOrigin)."""

    KEY = "KEY"
    VALUE = "VALUE"


@dataclass(frozen=True)
class ErrorHandlerContext:
    """Where the failure happened (Kafka's ErrorHandlerContext): the source record being processed (its topic,
    partition, offset, headers, timestamp and raw bytes), the processor node and the task."""

    topic: str
    partition: int
    offset: int
    headers: tuple[tuple[str, bytes | None], ...]
    processor_node_id: str
    task_id: Any
    timestamp: int
    source_raw_key: bytes | None
    source_raw_value: bytes | None


class ProducerRecord(NamedTuple):
    """The record a sink failed to write, as Kafka hands it to the production handler (serialized, except after a
    serialization error, where key and value are what the serializer was given)."""

    topic: str
    partition: int | None
    timestamp: int
    key: Any
    value: Any
    headers: tuple[tuple[str, bytes | None], ...] = ()


class LogAndFailExceptionHandler:
    """Deserialization: log the error and stop (Kafka's default)."""

    def handle_error(self, context: ErrorHandlerContext, record: Any, exception: Exception) -> Result:
        log.error("Exception caught during Deserialization, taskId: %s, topic: %s, partition: %s, offset: %s",
                  context.task_id, record.topic, record.partition, record.offset, exc_info=exception)
        return Result.FAIL


class LogAndContinueExceptionHandler:
    """Deserialization: log the error and skip the record."""

    def handle_error(self, context: ErrorHandlerContext, record: Any, exception: Exception) -> Result:
        log.warning("Exception caught during Deserialization, taskId: %s, topic: %s, partition: %s, offset: %s",
                    context.task_id, record.topic, record.partition, record.offset, exc_info=exception)
        return Result.RESUME


def _log_processing_error(level: int, context: ErrorHandlerContext, exception: Exception) -> None:
    log.log(level, "Exception caught during message processing, processor node: %s, taskId: %s, source topic: %s, "
            "source partition: %s, source offset: %s", context.processor_node_id, context.task_id, context.topic,
            context.partition, context.offset, exc_info=exception)


class LogAndFailProcessingExceptionHandler:
    """Processing: log the error and stop (Kafka's default)."""

    def handle_error(self, context: ErrorHandlerContext, record: Any, exception: Exception) -> Result:
        _log_processing_error(logging.ERROR, context, exception)
        return Result.FAIL


class LogAndContinueProcessingExceptionHandler:
    """Processing: log the error and drop the record at the processor that raised (the rest of the topology still
    sees the records that processor forwarded before raising)."""

    def handle_error(self, context: ErrorHandlerContext, record: Any, exception: Exception) -> Result:
        _log_processing_error(logging.WARNING, context, exception)
        return Result.RESUME


class DefaultProductionExceptionHandler:
    """Production: RETRY a retriable error, FAIL on any other and on serialization errors (Kafka's default)."""

    def handle_error(self, context: ErrorHandlerContext, record: ProducerRecord, exception: Exception) -> Result:
        return Result.RETRY if getattr(exception, "retriable", False) else Result.FAIL

    def handle_serialization_error(self, context: ErrorHandlerContext, record: ProducerRecord,
                                   exception: Exception, origin: SerializationExceptionOrigin) -> Result:
        return Result.FAIL


class _CallableHandler:
    """A plain function configured as a handler: it is the handler's handle_error."""

    def __init__(self, function: Callable[..., Any]) -> None:
        self.handle_error = function


_BUILT_IN: dict[str, tuple[str, type]] = {
    name: (config, handler) for config, handlers in {
        "deserialization.exception.handler": (LogAndFailExceptionHandler, LogAndContinueExceptionHandler),
        "processing.exception.handler": (LogAndFailProcessingExceptionHandler,
                                         LogAndContinueProcessingExceptionHandler),
        "production.exception.handler": (DefaultProductionExceptionHandler,),
    }.items() for handler in handlers for name in (handler.__name__, _KAFKA_PACKAGE + handler.__name__)
}
#: The handler each config key names when it is unset.
DEFAULT_HANDLERS: dict[str, Any] = {"deserialization.exception.handler": LogAndFailExceptionHandler,
                                    "processing.exception.handler": LogAndFailProcessingExceptionHandler,
                                    "production.exception.handler": DefaultProductionExceptionHandler}


def resolve_handler(config_key: str, value: Any) -> Any:
    """A handler setting as what handler_instance() instantiates: a class, an instance or a callable. Strings name
    Kafka's handlers or a Python ``module:attribute`` (or ``module.attribute``); an unknown name is refused as
    Kafka refuses a class it cannot find."""
    if value is None:
        return DEFAULT_HANDLERS[config_key]
    if isinstance(value, str):
        name = value.strip()
        built_in = _BUILT_IN.get(name)
        if built_in is not None:
            if built_in[0] != config_key:
                raise InvalidConfigurationError(f"Invalid value {name} for configuration {config_key}: it is a "
                                                f"handler for {built_in[0]}")
            return built_in[1]
        module_name, _, attribute = name.rpartition(":") if ":" in name else name.rpartition(".")
        try:
            value = getattr(importlib.import_module(module_name), attribute)
        except (ImportError, AttributeError, ValueError):
            raise InvalidConfigurationError(f"Invalid value {name} for configuration {config_key}: Class {name} "
                                            "could not be found.") from None
    if isinstance(value, type) or hasattr(value, "handle_error") or callable(value):
        return value
    raise InvalidConfigurationError(f"Invalid value {value!r} for configuration {config_key}: a handler is a class "
                                    "name, a class or object with handle_error(), or a callable")


def handler_instance(handler: Any, configs: Mapping[str, Any]) -> Any:
    """One task's handler: a class is instantiated (and configured), an object or callable used as it is."""
    if isinstance(handler, type):
        handler = handler()
        configure = getattr(handler, "configure", None)
        if configure is not None:
            configure(dict(configs))
    elif not hasattr(handler, "handle_error"):
        handler = _CallableHandler(handler)
    return handler


def handler_result(answer: Any, handler_kind: str) -> Result:
    """A handler's answer as a Result: a Result, or its name; anything else is the handler's error (Kafka: "Invalid
    ... response.")."""
    if isinstance(answer, Result):
        return answer
    if isinstance(answer, str) and answer.upper() in Result.__members__:
        return Result[answer.upper()]
    raise TypeError(f"Invalid {handler_kind} response.")


@dataclass(frozen=True)
class ExceptionHandlers:
    """The three handlers of one task."""

    deserialization: Any
    processing: Any
    production: Any

    @classmethod
    def defaults(cls) -> ExceptionHandlers:
        return cls(LogAndFailExceptionHandler(), LogAndFailProcessingExceptionHandler(),
                   DefaultProductionExceptionHandler())
