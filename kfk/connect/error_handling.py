"""Error handling of a connector's records (Kafka's RetryWithToleranceOperator, LogReporter, DeadLetterQueueReporter).

Each step of a record's way (converter, transform, put) runs through `ErrorHandler.execute`: RetriableExceptions
are retried until `errors.retry.timeout`; any other failure fails the task under `errors.tolerance=none`, or
under `all` is logged (`errors.log.enable`), sent to the dead letter queue (sink connectors,
`errors.deadletterqueue.topic.name`, the original bytes plus, with context headers enabled, Kafka's
`__connect.errors.*` headers) and the record skipped.
"""

from __future__ import annotations

import logging
import time
import traceback
from typing import Any, Callable, Mapping

from kfk.client import Producer
from kfk.client.structs import ConsumerRecord
from kfk.connect.errors import ConnectException, RetriableException

log = logging.getLogger("kfk.connect.errors")

HEADER_PREFIX = "__connect.errors."
ERROR_HEADER_ORIG_TOPIC = HEADER_PREFIX + "topic"
ERROR_HEADER_ORIG_PARTITION = HEADER_PREFIX + "partition"
ERROR_HEADER_ORIG_OFFSET = HEADER_PREFIX + "offset"
ERROR_HEADER_CONNECTOR_NAME = HEADER_PREFIX + "connector.name"
ERROR_HEADER_TASK_ID = HEADER_PREFIX + "task.id"
ERROR_HEADER_STAGE = HEADER_PREFIX + "stage"
ERROR_HEADER_EXECUTING_CLASS = HEADER_PREFIX + "class.name"
ERROR_HEADER_EXCEPTION = HEADER_PREFIX + "exception.class.name"
ERROR_HEADER_EXCEPTION_MESSAGE = HEADER_PREFIX + "exception.message"
ERROR_HEADER_EXCEPTION_STACK_TRACE = HEADER_PREFIX + "exception.stacktrace"

# Kafka's Stage names
KEY_CONVERTER, VALUE_CONVERTER, HEADER_CONVERTER = "KEY_CONVERTER", "VALUE_CONVERTER", "HEADER_CONVERTER"
TRANSFORMATION, TASK_PUT, TASK_POLL, KAFKA_PRODUCE, KAFKA_CONSUME = (
    "TRANSFORMATION", "TASK_PUT", "TASK_POLL", "KAFKA_PRODUCE", "KAFKA_CONSUME")
#: The stages whose failures errors.tolerance may skip (Kafka's TOLERABLE_EXCEPTIONS apply to these).
TOLERABLE_STAGES = {KEY_CONVERTER, VALUE_CONVERTER, HEADER_CONVERTER, TRANSFORMATION, KAFKA_PRODUCE}

Skipped = object()  # what `execute` returns for a record it tolerated a failure of


def _class_name(value: Any) -> str:
    cls = value if isinstance(value, type) else type(value)
    return f"{cls.__module__}.{cls.__qualname__}"


class DeadLetterQueueReporter:
    """Writes a failed sink record's original key, value and headers (plus the context headers) to the dead letter
    queue topic, and waits for the write, as Kafka's DeadLetterQueueReporter does before the record is skipped."""

    def __init__(self, producer: Producer, topic: str) -> None:
        self.producer, self.topic = producer, topic

    def __call__(self, record: ConsumerRecord, headers: list[tuple[str, bytes | None]]) -> None:
        self.producer.send(self.topic, record.value, record.key, headers=headers or None)
        self.producer.flush()

    def close(self) -> None:
        self.producer.close(5)


class ErrorHandler:
    def __init__(self, config: Mapping[str, Any], connector: str, task_id: int,
                 dead_letter_queue: DeadLetterQueueReporter | None = None) -> None:
        self.tolerance_all = config.get("errors.tolerance", "none") == "all"
        self.retry_timeout_ms = int(config.get("errors.retry.timeout", 0))
        self.retry_delay_max_ms = int(config.get("errors.retry.delay.max.ms", 60000))
        self.log_enable = str(config.get("errors.log.enable", "false")).lower() == "true"
        self.log_include_messages = str(config.get("errors.log.include.messages", "false")).lower() == "true"
        self.context_headers = str(config.get("errors.deadletterqueue.context.headers.enable",
                                              "false")).lower() == "true"
        self.connector, self.task_id = connector, task_id
        self.dead_letter_queue = dead_letter_queue
        self.total_errors = 0

    def close(self) -> None:
        if self.dead_letter_queue is not None:
            self.dead_letter_queue.close()

    def execute(self, operation: Callable[[], Any], stage: str, executing: Any,
                consumed: ConsumerRecord | None = None, source: Any = None) -> Any:
        """Run `operation`; return its result, or `Skipped` if it failed and the failure is tolerated."""
        try:
            return operation()  # the common case, without the retry bookkeeping
        except RetriableException:
            pass
        except Exception as error:
            return self._failed(error, stage, executing, consumed, source)
        deadline = time.monotonic() + self.retry_timeout_ms / 1000 if self.retry_timeout_ms >= 0 else float("inf")
        delay = 0.3
        while True:
            try:
                return operation()
            except RetriableException as error:
                if time.monotonic() + delay >= deadline:
                    return self._failed(error, stage, executing, consumed, source)
                time.sleep(delay)
                delay = min(delay * 2, self.retry_delay_max_ms / 1000)
            except Exception as error:
                return self._failed(error, stage, executing, consumed, source)

    def _failed(self, error: Exception, stage: str, executing: Any, consumed: ConsumerRecord | None,
                source: Any) -> Any:
        self.total_errors += 1
        if not self.tolerance_all or stage not in TOLERABLE_STAGES:
            raise ConnectException("Tolerance exceeded in error handler") from error
        if self.log_enable:
            where = ""
            if consumed is not None:
                where = f", where consumed record is {{topic='{consumed.topic}', partition={consumed.partition}, " \
                        f"offset={consumed.offset}, timestamp={consumed.timestamp}}}"
            if source is not None and self.log_include_messages:
                where = f", where source record is = {source}"
            log.error("Error encountered in task %s-%d. Executing stage '%s' with class '%s'%s.", self.connector,
                      self.task_id, stage, _class_name(executing), where, exc_info=error)
        if consumed is not None and self.dead_letter_queue is not None:
            headers = list(consumed.headers)
            if self.context_headers:
                headers += self.context_headers_for(error, stage, executing, consumed)
            self.dead_letter_queue(consumed, headers)
        return Skipped

    def context_headers_for(self, error: Exception, stage: str, executing: Any, consumed: ConsumerRecord
                            ) -> list[tuple[str, bytes | None]]:
        """Kafka's DeadLetterQueueReporter.populateContextHeaders."""
        headers: list[tuple[str, bytes | None]] = [
            (ERROR_HEADER_ORIG_TOPIC, consumed.topic.encode()),
            (ERROR_HEADER_ORIG_PARTITION, str(consumed.partition).encode()),
            (ERROR_HEADER_ORIG_OFFSET, str(consumed.offset).encode()),
            (ERROR_HEADER_CONNECTOR_NAME, self.connector.encode()),
            (ERROR_HEADER_TASK_ID, str(self.task_id).encode()),
            (ERROR_HEADER_STAGE, stage.encode()),
            (ERROR_HEADER_EXECUTING_CLASS, _class_name(executing).encode()),
        ]
        cause = error.__cause__ if isinstance(error, ConnectException) and error.__cause__ else error
        headers.append((ERROR_HEADER_EXCEPTION, _class_name(cause).encode()))
        if str(cause):
            headers.append((ERROR_HEADER_EXCEPTION_MESSAGE, str(cause).encode()))
        headers.append((ERROR_HEADER_EXCEPTION_STACK_TRACE,
                        "".join(traceback.format_exception(cause)).encode()))
        return headers
