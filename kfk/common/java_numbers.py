"""Numbers as Java prints them: Double.toString and Float.toString, which Kafka's tools and Jackson (so Connect's
JsonConverter) write. Shortest digits that read back to the value, plain between 10^-3 and 10^7, else E notation.
"""

from __future__ import annotations

import math
import struct
from decimal import Decimal


def _java_text(value: float, shortest: str) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if math.copysign(1, value) < 0 else "0.0"
    sign = "-" if value < 0 else ""
    digits_tuple, exponent = Decimal(shortest.lstrip("-")).normalize().as_tuple()[1:]
    digits = "".join(map(str, digits_tuple))
    point = len(digits) + exponent  # the decimal point's place in the digits
    if 1e-3 <= abs(value) < 1e7:
        if point <= 0:
            return f"{sign}0.{'0' * -point}{digits}"
        whole, fraction = digits[:point].ljust(point, "0"), digits[point:]
        return f"{sign}{whole}.{fraction or '0'}"
    return f"{sign}{digits[0]}.{digits[1:] or '0'}E{point - 1}"


def java_double(value: float) -> str:
    """`value` as Java's Double.toString writes it (`1.0`, `0.001`, `1.0E7`, `1.0E-4`)."""
    return _java_text(value, repr(value))


def java_float(value: float) -> str:
    """`value` (a float32) as Java's Float.toString writes it: the shortest digits that read back to the same float32."""
    if math.isnan(value) or math.isinf(value) or value == 0:
        return _java_text(value, "0")
    single = struct.unpack(">f", struct.pack(">f", value))[0]
    for precision in range(1, 10):
        text = f"{single:.{precision}g}"
        if struct.unpack(">f", struct.pack(">f", float(text)))[0] == single:
            return _java_text(single, text)
    return _java_text(single, repr(single))
