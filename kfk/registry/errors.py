"""The registry's refusals, each with the HTTP status and the numeric error code Confluent's Schema Registry answers
with, so that clients written for it (confluent-kafka's SchemaRegistryClient raises SchemaRegistryError carrying
both) branch on them unchanged."""

from __future__ import annotations

__all__ = ["RegistryError", "subject_not_found", "version_not_found", "schema_not_found", "invalid_schema",
           "invalid_version", "INCOMPATIBLE_SCHEMA"]

# Confluent's codes: the HTTP status followed by a two-digit detail.
SUBJECT_NOT_FOUND = 40401
VERSION_NOT_FOUND = 40402
SCHEMA_NOT_FOUND = 40403
SUBJECT_SOFT_DELETED = 40404
SUBJECT_NOT_SOFT_DELETED = 40405
VERSION_SOFT_DELETED = 40406
VERSION_NOT_SOFT_DELETED = 40407
SUBJECT_COMPATIBILITY_NOT_CONFIGURED = 40408
SUBJECT_MODE_NOT_CONFIGURED = 40409
INCOMPATIBLE_SCHEMA = 409
INVALID_SCHEMA = 42201
INVALID_VERSION = 42202
INVALID_COMPATIBILITY_LEVEL = 42203
INVALID_MODE = 42204
OPERATION_NOT_PERMITTED = 42205
REFERENCE_EXISTS = 42206
STORE_ERROR = 50001
OPERATION_TIMEOUT = 50002
FORWARDING_ERROR = 50003


class RegistryError(Exception):
    """A request the registry refuses: ``status`` is the HTTP status, ``error_code`` Confluent's code."""

    def __init__(self, status: int, error_code: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.error_code = error_code
        self.message = message

    def to_json(self) -> dict:
        return {"error_code": self.error_code, "message": self.message}


def subject_not_found(subject: str) -> RegistryError:
    return RegistryError(404, SUBJECT_NOT_FOUND, f"Subject '{subject}' not found.")


def version_not_found(version: int | str) -> RegistryError:
    return RegistryError(404, VERSION_NOT_FOUND, f"Version {version} not found.")


def schema_not_found(schema_id: int | None = None) -> RegistryError:
    return RegistryError(404, SCHEMA_NOT_FOUND, "Schema not found" if schema_id is None
                         else f"Schema {schema_id} not found")


def invalid_schema(detail: str) -> RegistryError:
    return RegistryError(422, INVALID_SCHEMA, f"Invalid schema: {detail}")


def invalid_version(version: str) -> RegistryError:
    return RegistryError(422, INVALID_VERSION,
                         f"The specified version '{version}' is not a valid version id. Allowed values are between "
                         "[1, 2^31-1] and the string \"latest\"")
