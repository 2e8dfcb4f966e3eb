"""Kafka's text form of a Uuid (topic ids, directory ids, delegation token ids): URL-safe base64 of the 16 bytes
without padding, 22 characters, as Kafka's tools print them and its files and znodes hold them."""

from __future__ import annotations

import base64
import uuid


def uuid_to_base64(value: uuid.UUID) -> str:
    """Kafka's Uuid.toString."""
    return base64.urlsafe_b64encode(value.bytes).decode("ascii").rstrip("=")


def random_base64_uuid() -> str:
    """Kafka's Uuid.randomUuid().toString(): a random id's text, never one that starts with '-' (it would read as a
    command-line flag), as Kafka rerolls it (cluster ids, delegation token ids)."""
    while True:
        text = uuid_to_base64(uuid.uuid4())
        if not text.startswith("-"):
            return text


def uuid_from_base64(text: str) -> uuid.UUID:
    """Kafka's Uuid.fromString; raises ValueError for anything that is not 16 bytes of URL-safe base64."""
    if len(text) != 22:
        raise ValueError(f"Input string with prefix `{text[:22]}` is too long/short to be decoded as a base64 UUID")
    try:
        raw = base64.urlsafe_b64decode(text + "==")
    except (ValueError, TypeError) as exc:
        raise ValueError(f"{text!r} is not a base64 UUID") from exc
    return uuid.UUID(bytes=raw)
