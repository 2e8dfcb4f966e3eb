"""Filter (drops every record it is applied to, so it is used with a predicate) and Kafka's three predicates."""

from __future__ import annotations

import re
from typing import Any, Mapping

from kfk.connect.config_def import ConfigDef, ConfigKey, non_empty_string, valid_regex
from kfk.connect.records import ConnectRecord
from kfk.connect.transforms.base import Predicate, Transformation


class Filter(Transformation):
    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        return None


class TopicNameMatches(Predicate):
    """True when the whole topic name matches `pattern`."""

    def config(self) -> ConfigDef:
        return ConfigDef([ConfigKey("pattern", "STRING", importance="MEDIUM",
                                    documentation="A Java-style regular expression for topic names.",
                                    validator=lambda name, value: (non_empty_string(name, value),
                                                                   valid_regex(name, value)))])

    def configure(self, props: Mapping[str, Any]) -> None:
        self.pattern = re.compile(self.config().parse(props)["pattern"])

    def test(self, record: ConnectRecord) -> bool:
        return record.topic is not None and self.pattern.fullmatch(record.topic) is not None


class HasHeaderKey(Predicate):
    """True when the record has at least one header named `name`."""

    def config(self) -> ConfigDef:
        return ConfigDef([ConfigKey("name", "STRING", importance="MEDIUM", documentation="The header name.",
                                    validator=non_empty_string)])

    def configure(self, props: Mapping[str, Any]) -> None:
        self.name = self.config().parse(props)["name"]

    def test(self, record: ConnectRecord) -> bool:
        return record.headers.last_with_name(self.name) is not None


class RecordIsTombstone(Predicate):
    """True when the record's value is null."""

    def test(self, record: ConnectRecord) -> bool:
        return record.value is None
