"""docs/grafana/kfk.json against a live broker: every metric its queries name, and every label they group or match
by, is on the broker's metrics endpoint once it has served producers, a consumer and a group. (Grafana itself, whose
schema validation would be the other check, is not installable here: no Debian package, no PyPI one.)"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer

from kfk.testing.ports import free_port
from tests.cluster.helpers import wait_until
from tests.integration.prometheus import scrape

pytestmark = pytest.mark.integration

DASHBOARD = Path(__file__).resolve().parents[2] / "docs" / "grafana" / "kfk.json"
#: Labels Prometheus adds to every series it scrapes (job, instance) or that histograms carry (le).
SCRAPE_LABELS = {"job", "instance", "le"}

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_MATCHERS = re.compile(r"\{([^}]*)\}")
_RANGE = re.compile(r"\[[^\]]*\]")
_GROUPING = re.compile(r"\b(?:by|without)\s*\(([^)]*)\)")
_IDENTIFIER = re.compile(r"(?<![\w.$])([a-zA-Z_:][\w:]*)\b(?!\s*\()")
_KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless", "bool", "offset"}


def queries(dashboard: dict) -> list[str]:
    found = []
    for panel in dashboard["panels"]:
        found += [target["expr"] for target in panel.get("targets", [])]
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            found.append(re.fullmatch(r"label_values\((\w+),\s*\w+\)", variable["query"]["query"]).group(1))
    return found


def parse(expression: str) -> tuple[set[str], set[str]]:
    """The metric names and the label names of a PromQL expression."""
    labels: set[str] = set()
    for matchers in _MATCHERS.findall(expression):
        labels |= {matcher.split("=")[0].split("!")[0].strip() for matcher in _STRING.sub("", matchers).split(",")
                   if matcher.strip()}
    for grouping in _GROUPING.findall(expression):
        labels |= {label.strip() for label in grouping.split(",") if label.strip()}
    bare = _GROUPING.sub(" ", _RANGE.sub(" ", _MATCHERS.sub(" ", _STRING.sub(" ", expression))))
    metrics = {name for name in _IDENTIFIER.findall(bare) if name not in _KEYWORDS}
    return metrics, labels


def test_every_metric_and_label_the_dashboard_queries_is_exported(kfk_broker_factory) -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    expressions = queries(dashboard)
    assert len(expressions) >= 30
    port = free_port()
    broker = kfk_broker_factory({"metrics.port": str(port), "num.partitions": "2"})
    bootstrap = broker.bootstrap_servers
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for index in range(20):
        producer.produce("dashboard", b"value %d" % index, partition=index % 2)
    assert producer.flush(20) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "dashboard-group",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe(["dashboard"])
    message = wait_until(lambda: consumer.poll(1), what="a record")
    consumer.commit(message, asynchronous=False)
    consumer.close()

    samples = scrape(port)
    exported: dict[str, set[str]] = {}
    for name, labels in samples:
        exported.setdefault(name, set()).update(label for label, _ in labels)
    for expression in expressions:
        metrics, labels = parse(expression)
        assert metrics, expression
        missing = metrics - exported.keys()
        assert not missing, f"{expression}: not exported: {sorted(missing)}"
        unknown = labels - SCRAPE_LABELS - set().union(*(exported[metric] for metric in metrics))
        assert not unknown, f"{expression}: no such labels: {sorted(unknown)}"
