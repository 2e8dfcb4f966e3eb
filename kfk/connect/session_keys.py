"""Session keys for the workers' internal REST requests (KIP-507, the ``sessioned`` group protocol).

The leader of a sessioned group generates a random key, writes it to the config topic (key ``session-key``, value
{"key": base64, "algorithm": "HmacSHA256", "creation-timestamp": ms}, Kafka's record) and writes a new one every
inter.worker.key.ttl.ms. A follower that hands its connector's task configs to the leader (POST
/connectors/{name}/tasks: Java workers do; kfk's write the config topic themselves) signs the request body with it:
X-Connect-Authorization holds the base64 HMAC, X-Connect-Request-Signature-Algorithm its algorithm. The leader
refuses an unsigned request (400) and a wrong signature (403), as Kafka's does.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kfk.connect.errors import BadRequestException, ConnectException

__all__ = ["SESSION_KEY_RECORD", "SIGNATURE_HEADER", "SIGNATURE_ALGORITHM_HEADER", "SessionKey", "ForbiddenException",
           "ServiceUnavailableException", "verify_signature"]

SESSION_KEY_RECORD = "session-key"
SIGNATURE_HEADER = "X-Connect-Authorization"
SIGNATURE_ALGORITHM_HEADER = "X-Connect-Request-Signature-Algorithm"
#: Kafka's default inter.worker.key.generation.algorithm, inter.worker.signature.algorithm and
#: inter.worker.verification.algorithms, the only one kfk's workers use.
DEFAULT_ALGORITHM = "HmacSHA256"
#: Java's KeyGenerator default size for HmacSHA256, in bytes.
DEFAULT_KEY_BYTES = 32


class ForbiddenException(ConnectException):
    """An internal request whose signature does not match the session key (REST 403)."""


class ServiceUnavailableException(ConnectException):
    """The worker cannot serve the request yet (REST 503)."""


@dataclass(frozen=True)
class SessionKey:
    key: bytes
    algorithm: str
    creation_timestamp_ms: int

    @classmethod
    def generate(cls, now_ms: int, algorithm: str = DEFAULT_ALGORITHM) -> SessionKey:
        return cls(os.urandom(DEFAULT_KEY_BYTES), algorithm, now_ms)

    @classmethod
    def from_record(cls, value: Mapping[str, Any]) -> SessionKey:
        return cls(base64.b64decode(value["key"]), value["algorithm"], int(value["creation-timestamp"]))

    def record(self) -> dict[str, Any]:
        return {"key": base64.b64encode(self.key).decode(), "algorithm": self.algorithm,
                "creation-timestamp": self.creation_timestamp_ms}

    def sign(self, body: bytes) -> str:
        """The request body's HmacSHA256 signature, base64."""
        return base64.b64encode(hmac.new(self.key, body, hashlib.sha256).digest()).decode()


def verify_signature(key: SessionKey | None, headers: Mapping[str, str], body: bytes) -> None:
    """Kafka's checks of a signed internal request, with its answers."""
    signature, algorithm = headers.get(SIGNATURE_HEADER), headers.get(SIGNATURE_ALGORITHM_HEADER)
    if signature is None or algorithm is None:
        raise BadRequestException("Internal request missing required signature")
    if algorithm != DEFAULT_ALGORITHM:
        raise BadRequestException(
            f"This worker does not support the '{algorithm}' key signing algorithm used by other workers. This worker "
            f"is currently configured to use: [{DEFAULT_ALGORITHM}]. Check that all workers' configuration files "
            "permit the same set of signature algorithms, and correct any misconfigured worker and restart it.")
    if key is None:
        raise ServiceUnavailableException("This worker is still starting up and has not been able to read a session "
                                          "key from the config topic yet")
    if not hmac.compare_digest(key.sign(body), signature):
        raise ForbiddenException("Internal request contained invalid signature.")
