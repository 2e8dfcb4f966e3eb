"""The console's rendering of record keys, values and headers: null, JSON, text and hex."""

from kfk.ui.rendering import render_bytes


def test_null_is_shown_as_null() -> None:
    rendered = render_bytes(None)
    assert (rendered.kind, rendered.text, rendered.size) == ("null", "null", 0)


def test_json_objects_and_arrays_are_pretty_printed() -> None:
    rendered = render_bytes(b'{"b": [1, 2], "a": "\xc3\xa9"}')
    assert rendered.kind == "json"
    assert rendered.text == '{\n  "b": [\n    1,\n    2\n  ],\n  "a": "\u00e9"\n}'
    assert render_bytes(b"[1]").kind == "json"


def test_text_that_only_looks_like_json_stays_text() -> None:
    assert render_bytes(b"{not json").kind == "text"
    assert render_bytes(b"42").kind == "text"  # a bare number is text: only objects and arrays are reformatted


def test_utf8_text_with_tabs_and_newlines_is_text() -> None:
    rendered = render_bytes("line one\n\tzwei \u00fc".encode())
    assert (rendered.kind, rendered.text) == ("text", "line one\n\tzwei \u00fc")


def test_binary_and_control_characters_are_hex() -> None:
    rendered = render_bytes(bytes(range(20)))
    assert rendered.kind == "hex"
    assert rendered.text.splitlines() == [
        "00000000  00 01 02 03 04 05 06 07 08 09 0a 0b 0c 0d 0e 0f  ................",
        "00000010  10 11 12 13                                      ....",
    ]
    assert render_bytes(b"\xff\xfeabc").kind == "hex"  # not UTF-8
    assert render_bytes(b"ok\x00").kind == "hex"  # UTF-8, but a NUL is not text
