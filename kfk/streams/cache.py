"""The record cache: Kafka Streams' ThreadCache and its NamedCaches.

Each stream thread has one cache of ``statestore.cache.max.bytes`` divided by the instance's stream threads, shared
by the cached stores of the thread's tasks, each in its own named cache ("<task id>-<store>"). A cached store's
writes stay in the cache (dirty) until it is flushed: on commit, on a clean close, and when a put makes the thread's
cache exceed its size, which evicts the least recently used entries of the named cache written to. Evicting a dirty
entry flushes its whole named cache, the evicted entry first, then the other dirty entries in the order they were
last written. Flushing hands the dirty entries to the store (kfk.streams.state), which writes them to its local
store and changelog and forwards them downstream: so N updates of one key between two flushes leave one record.

An entry's size follows Kafka's estimate of its memory: the key, the value, and the record context the entry keeps
(the timestamp, offset, topic, partition and headers of the record that wrote it), plus the entry's bookkeeping. A
size of 0 means no cache at all (kfk.streams then writes and forwards every update at once).
"""

from __future__ import annotations

import bisect
from collections import OrderedDict
from collections.abc import Callable, Iterator

from kfk.streams.processor import RecordMetadata

__all__ = ["ThreadCache", "NamedCache", "CacheEntry"]

#: What an entry costs beyond its key, value, topic and headers (Kafka's estimate: three references of the LRU node,
#: the dirty flag, the timestamp, the offset and the partition).
_ENTRY_OVERHEAD_BYTES = 8 + 8 + 8 + 1 + 8 + 8 + 4


class CacheEntry:
    """One key's cached value (None: a tombstone) and the context of the record that wrote it, which a flush
    forwards it with."""

    __slots__ = ("value", "dirty", "timestamp", "headers", "metadata", "size")

    def __init__(self, value: bytes | None, dirty: bool, timestamp: int, headers: tuple,
                 metadata: RecordMetadata | None, size: int) -> None:
        self.value, self.dirty, self.timestamp, self.headers = value, dirty, timestamp, headers
        self.metadata, self.size = metadata, size


#: A named cache's flush: the dirty (key, entry) pairs, in flush order.
FlushListener = Callable[[list[tuple[bytes, CacheEntry]]], None]


class NamedCache:
    """One store's part of a thread's cache: its entries in least-recently-used order, and its dirty keys in the
    order they were last written."""

    def __init__(self, name: str, thread_cache: ThreadCache, listener: FlushListener) -> None:
        self.name = name
        self.thread_cache = thread_cache
        self.listener = listener
        self.entries: OrderedDict[bytes, CacheEntry] = OrderedDict()
        self.dirty: dict[bytes, None] = {}
        self.size_bytes = 0
        self.hits = self.misses = 0
        #: The keys in order, kept once a range has been read (window and session stores read ranges per record).
        self._sorted: list[bytes] | None = None

    def get(self, key: bytes) -> CacheEntry | None:
        entry = self.entries.get(key)
        if entry is None:
            self.misses += 1
            return None
        self.hits += 1
        self.entries.move_to_end(key)
        return entry

    def put(self, key: bytes, value: bytes | None, timestamp: int, headers: tuple,
            metadata: RecordMetadata | None) -> None:
        """Write `key` (dirty), then evict from this named cache while the thread's cache is over its size."""
        size = len(key) + (0 if value is None else len(value)) + _ENTRY_OVERHEAD_BYTES
        if metadata is not None:
            size += len(metadata.topic)
        if headers:
            for header_key, header_value in headers:
                size += len(header_key) + (0 if header_value is None else len(header_value))
        entries = self.entries
        previous = entries.pop(key, None)  # (re)inserted last: the most recently used
        growth = size
        if previous is not None:
            growth -= previous.size
        elif self._sorted is not None:
            bisect.insort(self._sorted, key)
        entries[key] = CacheEntry(value, True, timestamp, headers, metadata, size)
        dirty = self.dirty
        dirty.pop(key, None)
        dirty[key] = None
        self.size_bytes += growth
        thread_cache = self.thread_cache
        thread_cache.size_bytes += growth
        if thread_cache.size_bytes > thread_cache.max_bytes:
            while thread_cache.size_bytes > thread_cache.max_bytes and entries:
                self._evict()

    def _evict(self) -> None:
        key, entry = self.entries.popitem(last=False)
        self._unsort(key)
        self.size_bytes -= entry.size
        self.thread_cache.size_bytes -= entry.size
        self.thread_cache.evictions += 1
        if entry.dirty:
            self.flush((key, entry))

    def flush(self, evicted: tuple[bytes, CacheEntry] | None = None) -> None:
        """Hand every dirty entry to the listener (`evicted`, already out of the cache, first) and mark them clean;
        tombstones then leave the cache."""
        if evicted is not None:
            self.dirty.pop(evicted[0], None)
        if not self.dirty and evicted is None:
            return
        flushed = [] if evicted is None else [evicted]
        deleted = []
        for key in self.dirty:
            entry = self.entries[key]
            entry.dirty = False
            flushed.append((key, entry))
            if entry.value is None:
                deleted.append(key)
        self.dirty = {}  # before the listener: what it forwards may write this cache again
        self.listener(flushed)
        for key in deleted:
            entry = self.entries.get(key)
            if entry is not None and not entry.dirty:
                del self.entries[key]
                self._unsort(key)
                self.size_bytes -= entry.size
                self.thread_cache.size_bytes -= entry.size

    def _unsort(self, key: bytes) -> None:
        if self._sorted is not None:
            del self._sorted[bisect.bisect_left(self._sorted, key)]

    def range(self, lower: bytes, upper: bytes) -> list[tuple[bytes, CacheEntry]]:
        """The entries with keys in [lower, upper], in key order."""
        if self._sorted is None:
            self._sorted = sorted(self.entries)
        keys = self._sorted
        entries = self.entries
        return [(key, entries[key]) for key in keys[bisect.bisect_left(keys, lower):bisect.bisect_right(keys, upper)]]

    def items(self) -> Iterator[tuple[bytes, CacheEntry]]:
        """Every entry in key order (a copy taken at once: interactive queries read from other threads)."""
        return iter(sorted(list(self.entries.items())))  # keys are unique: entries are never compared

    def clear(self) -> None:
        """Drop every entry without flushing (a task closed uncleanly: its writes are lost with its transaction)."""
        self.thread_cache.size_bytes -= self.size_bytes
        self.entries.clear()
        self.dirty = {}
        self._sorted = None
        self.size_bytes = 0


class ThreadCache:
    """A stream thread's record cache: ``max_bytes`` shared by its named caches."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.size_bytes = 0
        self.evictions = 0
        self.caches: dict[str, NamedCache] = {}

    def named_cache(self, name: str, listener: FlushListener) -> NamedCache:
        cache = self.caches[name] = NamedCache(name, self, listener)
        return cache

    def close(self, name: str) -> None:
        cache = self.caches.pop(name, None)
        if cache is not None:
            cache.clear()

    @staticmethod
    def hit_ratio(*thread_caches: ThreadCache) -> float:
        """Hits over reads of the thread caches' named caches (Kafka's hit-ratio), 0 before any read."""
        caches = [cache for thread_cache in thread_caches for cache in list(thread_cache.caches.values())]
        hits = sum(cache.hits for cache in caches)
        reads = hits + sum(cache.misses for cache in caches)
        return hits / reads if reads else 0.0


def cache_bytes_per_thread(total_bytes: int, threads: int) -> int:
    """Kafka Streams divides statestore.cache.max.bytes evenly between the instance's stream threads."""
    return total_bytes // threads
