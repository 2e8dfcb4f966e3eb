"""UpdateFeatures on the controller (kfk/controller/feature_control.py) over a real embedded backend in tmp_path:
Kafka's checks in Kafka's order and words, validate_only, levels removed at 0, a broker that does not support a
level blocking it (and refused at registration once a level is finalized), and the levels surviving a restart of
the controller from its log. The end-to-end checks, with Kafka's own tool, are in tests/cluster/test_features.py."""

from __future__ import annotations

import pytest

from kfk.common.features import dependency_problem, metadata_changed_between
from kfk.errors import ErrorCode
from kfk.protocol.messages.update_features import UpdateFeaturesRequest

from tests.controller.conftest import registration

Key = UpdateFeaturesRequest.FeatureUpdateKey
UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE = 1, 2, 3
FAILED = "The update failed for all features since the following feature had an error: "


def update(cluster, *updates: Key, validate_only: bool = False, version: int = 2):
    return cluster.run(cluster.controller.update_features(
        UpdateFeaturesRequest(feature_updates=list(updates), validate_only=validate_only), version))


@pytest.fixture
def kraft(make_cluster):
    cluster = make_cluster(broker_heartbeats=True)
    cluster.register(1)
    return cluster


@pytest.mark.parametrize(("key", "message"), [
    (Key(feature="transaction.version", max_version_level=1, upgrade_type=9),
     "Invalid update version 1 for feature transaction.version. The controller does not support the given upgrade "
     "type."),
    (Key(feature="transaction.version", max_version_level=-1),
     "Invalid update version -1 for feature transaction.version. A feature version cannot be less than 0."),
    (Key(feature="transaction.version", max_version_level=3),
     "Invalid update version 3 for feature transaction.version. Local controller 1 only supports versions 0-2"),
    (Key(feature="streams.version", max_version_level=1),
     "Invalid update version 1 for feature streams.version. Local controller 1 does not support this feature."),
    (Key(feature="metadata.version", max_version_level=34),
     "Invalid update version 34 for feature metadata.version. Local controller 1 only supports versions 7-33"),
    (Key(feature="transaction.version", max_version_level=1),
     "Invalid update version 1 for feature transaction.version. Can't downgrade the version of this feature without "
     "setting the upgrade type to either safe or unsafe downgrade."),
    (Key(feature="kraft.version", max_version_level=1),
     "Invalid update version 1 for feature kraft.version. kfk's metadata quorum runs kraft.version 0 and cannot "
     "change it online: format a dynamic quorum (storage format --standalone or --initial-controllers) for "
     "kraft.version 1."),
])
def test_refusals_in_kafka_s_words(kraft, key: Key, message: str) -> None:
    before = kraft.image.offset
    response = update(kraft, key, version=1)
    assert (response.error_code, response.error_message) == (ErrorCode.INVALID_UPDATE_VERSION, FAILED + message)
    assert response.results == []  # a refusal is the top-level error alone, as Kafka 4 answers it
    assert kraft.image.offset == before  # nothing written


def test_one_refusal_refuses_the_whole_request(kraft) -> None:
    response = update(kraft, Key(feature="transaction.version", max_version_level=1, upgrade_type=SAFE_DOWNGRADE),
                      Key(feature="streams.version", max_version_level=1))
    assert response.error_code == ErrorCode.INVALID_UPDATE_VERSION and response.results == []
    assert kraft.image.features["transaction.version"] == 2


def test_downgrade_validate_only_disable_and_upgrade(kraft) -> None:
    assert kraft.image.features == {"metadata.version": 33, "eligible.leader.replicas.version": 1, "group.version": 1,
                                   "transaction.version": 2}
    downgrade = Key(feature="transaction.version", max_version_level=1, upgrade_type=SAFE_DOWNGRADE)
    assert update(kraft, downgrade, validate_only=True).error_code == ErrorCode.NONE
    assert kraft.image.features["transaction.version"] == 2
    response = update(kraft, downgrade, version=1)
    assert (response.error_code, response.error_message) == (ErrorCode.NONE, None)
    # Before v2 a success lists every feature of the request; from v2 it does not.
    assert [(result.feature, result.error_code) for result in response.results] == [("transaction.version", 0)]
    assert update(kraft, downgrade, version=2).results == []
    assert kraft.image.features["transaction.version"] == 1
    refused = update(kraft, Key(feature="transaction.version", max_version_level=2, upgrade_type=UNSAFE_DOWNGRADE))
    assert refused.error_message == FAILED + (
        "Invalid update version 2 for feature transaction.version. Can't downgrade to a newer version.")
    assert update(kraft, Key(feature="transaction.version", max_version_level=0,
                             upgrade_type=UNSAFE_DOWNGRADE)).error_code == ErrorCode.NONE
    assert "transaction.version" not in kraft.image.features  # level 0: no longer finalized
    assert update(kraft, Key(feature="transaction.version", max_version_level=2)).error_code == ErrorCode.NONE
    kraft.reopen()  # a new controller replays the log
    assert kraft.image.features == {"metadata.version": 33, "eligible.leader.replicas.version": 1, "group.version": 1,
                                   "transaction.version": 2}


def test_v0_asks_for_a_downgrade_with_allow_downgrade(kraft) -> None:
    assert update(kraft, Key(feature="transaction.version", max_version_level=1, allow_downgrade=True),
                  version=0).error_code == ErrorCode.NONE
    assert kraft.image.features["transaction.version"] == 1


def test_a_registered_broker_that_does_not_support_a_level_blocks_it(kraft) -> None:
    response = kraft.run(kraft.controller.handle_broker_registration(
        registration(2, features={"metadata.version": (7, 33), "group.version": (0, 1),
                                  "eligible.leader.replicas.version": (0, 1), "transaction.version": (0, 2)})))
    assert response.error_code == ErrorCode.NONE
    kraft.run(kraft.controller.handle_broker_registration(
        registration(3, features={"metadata.version": (7, 33), "group.version": (0, 1),
                                  "eligible.leader.replicas.version": (0, 1), "transaction.version": (0, 1)})))
    # Broker 3 cannot be registered while transaction.version 2 is finalized.
    assert 3 not in kraft.image.brokers
    assert update(kraft, Key(feature="transaction.version", max_version_level=1,
                             upgrade_type=SAFE_DOWNGRADE)).error_code == ErrorCode.NONE
    assert kraft.run(kraft.controller.handle_broker_registration(registration(
        3, features={"metadata.version": (7, 33), "group.version": (0, 1),
                     "eligible.leader.replicas.version": (0, 1), "transaction.version": (0, 1)}))).error_code == ErrorCode.NONE
    response = update(kraft, Key(feature="transaction.version", max_version_level=2))
    assert response.error_message == FAILED + (
        "Invalid update version 2 for feature transaction.version. Broker 3 only supports versions 0-1")
    assert kraft.image.brokers[3].supported_features["transaction.version"] == (0, 1)


def test_a_broker_without_a_finalized_level_is_refused_at_registration(kraft) -> None:
    response = kraft.run(kraft.controller.handle_broker_registration(
        registration(4, features={"metadata.version": (7, 7)})))
    assert response.error_code == ErrorCode.UNSUPPORTED_VERSION
    assert 4 not in kraft.image.brokers


def test_metadata_version_is_kraft_s(make_cluster) -> None:
    zookeeper_like = make_cluster()  # no broker heartbeats: the controller of a ZooKeeper-mode cluster
    response = update(zookeeper_like, Key(feature="metadata.version", max_version_level=7))
    assert (response.error_code, response.error_message) == (
        ErrorCode.INVALID_REQUEST,
        FAILED + "Could not apply finalized feature update because the provided feature is not supported.")


def test_kafka_s_dependencies_and_metadata_changes() -> None:
    assert dependency_problem("eligible.leader.replicas.version", 1, {"metadata.version": 22}) == (
        "eligible.leader.replicas.version could not be set to 1 because it depends on metadata.version level 23")
    assert dependency_problem("eligible.leader.replicas.version", 1, {"metadata.version": 23}) is None
    assert dependency_problem("transaction.version", 2, {"metadata.version": 7}) is None
    assert metadata_changed_between(25, 22)  # 4.0-IV1 changed the partition records (ELR)
    assert not metadata_changed_between(25, 23)
