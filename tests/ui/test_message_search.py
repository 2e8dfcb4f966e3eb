"""The message browser's filters on their own (no broker: they are pure functions of a record's bytes): the
JSONPath-like field match, its parse errors, and every criterion of a RecordFilter having to hold."""

from __future__ import annotations

import json

import pytest

from kfk.ui.message_search import RecordFilter, parse_field_match

ORDER = json.dumps({"user": {"id": 42, "name": "Ada Lovelace", "vip": True}, "items": [{"sku": "A-1"}],
                    "total": 19.5, "odd key": "yes"}).encode()


@pytest.mark.parametrize(("expression", "matches"), [
    ("$.user.id == 42", True), ("$.user.id == 42.0", True), ("$.user.id != 42", False), ("$.user.id >= 43", False),
    ("$.user.id < 43", True), ('$.user.name ~ "Love"', True), ("$.user.name ~ Ada", True),
    ('$.user.name == "Ada"', False), ("$.user.vip == true", True), ("$.user.vip == 1", False),
    ('$.items[0].sku == "A-1"', True), ("$.items[1].sku", False), ("$.total > 19", True),
    ('$["odd key"] == "yes"', True), ("$.user", True), ("$.missing", False), ("$.missing != 1", False),
    ("$.user.name > 5", False),  # a string is not ordered against a number: no match, no error
])
def test_field_match(expression: str, matches: bool) -> None:
    assert RecordFilter(field_match=parse_field_match(expression)).matches(None, ORDER, []) is matches


@pytest.mark.parametrize(("expression", "message"), [
    ("user.id == 42", "a JSON field starts with $"),
    ("$ == 42", "names at least one field after $"),
    ("$.user.id = 42", "comes ==, !=, <, <=, >, >= or ~ and a value"),
    ("$.user.id ==", "compares with nothing"),
])
def test_field_match_errors_say_what_to_type(expression: str, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("$", r"\$").replace("|", r"\|")):
        parse_field_match(expression)


def test_every_criterion_must_hold() -> None:
    headers = [("source", b"mobile"), ("trace", b"\xff\xfe")]
    assert RecordFilter(key="ord", value="Ada", header="source: mob").matches(b"order-1", ORDER, headers)
    assert not RecordFilter(key="ord", value="Babbage").matches(b"order-1", ORDER, headers)
    assert RecordFilter(header="mobile").matches(None, None, headers)  # a bare text: a header's name or value
    assert RecordFilter(header="trace").matches(None, None, headers)
    assert not RecordFilter(header="trace: \xff").matches(None, None, headers)  # undecodable bytes never match
    assert not RecordFilter(header="source: web").matches(None, None, headers)
    assert not RecordFilter(field_match=parse_field_match("$.a")).matches(None, b"not json", [])
    assert not RecordFilter(field_match=parse_field_match("$.a")).matches(None, None, [])
    assert RecordFilter().empty and RecordFilter().matches(None, None, [])
