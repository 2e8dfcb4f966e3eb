"""Parse the text DumpLogSegments prints (Kafka's kafka-dump-log.sh, and `kfk dump-log`, which prints the same).

The output is a section per file ("Dumping <path>") of lines; batch lines ("baseOffset: ...") and record lines
("| offset: ...") are `name: value` pairs separated by spaces. A value may itself hold spaces (a payload, the
decoded JSON of an offsets record), so a value runs until the next ` name: ` or the end of the line.
"""

from __future__ import annotations

import re

FIELD = re.compile(r"(\w+): (.*?)(?= \w+: |$)")


def sections(output: str) -> dict[str, list[str]]:
    """file path -> the lines printed for it, in order."""
    result: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in output.splitlines():
        if line.startswith("Dumping "):
            current = result.setdefault(line[len("Dumping "):], [])
        elif current is not None and line:
            current.append(line)
    return result


def fields(line: str) -> dict[str, str]:
    """A batch or record line's fields by name (a record line's leading "| " is dropped)."""
    return dict(FIELD.findall(line.removeprefix("| ")))


def batches(lines: list[str]) -> list[dict[str, str]]:
    return [fields(line) for line in lines if line.startswith("baseOffset: ")]


def records(lines: list[str]) -> list[dict[str, str]]:
    return [fields(line) for line in lines if line.startswith("| offset: ")]
