"""Kafka Streams' exception handlers (kfk.streams.errors) on the TopologyTestDriver: which handler each failure
reaches, what RESUME and FAIL do, and how the handlers are configured (Kafka's names, the deprecated keys, Python
classes and callables). The same handlers on a broker, beside Apache Kafka Streams, are in
test_apache_kafka_streams_oracle.py."""

from __future__ import annotations

import logging

import pytest

from kfk.errors import InvalidConfigurationError
from kfk.streams import Serdes, StreamsBuilder
from kfk.streams.errors import (ErrorHandlerContext, FailedProcessingException, LogAndContinueExceptionHandler,
                                LogAndContinueProcessingExceptionHandler, ProducerRecord, Result,
                                SerializationExceptionOrigin, StreamsException)
from kfk.streams.test_driver import TopologyTestDriver
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
