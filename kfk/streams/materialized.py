"""Materialized (Kafka's): how the DSL keeps a KTable's store. kfk.streams takes its store name and whether the
store is cached; everywhere the DSL accepts a Materialized it also takes a plain store name (cached, as Kafka's
default)."""

from __future__ import annotations

from dataclasses import dataclass, replace

__all__ = ["Materialized"]


@dataclass(frozen=True)
class Materialized:
    """``store_name`` (None: generated, as Kafka generates it) and ``caching``: keep the store's updates in the
    record cache until it flushes (Kafka's default), so that a key's updates between two commits go downstream
    as one."""

    store_name: str | None = None
    caching: bool = True

    @classmethod
    def as_(cls, store_name: str) -> Materialized:
        """Kafka's Materialized.as(storeName) (``as`` is Python's keyword)."""
        return cls(store_name)

    def with_caching_enabled(self) -> Materialized:
        return replace(self, caching=True)

    def with_caching_disabled(self) -> Materialized:
        return replace(self, caching=False)

    @classmethod
    def of(cls, materialized: str | Materialized | None) -> Materialized:
        """What the DSL's ``materialized`` argument means: a Materialized, a store name, or Kafka's default."""
        if isinstance(materialized, Materialized):
            return materialized
        return cls(materialized)
