"""Apache Kafka as the oracle (issue 17): every API both brokers advertise, at every version both advertise, with
its error cases, sent to Apache Kafka 4.0.2 and to kfk; the decoded answers must agree field by field
(tests/interop/differential.py says what is normalised, tests/interop/scenarios.py what is sent).

A difference is either fixed in kfk or listed in EXPECTED_DIFFERENCES with the reason it stays; the suite fails on
a difference not listed and on a listed one that no longer occurs, so the list stays true. The session prints the
table API x version (and writes it under the pytest temp dir); `python bench/differential_report.py` prints the same
table outside pytest.
"""

from __future__ import annotations

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


#: (API, version, field path) -> why kfk answers differently. Paths as Difference.key writes them.
EXPECTED_DIFFERENCES: dict[tuple[str, int, str], str] = {}


def is_documented(difference: Difference) -> bool:
    return difference.key in EXPECTED_DIFFERENCES


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


def test_every_version_both_advertise_is_exercised(comparison: Comparison) -> None:
    assert not [(name, version) for name, version, status in comparison.table() if status == "not exercised"]
