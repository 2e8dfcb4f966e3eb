"""Apache Kafka as the oracle (issue 17): every API both brokers advertise, at every version both advertise, with
its error cases, sent to Apache Kafka 4.4.0 and to kfk; the decoded answers must agree field by field
(tests/interop/differential.py says what is normalised, tests/interop/scenarios.py what is sent).

A difference is either fixed in kfk or listed in EXPECTED_DIFFERENCES with the reason it stays; the suite fails on
a difference not listed and on a listed one that no longer occurs, so the list stays true. The session prints the
table API x version (and writes it under the pytest temp dir); `python bench/differential_report.py` prints the same
table outside pytest.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from kfk.protocol.messages import ApiKey
from kfk.testing.apache_kafka import ApacheKafka
from kfk.testing.broker import BrokerProcess, start_broker
from kfk.testing.plugin import TEST_OVERRIDES

from tests.interop.differential import Comparison, Difference, differential_run
from tests.interop.scenarios import SCENARIOS, wait_for_coordinators

pytestmark = pytest.mark.integration


def _documented(api: ApiKey, versions: range | list[int], path: str, reason: str) -> dict:
    return {(api.name, version, path): reason for version in versions}


_FEATURES = ("kfk does not serve share.version (it serves share groups without it: "
             "kfk/server/handlers/share_groups.py) or streams.version (no KIP-1071 streams groups)")
_KRAFT_VERSION = ("kfk's single-node default is a static quorum (kraft.version 0, not listed), where the Apache Kafka "
                  "node of the tests is formatted --standalone (kraft.version 1)")
#: The features Apache Kafka 4.4 supports and kfk does not serve.
_KAFKA_ONLY_FEATURES = ("share.version", "streams.version")
_SAMPLE_PROPERTIES = ("`kfk server start` without a properties file sets what Kafka's sample server.properties "
                      "sets, num.partitions=1 among them: a static broker config (with the default as its synonym), "
                      "where the Apache Kafka node of the tests leaves it at its default")
_STATIC_QUORUM = ("kfk's single-node default is a static quorum (its one voter from the start, kraft.version 0): it "
                  "refuses any voter change (UNSUPPORTED_VERSION), where the Apache Kafka node of the tests is "
                  "formatted --standalone (kraft.version 1) and looks the voter up")
_LISTENERS = ("kfk's combined node has no separate controller listener: its voter's endpoint is the broker listener "
              "it registered, where Apache Kafka's is its CONTROLLER listener")

#: (API, version, field path) -> why kfk answers differently. Paths as Difference.key writes them.
EXPECTED_DIFFERENCES: dict[tuple[str, int, str], str] = {
    **_documented(ApiKey.PRODUCE, range(0, 3), "",
                  "Apache Kafka 4.0 advertises Produce v0-v2 only so that old librdkafka does not fail its version "
                  "check (KIP-896) and closes the connection on them; kfk serves them (magic 0/1 message sets from "
                  "kafka-python with an old api_version, DESIGN.md)"),
    **{key: _FEATURES for feature in _KAFKA_ONLY_FEATURES for key in [
        *_documented(ApiKey.API_VERSIONS, [3, 4, 5], f"finalized_features[name={feature}]", _FEATURES),
        *_documented(ApiKey.API_VERSIONS, [4, 5], f"supported_features[name={feature}]", _FEATURES)]},
    **_documented(ApiKey.API_VERSIONS, [3, 4, 5], "finalized_features[name=kraft.version]", _KRAFT_VERSION),
    **_documented(ApiKey.DESCRIBE_QUORUM, [2], "nodes[0].listeners[name=CONTROLLER]", _LISTENERS),
    **_documented(ApiKey.DESCRIBE_QUORUM, [2], "nodes[0].listeners[name=PLAINTEXT]", _LISTENERS),
    **_documented(ApiKey.DESCRIBE_QUORUM, [2], "topics[topic_name=__cluster_metadata].partitions[partition_index=0]"
                  ".current_voters[0].replica_directory_id",
                  "kfk's metadata log lives in no directory with an id (KIP-853's directory ids): its voter's is the "
                  "zero uuid"),
    **_documented(ApiKey.ADD_RAFT_VOTER, [0, 1], "error_code", _STATIC_QUORUM),
    **_documented(ApiKey.REMOVE_RAFT_VOTER, [0], "error_code", _STATIC_QUORUM),
    **_documented(ApiKey.DESCRIBE_CONFIGS, range(1, 5), "results[resource_name=1].configs[name=num.partitions]"
                  ".config_source", _SAMPLE_PROPERTIES),
    **_documented(ApiKey.DESCRIBE_CONFIGS, range(1, 5), "results[resource_name=1].configs[name=num.partitions]"
                  ".synonyms", _SAMPLE_PROPERTIES),
    **_documented(ApiKey.INCREMENTAL_ALTER_CONFIGS, [0, 1], "responses[].error_code",
                  "an operation code Kafka does not know fails inside Apache Kafka (UNKNOWN_SERVER_ERROR, no "
                  "message); kfk refuses the request's resource with INVALID_REQUEST and says why"),
    **_documented(ApiKey.INCREMENTAL_ALTER_CONFIGS, [0, 1], "responses[].error_message",
                  "see responses[].error_code: kfk says which operation code it does not know"),
}


#: (API, versions, pattern of field paths) -> why kfk answers differently, for differences whose paths name each
#: scenario's own topics.
EXPECTED_DIFFERENCE_PATTERNS: list[tuple[ApiKey, range, re.Pattern[str], str]] = [
    (ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, range(0, 2), re.compile(r"partitions\[partition_index=0\]\.start_offset$"),
     "Apache Kafka answers from its share coordinator's persisted state (__share_group_state), whose start offset "
     "trails the partition leader's: still 0 once records 0 and 1 are accepted; kfk's leader writes its state "
     "before it answers the acknowledgement, and answers its own start offset, 2 (the lag, 1, agrees)"),
]


def _pattern_of(difference: Difference) -> int | None:
    """The index of the EXPECTED_DIFFERENCE_PATTERNS entry documenting `difference`, if one does."""
    name, version, path = difference.key
    for index, (api, versions, pattern, _) in enumerate(EXPECTED_DIFFERENCE_PATTERNS):
        if api.name == name and version in versions and pattern.search(path):
            return index
    return None


def is_documented(difference: Difference) -> bool:
    return difference.key in EXPECTED_DIFFERENCES or _pattern_of(difference) is not None


@pytest.fixture(scope="module")
def kfk_node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """kfk with the settings the apache_kafka fixture gives Apache Kafka (one node: replication factors of 1, no
    initial rebalance delay); everything else at both brokers' defaults (num.partitions=1,
    auto.create.topics.enable=true)."""
    broker = start_broker(tmp_path_factory.mktemp("kfk-differential"), dict(TEST_OVERRIDES))
    yield broker
    broker.stop()


@pytest.fixture(scope="module")
def comparison(apache_kafka: ApacheKafka, kfk_node: BrokerProcess,
               tmp_path_factory: pytest.TempPathFactory) -> Comparison:
    result = differential_run(apache_kafka.bootstrap_server, kfk_node.bootstrap_servers, SCENARIOS,
                              wait_for_coordinators)
    report = result.render(is_documented)
    path = tmp_path_factory.mktemp("differential") / "report.txt"
    path.write_text(report + "\n")
    print(f"\n--- Apache Kafka vs kfk, API x version ({path}) ---\n{report}")
    return result


def test_no_undocumented_difference(comparison: Comparison) -> None:
    undocumented = [d for d in comparison.differences if not is_documented(d)]
    assert not undocumented, "\n".join(
        f"{name} v{version} {path} ({d.label}): Kafka {d.kafka!r}, kfk {d.kfk!r}"
        for d in undocumented[:60] for name, version, path in [d.key])


def test_every_documented_difference_still_occurs(comparison: Comparison) -> None:
    seen = {d.key for d in comparison.differences}
    assert not [key for key in EXPECTED_DIFFERENCES if key not in seen]
    patterns_seen = {_pattern_of(d) for d in comparison.differences}
    assert not [entry[:3] for index, entry in enumerate(EXPECTED_DIFFERENCE_PATTERNS) if index not in patterns_seen]


def test_every_version_both_advertise_is_exercised(comparison: Comparison) -> None:
    assert not [(name, version) for name, version, status in comparison.table() if status == "not exercised"]
