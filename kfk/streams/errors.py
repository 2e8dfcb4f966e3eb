"""Kafka Streams' exception handlers (org.apache.kafka.streams.errors): what a task does with a record whose bytes its
source serde cannot read (deserialization.exception.handler), whose processing raised in user code
(processing.exception.handler, KIP-1033) or whose write failed (production.exception.handler).

A handler answers each failure with a Response (or only its Result): RESUME drops the record (counted as a dropped
record, Kafka's dropped-records metric) and processing goes on; FAIL stops the stream thread with a
StreamsException, before the failed record's offset is committed, so a restarted application meets it again; RETRY
is for production errors. Kafka's deprecated responses said CONTINUE, which is accepted here as RESUME.

Dead letter queue (KIP-1034, Kafka Streams 4.1): a Response may carry records for the task to write before it
resumes or fails (Response.resume(records), Response.fail(records)), with any topic, key and value. When
``errors.dead.letter.queue.topic.name`` is set, Kafka's own handlers (LogAndContinue..., LogAndFail...,
DefaultProductionExceptionHandler, except on RETRY) answer with one: the failed source record's raw key and value,
its headers, and the ``__streams.errors.*`` headers saying what failed (build_dead_letter_queue_record). The
records are written by the task's producer (in its transaction under exactly_once_v2), and a failure to write one
goes to the production handler as a sink's would.

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
import traceback
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from kfk.errors import InvalidConfigurationError, KafkaError

__all__ = [
    "DEAD_LETTER_QUEUE_TOPIC_NAME_CONFIG", "DefaultProductionExceptionHandler", "ErrorHandlerContext",
    "ExceptionHandlers", "FailedProcessingException", "LogAndContinueExceptionHandler",
    "LogAndContinueProcessingExceptionHandler", "LogAndFailExceptionHandler", "LogAndFailProcessingExceptionHandler",
    "ProducerRecord", "Response", "Result", "SerializationExceptionOrigin", "StreamsException",
    "build_dead_letter_queue_record",
]

log = logging.getLogger("kfk.streams")

#: Kafka's package of these classes: its config values name them with it.
_KAFKA_PACKAGE = "org.apache.kafka.streams.errors."

#: The topic Kafka's handlers write failed records to (unset: none; StreamsConfig.ERRORS_DEAD_LETTER_QUEUE_TOPIC_NAME).
DEAD_LETTER_QUEUE_TOPIC_NAME_CONFIG = "errors.dead.letter.queue.topic.name"
#: The headers a dead letter record gets (Kafka's ExceptionHandlerUtils), after the source record's own, in this
#: order; every value is UTF-8 text.
HEADER_ERRORS_EXCEPTION_NAME = "__streams.errors.exception"
HEADER_ERRORS_EXCEPTION_MESSAGE_NAME = "__streams.errors.message"
HEADER_ERRORS_STACKTRACE_NAME = "__streams.errors.stacktrace"
HEADER_ERRORS_TOPIC_NAME = "__streams.errors.topic"
HEADER_ERRORS_PARTITION_NAME = "__streams.errors.partition"
HEADER_ERRORS_OFFSET_NAME = "__streams.errors.offset"


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
    partition, offset, headers, timestamp and raw bytes, which a failed send's context lacks, as Kafka's), the
    processor node and the task."""

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


@dataclass(frozen=True)
class Response:
    """A handler's answer (Kafka's DeserializationExceptionHandler.Response and its processing and production
    siblings): the Result, and the dead letter records the task writes before acting on it (serialized: key and
    value are bytes; partition None lets the producer's partitioner choose)."""

    result: Result
    dead_letter_queue_records: tuple[ProducerRecord, ...] = ()

    @classmethod
    def resume(cls, dead_letter_queue_records: Iterable[ProducerRecord] = ()) -> Response:
        return cls(Result.RESUME, tuple(dead_letter_queue_records))

    @classmethod
    def fail(cls, dead_letter_queue_records: Iterable[ProducerRecord] = ()) -> Response:
        return cls(Result.FAIL, tuple(dead_letter_queue_records))

    @classmethod
    def retry(cls) -> Response:
        return cls(Result.RETRY)


def _text(value: str | None) -> bytes | None:
    return None if value is None else value.encode()


def build_dead_letter_queue_record(topic: str, key: bytes | None, value: bytes | None, context: ErrorHandlerContext,
                                   exception: BaseException) -> ProducerRecord:
    """The dead letter record Kafka's handlers write for `exception` (ExceptionHandlerUtils'): `key` and `value`
    (theirs: the source record's raw bytes) at the source record's timestamp, with its headers and then what failed
    and where. The exception is named by its class's qualified name (Java's Class.getName(), Python's module and
    qualified name) and its message is null when it has none, as Java's getMessage()."""
    if topic is None:
        raise InvalidConfigurationError(f"{DEAD_LETTER_QUEUE_TOPIC_NAME_CONFIG} cannot be null while building dead "
                                        "letter queue record")
    kind = type(exception)
    headers = (*context.headers,
               (HEADER_ERRORS_EXCEPTION_NAME, _text(f"{kind.__module__}.{kind.__qualname__}")),
               (HEADER_ERRORS_EXCEPTION_MESSAGE_NAME, _text(str(exception) if exception.args else None)),
               (HEADER_ERRORS_STACKTRACE_NAME, _text("".join(traceback.format_exception(exception)))),
               (HEADER_ERRORS_TOPIC_NAME, _text(context.topic or None)),
               (HEADER_ERRORS_PARTITION_NAME, _text(str(context.partition))),
               (HEADER_ERRORS_OFFSET_NAME, _text(str(context.offset))))
    return ProducerRecord(topic, None, context.timestamp, key, value, headers)


class _DeadLetterQueueHandler:
    """What Kafka's built-in handlers share: the dead letter topic, read from the application's config."""

    dead_letter_queue_topic: str | None = None

    def configure(self, configs: Mapping[str, Any]) -> None:
        topic = configs.get(DEAD_LETTER_QUEUE_TOPIC_NAME_CONFIG)
        self.dead_letter_queue_topic = None if topic is None else str(topic)

    def _dead_letter_queue_records(self, context: ErrorHandlerContext,
                                   exception: BaseException) -> tuple[ProducerRecord, ...]:
        if self.dead_letter_queue_topic is None:
            return ()
        return (build_dead_letter_queue_record(self.dead_letter_queue_topic, context.source_raw_key,
                                               context.source_raw_value, context, exception),)


class LogAndFailExceptionHandler(_DeadLetterQueueHandler):
    """Deserialization: log the error and stop (Kafka's default)."""

    def handle_error(self, context: ErrorHandlerContext, record: Any, exception: Exception) -> Response:
        log.error("Exception caught during Deserialization, taskId: %s, topic: %s, partition: %s, offset: %s",
                  context.task_id, record.topic, record.partition, record.offset, exc_info=exception)
        return Response.fail(self._dead_letter_queue_records(context, exception))


class LogAndContinueExceptionHandler(_DeadLetterQueueHandler):
    """Deserialization: log the error and skip the record."""

    def handle_error(self, context: ErrorHandlerContext, record: Any, exception: Exception) -> Response:
        log.warning("Exception caught during Deserialization, taskId: %s, topic: %s, partition: %s, offset: %s",
                    context.task_id, record.topic, record.partition, record.offset, exc_info=exception)
        return Response.resume(self._dead_letter_queue_records(context, exception))


def _log_processing_error(level: int, context: ErrorHandlerContext, exception: Exception) -> None:
    log.log(level, "Exception caught during message processing, processor node: %s, taskId: %s, source topic: %s, "
            "source partition: %s, source offset: %s", context.processor_node_id, context.task_id, context.topic,
            context.partition, context.offset, exc_info=exception)


class LogAndFailProcessingExceptionHandler(_DeadLetterQueueHandler):
    """Processing: log the error and stop (Kafka's default)."""

    def handle_error(self, context: ErrorHandlerContext, record: Any, exception: Exception) -> Response:
        _log_processing_error(logging.ERROR, context, exception)
        return Response.fail(self._dead_letter_queue_records(context, exception))


class LogAndContinueProcessingExceptionHandler(_DeadLetterQueueHandler):
    """Processing: log the error and drop the record at the processor that raised (the rest of the topology still
    sees the records that processor forwarded before raising)."""

    def handle_error(self, context: ErrorHandlerContext, record: Any, exception: Exception) -> Response:
        _log_processing_error(logging.WARNING, context, exception)
        return Response.resume(self._dead_letter_queue_records(context, exception))


class DefaultProductionExceptionHandler(_DeadLetterQueueHandler):
    """Production: RETRY a retriable error, FAIL on any other and on serialization errors (Kafka's default)."""

    def handle_error(self, context: ErrorHandlerContext, record: ProducerRecord, exception: Exception) -> Response:
        if getattr(exception, "retriable", False):
            return Response.retry()
        return Response.fail(self._dead_letter_queue_records(context, exception))

    def handle_serialization_error(self, context: ErrorHandlerContext, record: ProducerRecord,
                                   exception: Exception, origin: SerializationExceptionOrigin) -> Response:
        return Response.fail(self._dead_letter_queue_records(context, exception))


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


#: The Response of each bare Result a handler answers with.
_RESPONSES = {result: Response(result) for result in Result}


def handler_response(answer: Any, handler_kind: str) -> Response:
    """A handler's answer as a Response: a Response, a Result, or a Result's name; anything else is the handler's
    error (Kafka: "Invalid ... response.")."""
    if isinstance(answer, Response):
        return answer
    if isinstance(answer, Result):
        return _RESPONSES[answer]
    if isinstance(answer, str) and answer.upper() in Result.__members__:
        return _RESPONSES[Result[answer.upper()]]
    raise TypeError(f"Invalid {handler_kind} response.")


@dataclass(frozen=True)
class ExceptionHandlers:
    """The three handlers of one task."""

    deserialization: Any
    processing: Any
    production: Any

    @classmethod
    def defaults(cls) -> ExceptionHandlers:
        """Kafka's default handlers, with no dead letter queue."""
        return cls(LogAndFailExceptionHandler(), LogAndFailProcessingExceptionHandler(),
                   DefaultProductionExceptionHandler())
