"""How the console shows a record's key, value and headers: bytes are not text, and guessing wrong either hides data
(a binary value shown as mojibake) or buries it (JSON on one 2,000-character line).

The rule, in order: absent (null) stays visibly null; valid UTF-8 that parses as a JSON object or array is
pretty-printed; other valid UTF-8 without control characters (tabs and newlines allowed) is text; anything else is
hex, 16 bytes per line with an offset column, as `xxd` and Kafka tools' hex dumps show it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Literal

__all__ = ["RenderedBytes", "render_bytes"]

RenderKind = Literal["null", "json", "text", "hex"]

_HEX_LINE = 16


@dataclass(frozen=True)
class RenderedBytes:
    kind: RenderKind
    text: str
    size: int


def render_bytes(data: bytes | None) -> RenderedBytes:
    """The console's view of ``data``: see the module docstring for the rule."""
    if data is None:
        return RenderedBytes("null", "null", 0)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return RenderedBytes("hex", _hex_dump(data), len(data))
    stripped = text.lstrip()
    if stripped[:1] in ("{", "["):
        try:
            return RenderedBytes("json", json.dumps(json.loads(text), indent=2, ensure_ascii=False), len(data))
        except ValueError:
            pass
    if any(ord(char) < 0x20 and char not in "\t\n\r" or ord(char) == 0x7F for char in text):
        return RenderedBytes("hex", _hex_dump(data), len(data))
    return RenderedBytes("text", text, len(data))


def _hex_dump(data: bytes) -> str:
    lines = []
    for start in range(0, len(data), _HEX_LINE):
        chunk = data[start:start + _HEX_LINE]
        printable = "".join(chr(byte) if 0x20 <= byte < 0x7F else "." for byte in chunk)
        lines.append(f"{start:08x}  {chunk.hex(' '):<{_HEX_LINE * 3 - 1}}  {printable}")
    return "\n".join(lines)
