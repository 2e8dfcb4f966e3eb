"""Bytes shown as text the way Kafka's Java tools show them: `new String(bytes, UTF_8)`.

Kafka's DumpLogSegments prints keys and payloads through Java's UTF-8 decoder, which replaces malformed input
with U+FFFD by its own rule, not by the Unicode "maximal subpart" rule Python's ``errors="replace"`` follows.
They differ on encoded surrogates (ED A0..BF ..: one replacement in Java, one per byte in Python) and on a
sequence cut short by the end of the input. Binary payloads (KRaft records, topic ids) hit both, so `kfk
dump-log` decodes as Java does to print the same line (tests/interop/test_java_text.py checks it against Java).
"""

from __future__ import annotations

from decimal import Decimal

REPLACEMENT = "\ufffd"


def _continuation(byte: int) -> bool:
    return byte & 0xC0 == 0x80


def _bad_second_of_three(lead: int, second: int) -> bool:
    """Java's test on a 3-byte sequence's second byte: an overlong E0 form, or not a continuation byte."""
    return (lead == 0xE0 and second & 0xE0 == 0x80) or not _continuation(second)


def _bad_second_of_four(lead: int, second: int) -> bool:
    """Java's test on a 4-byte sequence's second byte: out of the lead's range, or not a continuation byte."""
    return (lead == 0xF0 and not 0x90 <= second <= 0xBF) or (lead == 0xF4 and second & 0xF0 != 0x80) \
        or not _continuation(second)


def java_utf8(data: bytes | memoryview) -> str:
    """`new String(data, StandardCharsets.UTF_8)` as Java 17 computes it."""
    data = bytes(data)
    try:
        return data.decode("utf-8")  # well-formed: both decoders agree
    except UnicodeDecodeError:
        pass
    out: list[str] = []
    position, end = 0, len(data)
    while position < end:
        lead = data[position]
        position += 1
        if lead < 0x80:
            out.append(chr(lead))
        elif 0xC2 <= lead <= 0xDF:
            if position == end:
                out.append(REPLACEMENT)
                break
            if _continuation(data[position]):
                out.append(chr((lead & 0x1F) << 6 | data[position] & 0x3F))
                position += 1
            else:
                out.append(REPLACEMENT)
        elif 0xE0 <= lead <= 0xEF:
            if position + 1 < end:
                second, third = data[position], data[position + 1]
                if _bad_second_of_three(lead, second):
                    out.append(REPLACEMENT)  # the lead alone is malformed
                elif not _continuation(third):
                    out.append(REPLACEMENT)  # lead and second byte together
                    position += 1
                else:
                    code = (lead & 0x0F) << 12 | (second & 0x3F) << 6 | third & 0x3F
                    out.append(REPLACEMENT if 0xD800 <= code <= 0xDFFF else chr(code))
                    position += 2
            elif position < end and _bad_second_of_three(lead, data[position]):
                out.append(REPLACEMENT)
            else:
                out.append(REPLACEMENT)  # cut short by the end: Java stops there
                break
        elif 0xF0 <= lead <= 0xF7:
            if position + 2 < end:
                second, third, fourth = data[position:position + 3]
                code = (lead & 0x07) << 18 | (second & 0x3F) << 12 | (third & 0x3F) << 6 | fourth & 0x3F
                if _continuation(second) and _continuation(third) and _continuation(fourth) \
                        and 0x10000 <= code <= 0x10FFFF:
                    out.append(chr(code))
                    position += 3
                    continue
                out.append(REPLACEMENT)
                if lead > 0xF4 or _bad_second_of_four(lead, second):
                    continue
                position += 1 if not _continuation(third) else 2
            elif lead > 0xF4 or (position < end and _bad_second_of_four(lead, data[position])):
                out.append(REPLACEMENT)
            else:
                out.append(REPLACEMENT)
                position += 1
                if position < end and not _continuation(data[position]):
                    continue
                break
        else:  # a continuation byte without a lead, C0, C1, F8..FF
            out.append(REPLACEMENT)
    return "".join(out)


def java_double(value: float) -> str:
    """A double as Java's Double.toString prints it (kafka-configs.sh prints quotas so): the shortest digits that
    read back to the value, plain between 10^-3 and 10^7 (`1048576.0`), else as `1.0E7`."""
    if value != value:
        return "NaN"
    if value in (float("inf"), float("-inf")):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0 or 1e-3 <= abs(value) < 1e7:
        return repr(value)  # Python's repr is the shortest round-trip form, plain in this range
    negative, digits, exponent = Decimal(repr(value)).as_tuple()
    text = "".join(map(str, digits))
    power = len(text) - 1 + exponent  # the decimal exponent of the first digit
    text = text.rstrip("0")
    return f"{'-' if negative else ''}{text[0]}.{text[1:] or '0'}E{power}"
