"""kfk.errors against Kafka's published error table, with librdkafka and kafka-python as independent oracles."""

from __future__ import annotations

import builtins
import pickle

import confluent_kafka
import kafka.errors
import pytest

from kfk import errors
from kfk.errors import (
    ERROR_INFO,
    CorruptRecordError,
    ErrorCode,
    InvalidRequestError,
    KafkaError,
    KafkaTimeoutError,
    NotLeaderOrFollowerError,
    ProtocolError,
    UnknownServerError,
    UnsupportedVersionError,
    error_for_code,
    raise_for_code,
)

ERROR_CODES = [code for code in ErrorCode if code is not ErrorCode.NONE]


def test_codes_are_unique_and_contiguous_up_to_kafka_4_1():
    values = [int(code) for code in ErrorCode]
    assert len(values) == len(set(values))
    assert sorted(values) == list(range(-1, 134))  # -1, 0 .. 133 SHARE_SESSION_LIMIT_REACHED


def test_error_info_matches_the_enum():
    assert set(ERROR_INFO) == set(ErrorCode)
    for code, info in ERROR_INFO.items():
        assert info.code is code
        assert info.name == code.name
        assert isinstance(info.retriable, bool)
        assert bool(info.message) == (code is not ErrorCode.NONE)


@pytest.mark.parametrize(
    ("name", "value", "retriable"),
    [
        ("UNKNOWN_SERVER_ERROR", -1, False),
        ("NONE", 0, False),
        ("OFFSET_OUT_OF_RANGE", 1, False),
        ("CORRUPT_MESSAGE", 2, True),
        ("UNKNOWN_TOPIC_OR_PARTITION", 3, True),
        ("NOT_LEADER_OR_FOLLOWER", 6, True),
        ("REQUEST_TIMED_OUT", 7, True),
        ("BROKER_NOT_AVAILABLE", 8, False),
        ("MESSAGE_TOO_LARGE", 10, False),
        ("NOT_COORDINATOR", 16, True),
        ("UNSUPPORTED_VERSION", 35, False),
        ("TOPIC_ALREADY_EXISTS", 36, False),
        ("INVALID_REQUEST", 42, False),
        ("OUT_OF_ORDER_SEQUENCE_NUMBER", 45, False),
        ("INVALID_PRODUCER_EPOCH", 47, False),
        ("KAFKA_STORAGE_ERROR", 56, True),
        ("FENCED_LEADER_EPOCH", 74, True),
        ("FENCED_INSTANCE_ID", 82, False),
        ("INVALID_RECORD", 87, False),
        ("PRODUCER_FENCED", 90, False),
        ("UNKNOWN_TOPIC_ID", 100, True),
        ("TRANSACTION_ABORTABLE", 120, False),
        ("INVALID_SHARE_SESSION_EPOCH", 123, True),
        ("REBOOTSTRAP_REQUIRED", 129, False),
    ],
)
def test_spot_checks_against_kafka(name, value, retriable):
    code = ErrorCode[name]
    assert code == value
    assert ERROR_INFO[code].retriable is retriable


def test_spot_check_classes():
    assert CorruptRecordError.error_code is ErrorCode.CORRUPT_MESSAGE
    assert NotLeaderOrFollowerError.retriable
    assert not UnsupportedVersionError.retriable
    assert KafkaTimeoutError.error_code is ErrorCode.REQUEST_TIMED_OUT


# librdkafka spells a few old codes its own way; every other code it knows must carry Kafka's name and value.
LIBRDKAFKA_NAMES = {
    ErrorCode.CORRUPT_MESSAGE: "INVALID_MSG",
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: "UNKNOWN_TOPIC_OR_PART",
    ErrorCode.INVALID_FETCH_SIZE: "INVALID_MSG_SIZE",
    ErrorCode.NOT_LEADER_OR_FOLLOWER: "NOT_LEADER_FOR_PARTITION",
    ErrorCode.MESSAGE_TOO_LARGE: "MSG_SIZE_TOO_LARGE",
    ErrorCode.STALE_CONTROLLER_EPOCH: "STALE_CTRL_EPOCH",
    ErrorCode.INVALID_TOPIC_EXCEPTION: "TOPIC_EXCEPTION",
}


def test_names_and_values_agree_with_librdkafka():
    checked = 0
    for code in ErrorCode:
        if code <= 0:  # librdkafka's negative codes are its own client-side errors
            continue
        value = getattr(confluent_kafka.KafkaError, LIBRDKAFKA_NAMES.get(code, code.name), None)
        if value is None:  # librdkafka does not define every broker code
            continue
        assert value == code, code.name
        checked += 1
    assert checked > 110


def test_retriable_agrees_with_kafka_python():
    # kafka-python marks CORRUPT_MESSAGE non-retriable; Kafka's CorruptRecordException is a RetriableException.
    known_differences = {ErrorCode.CORRUPT_MESSAGE}
    checked = 0
    for value in vars(kafka.errors).values():
        if not (isinstance(value, type) and issubclass(value, kafka.errors.BrokerResponseError)):
            continue
        errno = getattr(value, "errno", None)
        if not isinstance(errno, int) or errno <= 0 or errno not in ErrorCode._value2member_map_:
            continue
        code = ErrorCode(errno)
        if code not in known_differences:
            assert ERROR_INFO[code].retriable is bool(value.retriable), code.name
            checked += 1
    assert checked > 100


@pytest.mark.parametrize("code", ERROR_CODES, ids=lambda code: code.name)
def test_error_for_code_round_trip(code):
    error_class = error_for_code(code)
    assert issubclass(error_class, KafkaError)
    assert error_class.error_code is code
    assert error_class.retriable is ERROR_INFO[code].retriable
    assert error_for_code(int(code)) is error_class
    error = error_class()
    assert str(error) == error.message == ERROR_INFO[code].message


def test_one_distinct_class_per_code_with_a_safe_name():
    classes = [error_for_code(code) for code in ERROR_CODES]
    assert len(set(classes)) == len(ERROR_CODES)
    for error_class in classes:
        assert error_class.__name__.endswith("Error")
        assert not hasattr(builtins, error_class.__name__)
        assert getattr(errors, error_class.__name__) is error_class


def test_unknown_codes_map_to_unknown_server_error():
    assert error_for_code(134) is UnknownServerError
    assert error_for_code(-2) is UnknownServerError
    assert error_for_code(32767) is UnknownServerError


def test_error_for_none_is_a_mistake():
    with pytest.raises(ValueError, match="NONE"):
        error_for_code(0)


def test_raise_for_code():
    raise_for_code(0)
    raise_for_code(ErrorCode.NONE, "ignored")
    with pytest.raises(NotLeaderOrFollowerError) as info:
        raise_for_code(6)
    assert info.value.message == ERROR_INFO[ErrorCode.NOT_LEADER_OR_FOLLOWER].message
    with pytest.raises(CorruptRecordError, match="^batch CRC mismatch$"):
        raise_for_code(ErrorCode.CORRUPT_MESSAGE, "batch CRC mismatch")
    with pytest.raises(UnknownServerError, match="Unknown error code 4242"):
        raise_for_code(4242)
    with pytest.raises(UnknownServerError, match="^broker said so$"):
        raise_for_code(4242, "broker said so")


def test_custom_message_and_pickling():
    error = UnsupportedVersionError("ApiVersions v9 is not supported")
    assert str(error) == error.message == "ApiVersions v9 is not supported"
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is UnsupportedVersionError and copy.message == error.message


def test_protocol_error_is_an_invalid_request():
    error = ProtocolError("truncated frame: need 4 bytes, have 2")
    assert isinstance(error, InvalidRequestError)
    assert error.error_code == 42 == ErrorCode.INVALID_REQUEST
    assert not error.retriable
    assert str(error) == "truncated frame: need 4 bytes, have 2"
    assert ProtocolError().message == ERROR_INFO[ErrorCode.INVALID_REQUEST].message
    # the refinement does not replace the code's own class
    assert error_for_code(42) is InvalidRequestError


def test_a_second_class_for_a_code_is_rejected():
    with pytest.raises(TypeError, match="CORRUPT_MESSAGE"):
        type("AnotherCorruptError", (KafkaError,), {"error_code": ErrorCode.CORRUPT_MESSAGE})
    with pytest.raises(TypeError, match="NONE"):
        type("NoError", (KafkaError,), {"error_code": ErrorCode.NONE})
    assert error_for_code(ErrorCode.CORRUPT_MESSAGE) is CorruptRecordError
