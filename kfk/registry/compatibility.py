"""Compatibility levels, as Confluent's registry names them, and which earlier versions a new schema is checked
against in which direction: BACKWARD (the new schema reads data the previous one wrote: consumers upgrade first),
FORWARD (the previous schema reads data the new one writes: producers upgrade first), FULL (both); the _TRANSITIVE
levels check every earlier live version instead of only the latest; NONE checks nothing."""

from __future__ import annotations

from collections.abc import Sequence

from kfk.registry.schema_types import Incompatibility, ParsedSchema

__all__ = ["COMPATIBILITY_LEVELS", "DEFAULT_COMPATIBILITY", "check_compatibility"]

COMPATIBILITY_LEVELS = ("NONE", "BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL",
                        "FULL_TRANSITIVE")
DEFAULT_COMPATIBILITY = "BACKWARD"  # Confluent's default (schema.compatibility.level)


def check_compatibility(level: str, candidate: ParsedSchema,
                        previous: Sequence[tuple[int, ParsedSchema]]) -> list[tuple[int, Incompatibility]]:
    """Why ``candidate`` may not follow ``previous`` (live versions, oldest first, with their version numbers)
    under ``level``: each reason paired with the version it concerns. Empty means compatible."""
    if level == "NONE" or not previous:
        return []
    against = previous if level.endswith("_TRANSITIVE") else previous[-1:]
    backward = level.startswith(("BACKWARD", "FULL"))
    forward = level.startswith(("FORWARD", "FULL"))
    found: list[tuple[int, Incompatibility]] = []
    for version, old in reversed(against):
        if old.schema_type != candidate.schema_type:
            found.append((version, Incompatibility("SCHEMA_TYPE_CHANGED", "/", f"The schema type changed from "
                                                   f"{old.schema_type} to {candidate.schema_type}")))
            continue
        if backward:
            found += [(version, reason) for reason in candidate.incompatibilities(old)]
        if forward:
            found += [(version, reason) for reason in old.incompatibilities(candidate)]
    return found
