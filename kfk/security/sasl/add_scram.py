"""kafka-storage format's `--add-scram` argument (KIP-900): a SCRAM credential created before the cluster first starts,
so that brokers and clients can authenticate with SCRAM from the very first connection.

The forms, as Kafka 4.0's tool reads them:
`SCRAM-SHA-256=[name=alice,password=alice-secret]` (a random salt, 4096 iterations unless `iterations=N`) and
`SCRAM-SHA-512=[name=alice,iterations=8192,salt="<base64>",saltedpassword="<base64>"]` (the salted password given,
no password ever typed). Kafka's parsing rules are kept because scripts are written against them: the argument is
trimmed, the settings are split on every comma with Java's trailing-empty-fields rule, keys are not trimmed, one
pair of double quotes around a value is dropped, a repeated key keeps its last value, and `password` wins over
`saltedpassword`. Every refusal is Kafka's message (`AddScramError`), given before anything is written.
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass

from kfk.errors import InvalidConfigurationError
from kfk.security.sasl.scram import (
    DEFAULT_ITERATIONS,
    MAX_ITERATIONS,
    MIN_ITERATIONS,
    ScramCredential,
    ScramMechanism,
    credential_from_password,
    credential_from_salted_password,
)

#: Integer.parseInt's syntax: an optional sign and decimal digits, nothing else (no spaces, no underscores).
_JAVA_INT = re.compile(r"[+-]?[0-9]+")


class AddScramError(InvalidConfigurationError):
    """An --add-scram argument that kafka-storage format refuses."""


@dataclass(frozen=True)
class ScramCredentialArgument:
    """One --add-scram argument: the user, the mechanism and the credential stored for them."""

    name: str
    mechanism: ScramMechanism
    credential: ScramCredential


def parse_add_scram(argument: str) -> ScramCredentialArgument:
    """`MECHANISM=[key=value,...]` -> the credential to bootstrap (the password salted here); AddScramError."""
    argument = argument.strip()
    mechanism_name, equals, settings_text = argument.partition("=")
    if not equals:
        raise AddScramError(f"Failed to find equals sign in SCRAM argument '{argument}'")
    mechanism = ScramMechanism.from_mechanism_name(mechanism_name)
    if mechanism is ScramMechanism.UNKNOWN:
        raise AddScramError(f"The add-scram mechanism {mechanism_name} is not supported.")
    if not settings_text.startswith("["):
        raise AddScramError("Expected configuration string to start with [")
    if not settings_text.endswith("]"):
        raise AddScramError("Expected configuration string to end with ]")
    settings = dict(_setting(component) for component in _java_split(settings_text[1:-1]))
    name = settings.pop("name", None)
    if name is None:
        raise AddScramError("You must supply 'name' to add-scram")
    salt_text = settings.pop("salt", None)
    salt = None if salt_text is None else _base64(salt_text, "Failed to decode given salt: ")
    iterations_text = settings.pop("iterations", None)
    if iterations_text is not None and not _JAVA_INT.fullmatch(iterations_text):
        raise AddScramError(f"Failed to parse iterations count: {iterations_text}")
    iterations = DEFAULT_ITERATIONS if iterations_text is None else int(iterations_text)
    password = settings.pop("password", None)
    salted_text = settings.pop("saltedpassword", None)
    if password is None:
        if salted_text is None:
            raise AddScramError("You must supply one of 'password' or 'saltedpassword' to add-scram")
        if salt is None:
            raise AddScramError("You must supply 'salt' with 'saltedpassword' to add-scram")
        salted = _base64(salted_text, "Failed to decode given saltedPassword: ")
    if settings:
        raise AddScramError(f"Unknown SCRAM configurations: {', '.join(sorted(settings))}")
    if iterations < MIN_ITERATIONS:
        raise AddScramError(f"The 'iterations' value must be >= {MIN_ITERATIONS} for add-scram using "
                            f"{mechanism.name}")
    if iterations > MAX_ITERATIONS:
        raise AddScramError(f"The 'iterations' value must be <= {MAX_ITERATIONS} for add-scram using "
                            f"{mechanism.name}")
    if password is not None:
        credential = credential_from_password(mechanism, password, iterations, salt)
    else:
        assert salt is not None
        credential = credential_from_salted_password(mechanism, salted, salt, iterations)
    return ScramCredentialArgument(name, mechanism, credential)


def _java_split(text: str) -> list[str]:
    """String.split(","): empty fields at the end are dropped, except that a text without a comma is one field."""
    fields = text.split(",")
    if len(fields) > 1:
        while fields and not fields[-1]:
            fields.pop()
    return fields


def _setting(component: str) -> tuple[str, str]:
    key, equals, value = component.partition("=")
    if not equals:
        raise AddScramError(f"No equals sign found in SCRAM component: {component}")
    if len(value) >= 2 and value.startswith('"') and value.endswith('"'):
        value = value[1:-1]
    return key, value


def _base64(text: str, failure: str) -> bytes:
    """Base64 as Java's basic decoder reads it: the standard alphabet, the padding optional."""
    try:
        return base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
    except (binascii.Error, ValueError):
        raise AddScramError(failure + text) from None
