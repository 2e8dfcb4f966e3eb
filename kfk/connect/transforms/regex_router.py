"""RegexRouter: rename the topic when the whole topic name matches `regex` (Java's $1 groups in `replacement`)."""

from __future__ import annotations

import re
from typing import Any, Mapping

from kfk.connect.config_def import ConfigDef, ConfigKey, valid_regex
from kfk.connect.records import ConnectRecord
from kfk.connect.transforms.base import Transformation


def java_replacement(replacement: str) -> str:
    """Java's Matcher replacement syntax ($1, ${name}, \\$) as Python's match.expand template."""
    out, index = [], 0
    while index < len(replacement):
        char = replacement[index]
        if char == "\\" and index + 1 < len(replacement):
            out.append(replacement[index + 1].replace("\\", "\\\\"))
            index += 2
        elif char == "$" and replacement[index + 1:index + 2] == "{":
            end = replacement.index("}", index)
            out.append(f"\\g<{replacement[index + 2:end]}>")
            index = end + 1
        elif char == "$":
            end = index + 1
            while end < len(replacement) and replacement[end].isdigit():
                end += 1
            out.append(f"\\g<{replacement[index + 1:end]}>")
            index = end
        else:
            out.append(char)
            index += 1
    return "".join(out)


class RegexRouter(Transformation):
    def config(self) -> ConfigDef:
        return ConfigDef([ConfigKey("regex", "STRING", importance="HIGH", documentation="Regular expression.",
                                    validator=valid_regex),
                          ConfigKey("replacement", "STRING", importance="HIGH", documentation="Replacement string.")])

    def configure(self, props: Mapping[str, Any]) -> None:
        parsed = self.config().parse(props)
        self.regex = re.compile(parsed["regex"])
        self.replacement = java_replacement(parsed["replacement"])

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        match = self.regex.fullmatch(record.topic)
        if match is None:
            return record
        return record.new_record(topic=match.expand(self.replacement), kafka_partition=record.kafka_partition)
