"""LogConfig: Kafka's topic-level names, types, defaults and validation."""

from __future__ import annotations

import dataclasses

import pytest

from kfk.common.constants import INT64_MAX
from kfk.config import LOG_CONFIG_DEF, LogConfig
from kfk.errors import InvalidConfigurationError


def test_defaults_are_kafkas() -> None:
    config = LogConfig()
    assert config.segment_bytes == 1073741824
    assert config.segment_ms == 604800000
    assert config.segment_index_bytes == 10485760
    assert config.index_interval_bytes == 4096
    assert config.retention_ms == 604800000
    assert config.retention_bytes == -1
    assert config.cleanup_policy == ("delete",)
    assert config.delete_retention_ms == 86400000
    assert config.min_compaction_lag_ms == 0
    assert config.max_compaction_lag_ms == INT64_MAX
    assert config.min_cleanable_dirty_ratio == 0.5
    assert config.file_delete_delay_ms == 60000
    assert config.flush_messages == INT64_MAX
    assert config.flush_ms == INT64_MAX
    assert config.message_timestamp_type == "CreateTime"
    assert config.max_message_bytes == 1048588
    assert config.compression_type == "producer"
    assert config.preallocate is False
    assert LogConfig.from_properties({}) == LogConfig()


def test_dataclass_fields_match_the_key_table() -> None:
    attributes = {field.name for field in dataclasses.fields(LogConfig)} - {"overridden_configs"}
    assert attributes == {key.attribute for key in LOG_CONFIG_DEF.keys.values()}
    for key in LOG_CONFIG_DEF.keys.values():
        expected = tuple(key.default) if isinstance(key.default, list) else key.default
        assert getattr(LogConfig(), key.attribute) == expected, key.name


def test_parses_strings_like_kafka() -> None:
    config = LogConfig.from_properties(
        {
            "segment.bytes": " 2097152 ",
            "cleanup.policy": "compact,delete",
            "min.cleanable.dirty.ratio": "0.1",
            "preallocate": "TRUE",
            "message.timestamp.type": "LogAppendTime",
        }
    )
    assert config.segment_bytes == 2097152
    assert config.compact and config.delete
    assert config.min_cleanable_dirty_ratio == 0.1
    assert config.preallocate is True
    assert config.message_timestamp_type == "LogAppendTime"
    assert config.overridden_configs == {
        "segment.bytes", "cleanup.policy", "min.cleanable.dirty.ratio", "preallocate", "message.timestamp.type"
    }
    assert config.to_properties()["cleanup.policy"] == "compact,delete"


@pytest.mark.parametrize(
    ("name", "value", "fragment"),
    [
        ("segment.bytes", "1000", "at least 1048576"),
        ("segment.bytes", "abc", "Not a number of type INT"),
        ("segment.bytes", str(2**31), "Not a number of type INT"),
        ("retention.ms", "-2", "at least -1"),
        ("cleanup.policy", "compact,shred", "Invalid value shred for configuration cleanup.policy: String must be one of"),
        ("min.cleanable.dirty.ratio", "1.5", "Value must be no more than 1"),
        ("compression.type", "brotli", "one of"),
        ("preallocate", "yes", "true or false"),
        ("message.timestamp.type", "createtime", "one of"),
        ("leader.replication.throttled.replicas", "0:1,x", "partitionId:brokerId"),
    ],
)
def test_bad_values_raise_invalid_configuration(name: str, value: str, fragment: str) -> None:
    with pytest.raises(InvalidConfigurationError) as raised:
        LogConfig.from_properties({name: value})
    assert name in str(raised.value)
    assert fragment in str(raised.value)


def test_an_empty_cleanup_policy_means_neither_delete_nor_compact() -> None:
    """Kafka 4.x accepts cleanup.policy= (empty): the log is neither trimmed by retention nor compacted."""
    config = LogConfig.from_properties({"cleanup.policy": ""})
    assert (config.cleanup_policy, config.delete, config.compact) == ((), False, False)
    assert config.to_properties()["cleanup.policy"] == ""


def test_unknown_name_and_lag_conflict() -> None:
    with pytest.raises(InvalidConfigurationError, match="Unknown topic config name: segment.size"):
        LogConfig.from_properties({"segment.size": "1"})
    with pytest.raises(InvalidConfigurationError, match="min.compaction.lag.ms"):
        LogConfig.from_properties({"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"})


def test_derived_properties() -> None:
    assert LogConfig.from_properties({"internal.segment.bytes": 1000}).segment_size == 1000
    assert LogConfig().segment_size == 1073741824
    compacted = LogConfig.from_properties({"cleanup.policy": "compact", "max.compaction.lag.ms": 1000})
    assert compacted.max_segment_ms == 1000
    assert LogConfig.from_properties({"max.compaction.lag.ms": 1000}).max_segment_ms == 604800000
    assert LogConfig.from_properties({"preallocate": True, "internal.segment.bytes": 4096}).init_file_size == 4096
    assert "internal.segment.bytes" not in LogConfig().to_properties()
