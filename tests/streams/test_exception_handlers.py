"""Kafka Streams' exception handlers (kfk.streams.errors) on the TopologyTestDriver: which handler each failure
reaches, what RESUME and FAIL do, how the handlers are configured (Kafka's names, the deprecated keys, Python
classes and callables), and the dead letter queue (KIP-1034), also on a broker beside Apache Kafka Streams. The
handlers' RESUME and FAIL on a broker, beside Apache Kafka Streams, are in test_apache_kafka_streams_oracle.py."""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor

import pytest

from kfk.client import Admin, NewTopic
from kfk.errors import InvalidConfigurationError, RecordTooLargeError
from kfk.streams import KafkaStreams, Serdes, State, StreamsBuilder
from kfk.streams.errors import (DefaultProductionExceptionHandler, ErrorHandlerContext, FailedProcessingException,
                                LogAndContinueExceptionHandler, LogAndContinueProcessingExceptionHandler,
                                ProducerRecord, Response, Result, SerializationExceptionOrigin, StreamsException)
from kfk.streams.test_driver import TopologyTestDriver
from kfk.testing.apache_kafka import run_java
from tests.streams.conftest import read_to_end, unique_name
from tests.streams.test_apache_kafka_streams_oracle import ERRORS_INPUT, _errors_failure, _produce, _run_python
from tests.streams.topologies import errors

CONFIG = {"default.key.serde": "string", "default.value.serde": "string"}
CONTINUE = {"deserialization.exception.handler": "org.apache.kafka.streams.errors.LogAndContinueExceptionHandler",
            "processing.exception.handler": "LogAndContinueProcessingExceptionHandler"}


def _pipe_numbers(driver: TopologyTestDriver, values: list[bytes]) -> None:
    for index, value in enumerate(values):
        driver.pipe_input("in", f"k{index}", value, index, value_serde=Serdes.bytes())


def _int(number: int) -> bytes:
    return number.to_bytes(4, "big")


def test_continue_handlers_skip_what_fails_and_count_it() -> None:
    """A value of the wrong size (deserialization), a value the processing step raises on, and one the sink cannot
    serialize (the Integer serde given a string) are each dropped at their step; the rest goes through."""
    builder = StreamsBuilder()
    numbers = builder.stream("in", value_serde=Serdes.integer())
    numbers.map_values(lambda n: 10 // (n - 2)).to("out", value_serde=Serdes.integer())
    numbers.map_values(lambda n: "text" if n == 4 else n).to("raw", value_serde=Serdes.integer())
    serialization_errors: list[tuple[str, SerializationExceptionOrigin, str]] = []

    class SkipSerializationErrors:
        def handle_error(self, context: ErrorHandlerContext, record: ProducerRecord, exception: Exception) -> Result:
            return Result.FAIL

        def handle_serialization_error(self, context: ErrorHandlerContext, record: ProducerRecord,
                                       exception: Exception, origin: SerializationExceptionOrigin) -> Result:
            serialization_errors.append((record.topic, origin, context.processor_node_id))
            return Result.CONTINUE

    config = {**CONFIG, **CONTINUE, "production.exception.handler": SkipSerializationErrors}
    with TopologyTestDriver(builder.build(), config) as driver:
        _pipe_numbers(driver, [_int(1), b"bad", _int(2), _int(4), _int(12)])
        assert [(key, value) for key, value, _ in driver.read_output("out", value_serde=Serdes.integer())] == [
            ("k0", -10), ("k3", 5), ("k4", 1)]
        assert [(key, value) for key, value, _ in driver.read_output("raw", value_serde=Serdes.integer())] == [
            ("k0", 1), ("k2", 2), ("k4", 12)]
        assert serialization_errors == [("raw", SerializationExceptionOrigin.VALUE, "KSTREAM-SINK-0000000004")]
        assert sum(task.dropped_records for task in driver._tasks) == 3


@pytest.mark.parametrize("failing", ["deserialization", "processing", "production"])
def test_default_handlers_fail(failing: str) -> None:
    """Kafka's defaults (LogAndFail, LogAndFailProcessing, DefaultProductionExceptionHandler) stop at the first
    failure with a StreamsException saying which handler failed; the records before it went through."""
    config = {**CONFIG, **CONTINUE}
    config.pop(f"{failing}.exception.handler", None)
    if failing == "production":  # as in Kafka, a sink's failure then reaches the processing handler above it
        config.pop("processing.exception.handler")
    value = {"deserialization": b"bad", "processing": _int(3), "production": _int(4)}[failing]
    builder = StreamsBuilder()
    # production: the sink's Integer serde is given a string (a serialization error, which fails by default)
    (builder.stream("in", value_serde=Serdes.integer())
     .map_values(lambda n: 6 // (n - 3))
     .map_values(lambda n: "text" if n == 6 else n)
     .to("out", value_serde=Serdes.integer()))
    with TopologyTestDriver(builder.build(), config) as driver:
        _pipe_numbers(driver, [_int(1)])
        with pytest.raises(StreamsException) as raised:
            _pipe_numbers(driver, [value])
        assert [value for _, value, _ in driver.read_output("out", value_serde=Serdes.integer())] == [-3]
    message = str(raised.value)
    if failing == "deserialization":
        assert message.startswith("Deserialization exception handler is set to fail upon a deserialization error.")
        assert "deserialization.exception.handler" in message and isinstance(raised.value.__cause__, ValueError)
    elif failing == "processing":
        assert isinstance(raised.value, FailedProcessingException)
        assert message == ("Exception caught in process. taskId=0_0, processor=KSTREAM-MAPVALUES-0000000001, "
                           "topic=in, partition=0, offset=1")
        assert isinstance(raised.value.__cause__, ZeroDivisionError)
    else:
        # LogAndFailProcessing, at the node above the sink, stops the task with the production handler's failure
        assert isinstance(raised.value, FailedProcessingException)
        assert raised.value.node == "KSTREAM-MAPVALUES-0000000002"
        cause = raised.value.__cause__
        assert str(cause) == "Unable to serialize record. ProducerRecord(topic=[out], partition=[None], timestamp=[0]"


def test_processing_handler_drops_only_the_failed_record_of_a_flat_map() -> None:
    """The handler runs at the innermost node that raised: a flat_map_values whose child raises on one of the
    values it forwards still forwards the others."""
    seen: list[tuple[ErrorHandlerContext, object]] = []

    def skip(context: ErrorHandlerContext, record, exception: Exception) -> str:
        seen.append((context, record.value))
        return "CONTINUE"

    builder = StreamsBuilder()
    (builder.stream("in").flat_map_values(str.split).map_values(lambda word: word if word != "bad" else 1 / 0)
     .to("out"))
    with TopologyTestDriver(builder.build(), {**CONFIG, "processing.exception.handler": skip}) as driver:
        driver.pipe_input("in", "k", "a bad c", 7)
        assert [value for _, value, _ in driver.read_output("out")] == ["a", "c"]
    ((context, value),) = seen
    assert value == "bad"
    assert (context.topic, context.partition, context.offset, context.timestamp, context.processor_node_id,
            str(context.task_id), context.source_raw_value) == ("in", 0, 0, 7, "KSTREAM-MAPVALUES-0000000002",
                                                                 "0_0", b"a bad c")


def test_the_errors_topology_skips_its_three_failures() -> None:
    """The oracle's "errors" topology on the driver: a bad value, a processing failure (n % 5 == 3) and, the driver
    having no size limit, every other record."""
    with TopologyTestDriver(errors("in", "out"), {**CONFIG, **CONTINUE}) as driver:
        _pipe_numbers(driver, [_int(1), b"\x00", _int(3), _int(4)])
        assert [(key, value) for key, value, _ in driver.read_output("out")] == [("k0", "10"), ("k3", "40")]


def test_handler_configuration(caplog: pytest.LogCaptureFixture) -> None:
    builder = StreamsBuilder()
    builder.stream("in", value_serde=Serdes.integer()).to("out", value_serde=Serdes.integer())
    topology = builder.build()

    class Configured(LogAndContinueExceptionHandler):
        configs: dict = {}

        def configure(self, configs: dict) -> None:
            Configured.configs = configs

    # the deprecated key (Kafka 4.0 renamed it) still works; with both set the new one wins, with a warning
    for config in ({"default.deserialization.exception.handler": "LogAndContinueExceptionHandler"},
                   {"default.deserialization.exception.handler": "LogAndFailExceptionHandler",
                    "deserialization.exception.handler": Configured}):
        with caplog.at_level(logging.WARNING, "kfk.streams"):
            with TopologyTestDriver(topology, {**CONFIG, **config}) as driver:
                _pipe_numbers(driver, [b"bad", _int(5)])
                assert [value for _, value, _ in driver.read_output("out", value_serde=Serdes.integer())] == [5]
    assert Configured.configs["deserialization.exception.handler"] is Configured
    assert ("Both the deprecated and new config for deserialization exception handler are configured. The "
            "deprecated one will be ignored.") in caplog.text
    assert "Skipping record due to deserialization error. topic=[in] partition=[0] offset=[0]" in caplog.text
    # a module:attribute path to a Python class
    path = "kfk.streams.errors:LogAndContinueProcessingExceptionHandler"
    TopologyTestDriver(topology, {**CONFIG, "processing.exception.handler": path}).close()
    assert isinstance(TopologyTestDriver(topology, {**CONFIG, "processing.exception.handler": path})
                      ._tasks[0].handlers.processing, LogAndContinueProcessingExceptionHandler)
    with pytest.raises(InvalidConfigurationError, match="Class com.example.Missing could not be found"):
        TopologyTestDriver(topology, {**CONFIG, "production.exception.handler": "com.example.Missing"})
    with pytest.raises(InvalidConfigurationError, match="it is a handler for deserialization.exception.handler"):
        TopologyTestDriver(topology, {**CONFIG, "processing.exception.handler": "LogAndFailExceptionHandler"})


def test_a_failing_handler_stops_the_task() -> None:
    def broken(context: ErrorHandlerContext, record, exception: Exception) -> Result:
        raise RuntimeError("handler bug")

    builder = StreamsBuilder()
    builder.stream("in", value_serde=Serdes.integer()).to("out", value_serde=Serdes.integer())
    with TopologyTestDriver(builder.build(), {**CONFIG, "deserialization.exception.handler": broken}) as driver:
        with pytest.raises(StreamsException, match="Fatal user code error in deserialization error callback"):
            _pipe_numbers(driver, [b"bad"])


#: The headers Kafka's handlers add to a dead letter record, in their order (after the source record's own).
DEAD_LETTER_HEADERS = ["__streams.errors.exception", "__streams.errors.message", "__streams.errors.stacktrace",
                       "__streams.errors.topic", "__streams.errors.partition", "__streams.errors.offset"]


def _dead_letter_topology() -> StreamsBuilder:
    """Integers read from "in"; 10 // (n - 2) (fails on 2); 4 written as text, which the sink's Integer serde
    refuses."""
    builder = StreamsBuilder()
    (builder.stream("in", value_serde=Serdes.integer())
     .map_values(lambda n: 10 // (n - 2))
     .map_values(lambda n: "text" if n == -5 else n)
     .to("out", value_serde=Serdes.integer()))
    return builder


def test_kafkas_handlers_write_what_fails_to_the_dead_letter_queue() -> None:
    """With errors.dead.letter.queue.topic.name set, each failure Kafka's handlers see (a value of the wrong size,
    a processing error, a value the sink cannot serialize, answered RESUME by a subclass of the default production
    handler) writes the source record's raw key and value, timestamp and headers to the dead letter topic, with
    the __streams.errors.* headers saying what failed where; the good records go on as before."""

    class ResumeOnSerializationErrors(DefaultProductionExceptionHandler):
        def handle_serialization_error(self, context: ErrorHandlerContext, record: ProducerRecord,
                                       exception: Exception, origin: SerializationExceptionOrigin) -> Response:
            response = super().handle_serialization_error(context, record, exception, origin)
            return Response.resume(response.dead_letter_queue_records)

    inputs = [(b"k0", _int(1), 10), (b"k1", b"bad", 11), (b"k2", _int(2), 12), (b"k3", _int(3), 13),
              (b"k4", _int(0), 14)]
    config = {**CONFIG, **CONTINUE, "production.exception.handler": ResumeOnSerializationErrors,
              "errors.dead.letter.queue.topic.name": "dlq"}
    with TopologyTestDriver(_dead_letter_topology().build(), config) as driver:
        for key, value, timestamp in inputs:
            driver.pipe_input("in", key, value, timestamp, key_serde=Serdes.bytes(), value_serde=Serdes.bytes(),
                              headers=[("trace", key + b"-trace")])
        assert [value for _, value, _ in driver.read_output("out", value_serde=Serdes.integer())] == [-10, 10]
        dead_letters = driver.written["dlq"]
    # expected: which record fails, with what (computed from the inputs, not by the topology)
    failures = {1: ("builtins.ValueError", "Size of data received by IntegerDeserializer is not 4"),
                2: ("builtins.ZeroDivisionError", "integer division or modulo by zero"),
                4: ("struct.error", None)}  # the Integer serde given "text"
    assert len(dead_letters) == len(failures)
    for (offset, (exception, message)), (key, value, timestamp, headers) in zip(failures.items(), dead_letters):
        source_key, source_value, source_timestamp = inputs[offset]
        assert (key, value, timestamp) == (source_key, source_value, source_timestamp)
        assert [name for name, _ in headers] == ["trace", *DEAD_LETTER_HEADERS]
        values = dict(headers)
        assert values["trace"] == source_key + b"-trace"
        assert values["__streams.errors.exception"] == exception.encode()
        if message is not None:
            assert values["__streams.errors.message"] == message.encode()
        stacktrace = values["__streams.errors.stacktrace"].decode()
        assert stacktrace.startswith("Traceback") and exception.removeprefix("builtins.") in stacktrace, stacktrace
        assert [values[f"__streams.errors.{name}"] for name in ("topic", "partition", "offset")] == [
            b"in", b"0", str(offset).encode()]


def test_no_dead_letter_queue_without_its_topic_and_a_handlers_own_records() -> None:
    """Without the config Kafka's handlers write nothing more; a handler's Response may carry records of its own
    (any topic, key and value), which the task writes before it resumes or fails."""
    config = {**CONFIG, **CONTINUE}
    with TopologyTestDriver(_dead_letter_topology().build(), config) as driver:
        _pipe_numbers(driver, [b"bad", _int(2), _int(3)])
        assert set(driver.written) == {"out"}

    def audit(context: ErrorHandlerContext, record, exception: Exception) -> Response:
        return Response.fail([ProducerRecord("audit", 0, 99, b"key", context.source_raw_value, (("h", None),))])

    config["processing.exception.handler"] = audit
    with TopologyTestDriver(_dead_letter_topology().build(), config) as driver:
        with pytest.raises(FailedProcessingException):
            _pipe_numbers(driver, [_int(2)])
        assert driver.written["audit"] == [(b"key", _int(2), 99, [("h", None)])]


def test_log_and_fail_writes_the_dead_letter_record_before_failing() -> None:
    """Kafka's LogAndFail handlers answer FAIL with the dead letter record: it is written, then the task stops."""
    config = {**CONFIG, "errors.dead.letter.queue.topic.name": "dlq"}
    with TopologyTestDriver(_dead_letter_topology().build(), config) as driver:
        with pytest.raises(StreamsException, match="Deserialization exception handler is set to fail"):
            _pipe_numbers(driver, [b"bad"])
        ((key, value, _, headers),) = driver.written["dlq"]
        assert (key, value, [name for name, _ in headers]) == (b"k0", b"bad", DEAD_LETTER_HEADERS)


class DeadLetterOnRecordTooLarge(DefaultProductionExceptionHandler):
    """As the Java oracle's handler of "errors-dlq": a record too large to send goes to the dead letter queue as
    Kafka's default handler would write it, and is skipped; anything else fails."""

    def handle_error(self, context: ErrorHandlerContext, record: ProducerRecord, exception: Exception) -> Response:
        response = super().handle_error(context, record, exception)
        if isinstance(exception, RecordTooLargeError):
            return Response.resume(response.dead_letter_queue_records)
        return response


def _dead_letters(bootstrap: str, topic: str) -> dict[tuple[bytes, bytes, bytes], tuple]:
    """The dead letter records of `topic` by the source record they name (topic, partition and offset headers):
    partition, key, value, timestamp, header names and the header values but the stack trace's."""
    records = {}
    for record in read_to_end(bootstrap, topic):
        headers = dict(record.headers)
        source = tuple(headers[f"__streams.errors.{name}"] for name in ("topic", "partition", "offset"))
        records[source] = (record.partition, record.key, record.value, record.timestamp,
                           [name for name, _ in record.headers],
                           {name: value for name, value in headers.items() if name != "__streams.errors.stacktrace"})
    return records


def test_dead_letter_queue_as_kafka_streams(streams_oracle, streams_broker, tmp_path) -> None:
    """The oracle's "errors" topology with errors.dead.letter.queue.topic.name, Kafka's continue handlers and a
    production handler sending what is too large to the dead letter queue, under kfk.streams and Apache Kafka
    Streams 4.4: the same dead letter records (partition, key, value, timestamp, headers and their values but the
    stack trace and the exception's class, which is Java's or Python's), one for each failing input record; a
    failed send's has no key, so its partition is the producer's choice."""
    classpath, classes = streams_oracle
    bootstrap = streams_broker.bootstrap_servers
    input_topic = unique_name("numbers")
    # every key's last record is a good one, so that both applications have met every failure when they stop
    records = ERRORS_INPUT + [(f"key{index}", (1).to_bytes(4, "big")) for index in range(4)]
    apps = {run: (unique_name(f"dlq-{run}"), unique_name(f"out-{run}")) for run in ("java", "python")}
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        topics = [input_topic, *(name for _, output in apps.values() for name in (output, output + "-dlq"))]
        assert all(error is None for error in admin.create_topics([NewTopic(name, 2, 1) for name in topics]).values())
    _produce(bootstrap, input_topic, records, 1000)
    count = sum(1 for _, value in records if _errors_failure(value) is None)
    with ThreadPoolExecutor(1) as executor:
        java_run = executor.submit(run_java, "StreamsOracle", [
            "run", "errors-dlq", bootstrap, apps["java"][0], input_topic, apps["java"][1], str(tmp_path / "java"),
            "at_least_once", str(count)], classpath, extra_classpath=[classes], timeout=240)
        python_app, python_output = apps["python"]
        _run_python("errors", bootstrap, python_app, input_topic, python_output, str(tmp_path / "python"), count,
                    config={"deserialization.exception.handler": "LogAndContinueExceptionHandler",
                            "processing.exception.handler": LogAndContinueProcessingExceptionHandler,
                            "production.exception.handler": DeadLetterOnRecordTooLarge,
                            "errors.dead.letter.queue.topic.name": python_output + "-dlq",
                            "producer.max.request.size": 10_000})
        result = java_run.result()
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    python_letters = _dead_letters(bootstrap, python_output + "-dlq")
    java_letters = _dead_letters(bootstrap, apps["java"][1] + "-dlq")
    # expected from the input alone: which records fail, and where they were read
    failing = {(input_topic.encode(), str(record.partition).encode(), str(record.offset).encode()):
               (record.key, record.value, record.timestamp, _errors_failure(record.value))
               for record in read_to_end(bootstrap, input_topic) if _errors_failure(record.value) is not None}
    assert {failure for *_, failure in failing.values()} == {"deserialization", "processing", "production"}
    assert python_letters.keys() == failing.keys() == java_letters.keys()
    exceptions = {"deserialization": ("builtins.ValueError", "org.apache.kafka.common.errors.SerializationException"),
                  "processing": ("builtins.ValueError", "java.lang.IllegalArgumentException"),
                  "production": ("kfk.errors.RecordTooLargeError",
                                 "org.apache.kafka.common.errors.RecordTooLargeException")}
    for source, (key, value, timestamp, failure) in failing.items():
        python, java = python_letters[source], java_letters[source]
        python_headers, java_headers = python[5], java[5]
        assert python[4] == java[4] == DEAD_LETTER_HEADERS, source
        assert (python_headers.pop("__streams.errors.exception").decode(),
                java_headers.pop("__streams.errors.exception").decode()) == exceptions[failure]
        if failure == "production":  # the producers word it their own way
            assert b"10000" in python_headers.pop("__streams.errors.message")
            assert b"10000" in java_headers.pop("__streams.errors.message")
            # without a key, the producers' sticky partitioners choose the partition
            python, java = python[1:], java[1:]
        assert python == java, (failure, python, java)
        # Kafka Streams has dropped the raw source record from the context when a send fails
        assert python[-5:-2] == ((None, None) if failure == "production" else (key, value)) + (timestamp,), failure


def test_log_and_fail_on_a_broker_writes_the_dead_letter_record_before_the_thread_dies(streams_broker,
                                                                                       tmp_path) -> None:
    """Kafka's default deserialization handler with a dead letter topic, on a broker: the good record before the
    poison one goes through, the poison one is in the dead letter topic, and the application is in ERROR."""
    bootstrap = streams_broker.bootstrap_servers
    input_topic, output = unique_name("numbers"), unique_name("out")
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        assert all(error is None for error in admin.create_topics(
            [NewTopic(topic, 1, 1) for topic in (input_topic, output, output + "-dlq")]).values())
    _produce(bootstrap, input_topic, [("k1", _int(1)), ("k2", b"bad")], 1000)
    streams = KafkaStreams(errors(input_topic, output), {
        "application.id": unique_name("dlq-fail"), "bootstrap.servers": bootstrap, "state.dir": str(tmp_path),
        "default.key.serde": "string", "default.value.serde": "string",
        "errors.dead.letter.queue.topic.name": output + "-dlq"})
    streams.start()
    try:
        assert streams.wait_for_state(State.ERROR, timeout=60) is State.ERROR
    finally:
        streams.close()
    assert [(record.key, record.value) for record in read_to_end(bootstrap, output)] == [(b"k1", b"10")]
    (dead_letter,) = read_to_end(bootstrap, output + "-dlq")
    assert (dead_letter.key, dead_letter.value, dead_letter.timestamp) == (b"k2", b"bad", 1001)
    assert dict(dead_letter.headers)["__streams.errors.offset"] == b"1"
