"""The controller bootstraps an empty metadata log with the bootstrap records (`kfk storage format`'s
bootstrap.checkpoint): the feature levels first, metadata.version leading, then the file's SCRAM credentials, in one
batch, once; and a file that asks for feature levels kfk does not run (Apache Kafka's format at 4.0-IV3) still
bootstraps the cluster, with the levels kfk serves, and a warning. Over a real embedded backend in tmp_path."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from kfk.controller.bootstrap_metadata import records_for_empty_log
from kfk.controller.features import METADATA_VERSION_LEVEL
from kfk.protocol.metadata_records import schema_class
from kfk.security.sasl.add_scram import parse_add_scram
from kfk.security.sasl.scram import ScramMechanism
from kfk.server.storage_format import bootstrap_records

from tests.cluster.helpers import metadata_log_batches

FeatureLevelRecord = schema_class("FeatureLevelRecord")
UserScramCredentialRecord = schema_class("UserScramCredentialRecord")
ConfigRecord = schema_class("ConfigRecord")


def _scram_records() -> list:
    return bootstrap_records({"metadata.version": METADATA_VERSION_LEVEL}, [
        parse_add_scram("SCRAM-SHA-256=[name=alice,password=alice-secret]"),
        parse_add_scram("SCRAM-SHA-512=[name=admin,iterations=8192,password=admin-secret]")])


def test_an_empty_log_is_bootstrapped_once_with_the_credentials(make_cluster) -> None:
    records = _scram_records()
    cluster = make_cluster(brokers=0, bootstrap_records=records)
    assert cluster.image.features["metadata.version"] == METADATA_VERSION_LEVEL
    assert set(cluster.image.scram_credentials) == {("alice", ScramMechanism.SCRAM_SHA_256),
                                                   ("admin", ScramMechanism.SCRAM_SHA_512)}
    assert cluster.image.scram_credentials[("admin", ScramMechanism.SCRAM_SHA_512)].iterations == 8192
    cluster.reopen()  # a new epoch: this controller is elected again over a log that is no longer empty
    cluster.register(1)
    batches = metadata_log_batches(Path(cluster.log_dir))
    assert batches[0] == records  # together, in one batch: committed all or none
    assert sum(isinstance(record, (FeatureLevelRecord, UserScramCredentialRecord))
               for batch in batches for record in batch) == 3


def test_without_a_bootstrap_file_the_log_starts_with_kfk_s_default_levels(make_cluster) -> None:
    cluster = make_cluster(brokers=0, broker_heartbeats=True)  # KRaft
    assert metadata_log_batches(Path(cluster.log_dir))[0] == [
        FeatureLevelRecord(name="metadata.version", feature_level=METADATA_VERSION_LEVEL),
        FeatureLevelRecord(name="eligible.leader.replicas.version", feature_level=1),
        FeatureLevelRecord(name="group.version", feature_level=1),
        FeatureLevelRecord(name="transaction.version", feature_level=2),
        # Eligible leader replicas on: the cluster-wide min.insync.replicas from the static config (Kafka 4.4's).
        ConfigRecord(resource_type=4, resource_name="", name="min.insync.replicas", value="1")]
    assert not cluster.image.scram_credentials


def test_feature_levels_kfk_does_not_run_give_way_to_its_own(caplog: pytest.LogCaptureFixture) -> None:
    """A release after kfk's (metadata.version 34) beside levels kfk serves: kfk bootstraps at its own latest, keeps
    the levels it serves and the credentials after them."""
    credential = _scram_records()[1]
    kafka_formatted = [FeatureLevelRecord(name="metadata.version", feature_level=34),
                       FeatureLevelRecord(name="group.version", feature_level=1),
                       FeatureLevelRecord(name="transaction.version", feature_level=2), credential]
    with caplog.at_level(logging.WARNING, logger="kfk.controller"):
        records = records_for_empty_log(kafka_formatted)
    assert records == [FeatureLevelRecord(name="metadata.version", feature_level=METADATA_VERSION_LEVEL),
                       FeatureLevelRecord(name="group.version", feature_level=1),
                       FeatureLevelRecord(name="transaction.version", feature_level=2), credential]
    [warning] = caplog.records
    assert "metadata.version=34 that kfk does not serve" in warning.getMessage()
    caplog.clear()
    own = _scram_records()
    assert records_for_empty_log(own) == own
    assert not caplog.records  # kfk's own file: nothing to say
