"""Apache Kafka vs kfk, API x version: start both (Apache Kafka 4.4.0 from kfk.testing.apache_kafka, kfk as a
`kfk server start` subprocess, each single-node with the settings the test suite gives them), run the differential
scenarios of tests/interop against both and print the table (identical / differs, with the field paths, and whether
the difference is one documented in tests/interop/test_differential.py / not exercised / kfk-only / Kafka-only) and
its totals.

    python bench/differential_report.py [--differences]

Not a benchmark: a report for the notes. About a minute and a half on a 2-core VM, most of it Apache Kafka's start.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kfk.protocol.messages import ApiKey  # noqa: E402
from kfk.testing.apache_kafka import ApacheKafka  # noqa: E402
from kfk.testing.broker import start_broker  # noqa: E402
from kfk.testing.plugin import TEST_OVERRIDES  # noqa: E402

from tests.interop.differential import differential_run  # noqa: E402
from tests.interop.scenarios import SCENARIOS, wait_for_coordinators  # noqa: E402
from tests.interop.test_differential import is_documented  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--differences", action="store_true",
                        help="also list every difference (API, version, field path, scenario, both values)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kfk-differential-") as scratch:
        kfk_node = start_broker(Path(scratch) / "kfk", dict(TEST_OVERRIDES))
        try:
            with ApacheKafka(Path(scratch) / "apache-kafka") as kafka:
                comparison = differential_run(kafka.bootstrap_server, kfk_node.bootstrap_servers, SCENARIOS,
                                              wait_for_coordinators)
        finally:
            kfk_node.stop()
    print(comparison.render(is_documented))
    if args.differences:
        print()
        for difference in comparison.differences:
            mark = "documented" if is_documented(difference) else "UNDOCUMENTED"
            print(f"{mark}: {ApiKey(difference.api_key).name} v{difference.version} {difference.path} "
                  f"({difference.label}): Kafka {difference.kafka!r}, kfk {difference.kfk!r}")


if __name__ == "__main__":
    main()
