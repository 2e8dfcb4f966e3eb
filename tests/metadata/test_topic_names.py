"""Kafka's topic name rules (org.apache.kafka.common.internals.Topic), with its messages."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kfk.common.topic_collisions import has_collision_chars, unify_collision_chars
from kfk.errors import InvalidTopicError
from kfk.metadata.topic_names import is_internal, is_valid_topic_name, validate_topic_name


@pytest.mark.parametrize("name", ["orders", "a", "A.b_c-9", "x" * 249, "__consumer_offsets", "..."])
def test_legal_names(name: str) -> None:
    validate_topic_name(name)
    assert is_valid_topic_name(name)


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("", "Topic name is illegal, it can't be empty"),
        (".", 'Topic name cannot be "." or ".."'),
        ("..", 'Topic name cannot be "." or ".."'),
        ("x" * 250, f"Topic name is illegal, it can't be longer than 249 characters, Topic name: {'x' * 250}"),
        ("bad name", "Topic name \"bad name\" is illegal, it contains a character other than ASCII alphanumerics, "
                     "'.', '_' and '-'"),
        ("café", "Topic name \"café\" is illegal, it contains a character other than ASCII alphanumerics, "
                 "'.', '_' and '-'"),
        ("a/b", "Topic name \"a/b\" is illegal, it contains a character other than ASCII alphanumerics, "
                "'.', '_' and '-'"),
    ],
)
def test_illegal_names_fail_with_kafkas_message(name: str, message: str) -> None:
    with pytest.raises(InvalidTopicError) as raised:
        validate_topic_name(name)
    assert str(raised.value) == message
    assert not is_valid_topic_name(name)


@given(st.text(max_size=300))
def test_validation_agrees_with_the_rule(name: str) -> None:
    legal = (0 < len(name) <= 249 and name not in (".", "..")
             and all(c.isascii() and (c.isalnum() or c in "._-") for c in name))
    assert is_valid_topic_name(name) == legal


def test_collision_chars() -> None:
    assert has_collision_chars("a.b") and has_collision_chars("a_b") and not has_collision_chars("a-b")
    assert unify_collision_chars("a.b_c") == unify_collision_chars("a_b.c") == "a_b_c"


def test_internal_topics_are_kafkas_three() -> None:
    assert is_internal("__consumer_offsets") and is_internal("__transaction_state")
    assert is_internal("__share_group_state")
    assert not is_internal("__cluster_metadata") and not is_internal("__my_topic")
