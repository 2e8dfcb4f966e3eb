"""Kafka's rules for topic names (org.apache.kafka.common.internals.Topic), and the internal topics' names.

A name is 1 to 249 characters of [a-zA-Z0-9._-], and neither "." nor "..": it becomes a folder name
(`<topic>-<partition>`) and part of metric names. Because metric systems often turn '.' into '_', two topics that
differ only there ("a.b", "a_b") would report under one name, so the controller refuses to create a topic that
collides with an existing one that way (kfk.common.topic_collisions: the tools warn about such names too).
"""

from __future__ import annotations

import re

from kfk.common.internal_topics import (
    CLUSTER_MANAGED_TOPIC_NAMES,
    GROUP_METADATA_TOPIC_NAME,
    SHARE_GROUP_STATE_TOPIC_NAME,
    TRANSACTION_STATE_TOPIC_NAME,
)
from kfk.errors import InvalidTopicError


INTERNAL_TOPICS = frozenset({GROUP_METADATA_TOPIC_NAME, TRANSACTION_STATE_TOPIC_NAME, SHARE_GROUP_STATE_TOPIC_NAME})

MAX_NAME_LENGTH = 249
_LEGAL = re.compile(r"[a-zA-Z0-9._-]+")


def validate_topic_name(name: str) -> None:
    """Raise InvalidTopicError with Kafka's message if `name` cannot be a topic name."""
    if not name:
        raise InvalidTopicError("Topic name is illegal, it can't be empty")
    if name in (".", ".."):
        raise InvalidTopicError('Topic name cannot be "." or ".."')
    if len(name) > MAX_NAME_LENGTH:
        raise InvalidTopicError(
            f"Topic name is illegal, it can't be longer than {MAX_NAME_LENGTH} characters, Topic name: {name}"
        )
    if _LEGAL.fullmatch(name) is None:
        raise InvalidTopicError(
            f"Topic name \"{name}\" is illegal, it contains a character other than ASCII alphanumerics, '.', '_' "
            "and '-'"
        )


def is_valid_topic_name(name: str) -> bool:
    try:
        validate_topic_name(name)
    except InvalidTopicError:
        return False
    return True


def is_internal(name: str) -> bool:
    return name in INTERNAL_TOPICS


def is_managed_by_the_cluster(name: str) -> bool:
    """An internal topic or the metadata log: users may neither delete it nor change its partition count."""
    return name in CLUSTER_MANAGED_TOPIC_NAMES
