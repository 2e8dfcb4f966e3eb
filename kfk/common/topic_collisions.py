"""Topic names that metrics cannot tell apart (Kafka's Topic.hasCollisionChars and Topic.unifyCollisionChars).

Metric systems often turn '.' into '_', so "a.b" and "a_b" would report under one name. The controller refuses a
new topic that collides that way with an existing one (kfk.controller.replication_control); `kfk topics create`
warns about any name with either character, as kafka-topics.sh does on the client side. The broker logs nothing
about it: Kafka's does not, and the internal topics (__consumer_offsets...) all have an underscore.
"""

from __future__ import annotations


def has_collision_chars(name: str) -> bool:
    return "_" in name or "." in name


def unify_collision_chars(name: str) -> str:
    """The name metrics would see: '.' and '_' are the same character there."""
    return name.replace(".", "_")
