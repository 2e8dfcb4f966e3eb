"""The message browser's search: records of a topic that match a filter (key, value or header substring, a field of a
JSON value), within a time range, found by scanning partitions from given offsets under a limit.

Why a scan limit: Kafka has no index but offset and timestamp, so a search reads records one by one; a filter that
matches nothing would otherwise read a whole topic into the console. Every search reads at most ``max_scanned``
records (and for at most ``timeout_s``), and says how many it read and where each partition's scan stopped, so the
operator can go on from there (the page's "continue" link) rather than wonder whether the topic was searched to the
end. The time range turns into offsets with ListOffsets by timestamp (the first record at or after each bound), as
kafka-consumer-groups --to-datetime does, so no record outside it is read.

Field matches are a small subset of JSONPath that covers what operators type: ``$.user.id == 42``,
``$.items[0].sku != "x"``, ``$.amount >= 10``, ``$.name ~ "sub"`` (substring), or a path alone (the field exists).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from kfk.common.structs import TopicPartition
from kfk.ui.rendering import render_bytes

__all__ = ["FieldMatch", "RecordFilter", "SearchResult", "parse_field_match", "search_records", "rendered",
           "DEFAULT_MAX_SCANNED", "MAX_SCANNED"]

#: Records one search reads unless told otherwise, and at most.
DEFAULT_MAX_SCANNED = 10_000
MAX_SCANNED = 100_000
_STEP = re.compile(r'\.([A-Za-z_][\w-]*)|\[(\d+)\]|\["((?:[^"\\]|\\.)*)"\]')
_OPERATOR = re.compile(r"\s*(==|!=|>=|<=|>|<|~)\s*")
_MISSING = object()


@dataclass(frozen=True)
class FieldMatch:
    """A JSON value's field (a path of names and list indexes) compared with a JSON literal; no operator: the field
    is present."""

    text: str
    path: tuple[str | int, ...]
    operator: str | None = None
    expected: Any = None

    def matches(self, document: Any) -> bool:
        found = document
        for step in self.path:
            if isinstance(step, int) and isinstance(found, list) and step < len(found):
                found = found[step]
            elif isinstance(step, str) and isinstance(found, dict) and step in found:
                found = found[step]
            else:
                return False
        if self.operator is None:
            return True
        if self.operator == "~":
            return isinstance(found, str) and str(self.expected) in found
        if self.operator in ("==", "!="):
            # JSON's equality: 42 equals 42.0, but true is not 1 (Python's bool is an int).
            same = found == self.expected and isinstance(found, bool) == isinstance(self.expected, bool)
            return same if self.operator == "==" else not same
        comparable = (isinstance(found, (int, float)) and not isinstance(found, bool)
                      and isinstance(self.expected, (int, float)) and not isinstance(self.expected, bool)) or (
            isinstance(found, str) and isinstance(self.expected, str))
        if not comparable:
            return False
        return {">": found > self.expected, "<": found < self.expected, ">=": found >= self.expected,
                "<=": found <= self.expected}[self.operator]


def parse_field_match(text: str) -> FieldMatch:
    """``$.a.b[0] == 42`` as a FieldMatch; a ValueError says what is wrong. The right-hand side is a JSON literal
    (42, "x", true, null); a bare word is taken as a string."""
    source = text.strip()
    if not source.startswith("$"):
        raise ValueError(f"a JSON field starts with $ (as $.user.id == 42), not {source!r}")
    position, path = 1, []
    while position < len(source):
        step = _STEP.match(source, position)
        if step is None:
            break
        name, index, quoted = step.groups()
        path.append(int(index) if index is not None else name if name is not None else json.loads(f'"{quoted}"'))
        position = step.end()
    if not path:
        raise ValueError(f"a JSON field names at least one field after $ (as $.user.id), not {source!r}")
    rest = source[position:]
    if not rest.strip():
        return FieldMatch(source, tuple(path))
    operator = _OPERATOR.match(rest)
    if operator is None:
        raise ValueError(f"after {source[:position]!r} comes ==, !=, <, <=, >, >= or ~ and a value, "
                         f"not {rest.strip()!r}")
    literal = rest[operator.end():].strip()
    if not literal:
        raise ValueError(f"{source!r} compares with nothing: put a value after {operator.group(1)}")
    try:
        expected = json.loads(literal)
    except ValueError:
        expected = literal
    return FieldMatch(source, tuple(path), operator.group(1), expected)


@dataclass(frozen=True)
class RecordFilter:
    """What a record must contain to be shown; every criterion given must hold. Substrings are matched against the
    bytes decoded as UTF-8 (undecodable bytes never match); a header criterion ``name: text`` wants a header of that
    name whose value contains text, a bare ``text`` a header whose name or value contains it."""

    key: str = ""
    value: str = ""
    header: str = ""
    field_match: FieldMatch | None = None

    @property
    def empty(self) -> bool:
        return not (self.key or self.value or self.header or self.field_match)

    def describe(self) -> str:
        parts = [f"key contains {self.key!r}" if self.key else "",
                 f"value contains {self.value!r}" if self.value else "",
                 f"a header matches {self.header!r}" if self.header else "",
                 f"value's {self.field_match.text}" if self.field_match else ""]
        return ", ".join(part for part in parts if part) or "every record"

    def matches(self, key: bytes | None, value: bytes | None, headers: Iterable[tuple[str, bytes | None]]) -> bool:
        if self.key and self.key not in _text(key):
            return False
        if self.value and self.value not in _text(value):
            return False
        if self.header and not self._header_matches(headers):
            return False
        if self.field_match is not None:
            try:
                document = json.loads(value) if value is not None else _MISSING
            except ValueError:
                return False
            if document is _MISSING or not self.field_match.matches(document):
                return False
        return True

    def _header_matches(self, headers: Iterable[tuple[str, bytes | None]]) -> bool:
        name, separator, wanted = self.header.partition(":")
        if separator:
            name, wanted = name.strip(), wanted.strip()
            return any(header == name and wanted in _text(value) for header, value in headers)
        return any(self.header in header or self.header in _text(value) for header, value in headers)


def _text(data: bytes | None) -> str:
    if data is None:
        return ""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return ""


@dataclass
class SearchResult:
    """The matching records, how many records were read, and per partition the range read: ``next_offsets`` is
    where a further search goes on (the first offset not read), ``stop_offsets`` where the range ends."""

    records: list[Any] = field(default_factory=list)
    scanned: int = 0
    start_offsets: dict[int, int] = field(default_factory=dict)
    next_offsets: dict[int, int] = field(default_factory=dict)
    stop_offsets: dict[int, int] = field(default_factory=dict)
    stopped_because: str = ""

    @property
    def complete(self) -> bool:
        return all(self.next_offsets[p] >= self.stop_offsets[p] for p in self.stop_offsets)


def search_records(admin: Any, new_consumer: Callable[[], Any], topic: str, partitions: list[int],
                   record_filter: RecordFilter, *, start_offsets: dict[int, int] | None = None,
                   from_timestamp_ms: int | None = None, to_timestamp_ms: int | None = None,
                   max_scanned: int = DEFAULT_MAX_SCANNED, max_results: int = 500,
                   timeout_s: float = 10.0, make_record: Callable[[Any], Any]) -> SearchResult:
    """Scan ``partitions`` of ``topic`` forward and keep the records ``record_filter`` accepts (see the module
    docstring for the limits). Each partition starts at ``start_offsets`` (a continued search), else at the first
    record at or after ``from_timestamp_ms``, else at its log start; and ends before the first record at or after
    ``to_timestamp_ms``, else at its log end offset as of the search's start."""
    max_scanned = max(1, min(max_scanned, MAX_SCANNED))
    tps = [TopicPartition(topic, partition) for partition in partitions]
    starts = admin.beginning_offsets(tps)
    ends = admin.end_offsets(tps)
    result = SearchResult()
    from_found = admin.list_offsets(dict.fromkeys(tps, from_timestamp_ms)) if from_timestamp_ms is not None else {}
    to_found = admin.list_offsets(dict.fromkeys(tps, to_timestamp_ms)) if to_timestamp_ms is not None else {}
    for tp in tps:
        stop = ends[tp]
        if tp in to_found and to_found[tp] is not None and to_found[tp].offset >= 0:
            stop = min(stop, to_found[tp].offset)
        if start_offsets is not None and tp.partition in start_offsets:
            start = start_offsets[tp.partition]
        elif tp in from_found:
            found = from_found[tp]
            start = ends[tp] if found is None or found.offset < 0 else found.offset
        else:
            start = starts[tp]
        start = max(starts[tp], min(start, stop))
        result.start_offsets[tp.partition] = result.next_offsets[tp.partition] = start
        result.stop_offsets[tp.partition] = stop
    remaining = [tp for tp in tps if result.next_offsets[tp.partition] < result.stop_offsets[tp.partition]]
    if not remaining:
        result.stopped_because = "the end of the range"
        return result
    consumer = new_consumer()
    try:
        consumer.assign(remaining)
        for tp in remaining:
            consumer.seek(tp, result.next_offsets[tp.partition])
        deadline = time.monotonic() + timeout_s
        while remaining:
            if result.scanned >= max_scanned:
                result.stopped_because = f"the scan limit of {max_scanned} records"
                break
            if len(result.records) >= max_results:
                result.stopped_because = f"the result limit of {max_results} records"
                break
            if time.monotonic() >= deadline:
                result.stopped_because = f"the time limit of {timeout_s:g} s"
                break
            for record in consumer.poll(0.5, max_records=min(500, max_scanned - result.scanned)):
                stop = result.stop_offsets[record.partition]
                if record.offset < result.next_offsets[record.partition] or record.offset >= stop:
                    continue
                if result.scanned >= max_scanned or len(result.records) >= max_results:
                    break
                result.scanned += 1
                result.next_offsets[record.partition] = record.offset + 1
                if record_filter.matches(record.key, record.value, record.headers):
                    result.records.append(make_record(record))
            still = []
            for tp in remaining:
                # Offsets may have gaps (transaction markers, compaction): the consumer's position says it is past.
                if result.next_offsets[tp.partition] < result.stop_offsets[tp.partition]:
                    position = consumer.position(tp)
                    if position >= result.stop_offsets[tp.partition]:
                        result.next_offsets[tp.partition] = result.stop_offsets[tp.partition]
                    else:
                        still.append(tp)
            remaining = still
        else:
            result.stopped_because = "the end of the range"
    finally:
        consumer.close(timeout=1.0)
    result.records.sort(key=lambda record: (record.timestamp, record.partition, record.offset))
    return result


def rendered(record: Any) -> dict[str, Any]:
    """A consumed record as the live tail sends it to the page (rendered as the browser's table shows it)."""
    key, value = render_bytes(record.key), render_bytes(record.value)
    return {"partition": record.partition, "offset": record.offset, "timestamp": record.timestamp,
            "key": {"kind": key.kind, "text": key.text}, "value": {"kind": value.kind, "text": value.text},
            "headers": [[name, render_bytes(data).text] for name, data in record.headers]}
