"""Turning a response's error code into the exception to raise or report, with what was being asked for.

kfk.errors maps codes to classes and holds Kafka's default message per code; the client adds the context (which
topic, partition or group) so that the one line a user sees says what failed, and why, in Kafka's words.
"""

from __future__ import annotations

from kfk.errors import ERROR_INFO, ErrorCode, KafkaError, error_for_code

__all__ = ["response_error"]


def response_error(code: int, context: str, message: str | None = None) -> KafkaError:
    """The exception for a non-zero ``code``: "<context>: <broker's message or Kafka's default message>"."""
    error_class = error_for_code(code)
    if not message:
        try:
            message = ERROR_INFO[ErrorCode(code)].message
        except ValueError:
            message = f"unknown error code {code}"
    return error_class(f"{context}: {message}")
