"""Kafka 4.0 removed the oldest versions of many APIs (KIP-896); kfk keeps serving them by merging the pre-4.0
schemas of scripts/kafka-protocol/kip896/ into the vendored 4.0.2 ones (kfk/protocol/schema.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kfk.protocol.messages import ApiKey, request_class
from kfk.protocol.messages.offset_commit import OffsetCommitRequest
from kfk.protocol.schema import MAX_VERSION, Struct, Versions, load_specs, merge_removed_versions

ROOT = Path(__file__).resolve().parents[2]
MESSAGES = ROOT / "scripts" / "kafka-protocol" / "message"
KIP896 = ROOT / "scripts" / "kafka-protocol" / "kip896"


def field(struct: Struct, name: str):
    return next(f for f in struct.fields if f.name == name)


def test_merged_schemas_span_the_old_lowest_and_the_new_highest_versions() -> None:
    specs = {spec.name: spec for spec in load_specs(MESSAGES, KIP896)}
    assert specs["ProduceRequest"].valid_versions == Versions(0, 13)
    assert specs["FetchRequest"].valid_versions == Versions(0, 18)
    assert specs["ControlledShutdownRequest"].valid_versions == Versions(0, 3)  # gone from 4.0, kept whole
    assert "LeaderAndIsrRequest" not in specs  # no version left in 4.0 and not served: nothing generated
    assert field(specs["ProduceRequest"].struct, "TransactionalId").versions == Versions(3, MAX_VERSION)
    # A field only the removed versions carried comes back, at those versions only and in its old place.
    partition = field(field(specs["OffsetCommitRequest"].struct, "Topics").struct, "Partitions").struct
    assert [f.name for f in partition.fields] == [
        "PartitionIndex", "CommittedOffset", "CommittedLeaderEpoch", "CommitTimestamp", "CommittedMetadata"]
    assert field(partition, "CommitTimestamp").versions == Versions(1, 1)


def test_the_generated_codec_encodes_removed_and_new_versions() -> None:
    produce = request_class(ApiKey.PRODUCE)
    assert (produce.LOWEST_VERSION, produce.HIGHEST_VERSION) == (0, 13)
    Topic, Partition = OffsetCommitRequest.OffsetCommitRequestTopic, OffsetCommitRequest.OffsetCommitRequestPartition
    request = OffsetCommitRequest(group_id="g", topics=[Topic(name="t", partitions=[
        Partition(partition_index=0, committed_offset=5, commit_timestamp=1234)])])
    decoded = OffsetCommitRequest.decode(request.encode(1), 1)
    assert decoded.topics[0].partitions[0].commit_timestamp == 1234


def test_a_merge_that_cannot_be_one_schema_is_refused() -> None:
    newer = {"validVersions": "3-5", "flexibleVersions": "none",
             "fields": [{"name": "A", "type": "int32", "versions": "4+"}]}
    older = {"validVersions": "0-4", "flexibleVersions": "none",
             "fields": [{"name": "A", "type": "int32", "versions": "0-1"}]}
    with pytest.raises(ValueError, match="do not join"):
        merge_removed_versions(newer, older, "gap")
    with pytest.raises(ValueError, match="type or tag differs"):
        merge_removed_versions(newer, {**older, "fields": [{"name": "A", "type": "int64", "versions": "0+"}]}, "t")
    with pytest.raises(ValueError, match="no version the newer one removed"):
        merge_removed_versions(newer, {**older, "validVersions": "3-4"}, "nothing older")
