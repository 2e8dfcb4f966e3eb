"""ControllerResult: what a controller operation decided (Kafka's ControllerResult).

The operations of kfk/controller/ are pure: they read the current MetadataImage and a request and return the
metadata records that carry out the change plus the response to send once those records are committed. Nothing is
written and no state changes until the QuorumController appends the records through the backend; a validate_only
request is the same computation with the records dropped.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Generic, NamedTuple, TypeVar

from kfk.errors import ErrorCode, KafkaError
from kfk.protocol.message import Message

T = TypeVar("T")


@dataclass(frozen=True)
class ControllerResult(Generic[T]):
    response: T
    records: list[Message] = field(default_factory=list)


class ApiError(NamedTuple):
    """An error code and its message, as a response carries them (Kafka's ApiError)."""

    error_code: ErrorCode
    message: str | None = None

    @classmethod
    def from_exception(cls, error: KafkaError) -> ApiError:
        return cls(error.error_code, error.message)

    @property
    def is_failure(self) -> bool:
        return self.error_code != ErrorCode.NONE


NONE = ApiError(ErrorCode.NONE)
