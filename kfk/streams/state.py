"""State stores: timestamped key-value stores, on disk (RocksDB, through rocksdict) or in memory, each optionally
logged to a changelog topic, and the task's checkpoint file.

A store the topology caches (kfk.streams.cache) keeps its writes in the thread's record cache until the cache
flushes them: only then do they reach the local store and the changelog, and go downstream through the flush
listener its processor set (Kafka's caching stores). Reads look in the cache first.

Bytes are laid out as Kafka Streams lays them out, so that the changelog topics of a Java and a Python application
hold the same records: the store holds serialized keys, and values prefixed by their 8-byte big-endian timestamp
(Kafka's timestamped stores); the changelog record's key and value are the serialized key and value, its timestamp
the value's timestamp.

RocksDB through rocksdict (a maintained binding with wheels) is kfk.streams' persistent store, as RocksDB is Kafka
Streams'; it is an optional extra (``pip install 'kfk[streams]'``), and without it a store is kept in memory (and
restored from its changelog in full on every start).
"""

from __future__ import annotations

import bisect
import importlib.util
import os
import shutil
import struct
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from kfk.common.structs import TopicPartition
from kfk.streams.cache import CacheEntry, NamedCache, ThreadCache
from kfk.streams.processor import RecordMetadata
from kfk.streams.serdes import Serde
from kfk.streams.windows import Window, Windowed

__all__ = ["KeyValueStore", "WindowStore", "SessionStore", "OuterJoinStore", "SuppressionBuffer", "Checkpoint", "open_bytes_store"]

_TIMESTAMP = struct.Struct(">q")
_WINDOW_SUFFIX = struct.Struct(">qi")

#: Sends one changelog record: (key bytes, value bytes or None, timestamp[, headers]).
ChangelogWriter = Callable[..., None]
#: Forwards what a cache flush wrote: (key as the store gives it, new value, old value, timestamp, headers).
FlushListener = Callable[[Any, Any, Any, int, tuple], None]


class _MemoryBytes:
    def __init__(self) -> None:
        self.data: dict[bytes, bytes] = {}

    def get(self, key: bytes) -> bytes | None:
        return self.data.get(key)

    def put(self, key: bytes, value: bytes) -> None:
        self.data[key] = value

    def delete(self, key: bytes) -> None:
        self.data.pop(key, None)

    def write(self, batch: list[tuple[bytes, bytes | None]]) -> None:
        data = self.data
        for key, value in batch:
            if value is None:
                data.pop(key, None)
            else:
                data[key] = value

    def flush(self) -> None:
        pass

    def items(self) -> Iterator[tuple[bytes, bytes]]:
        return iter(sorted(self.data.items()))

    def range(self, lower: bytes, upper: bytes) -> Iterator[tuple[bytes, bytes]]:
        return iter([(key, value) for key, value in sorted(self.data.items()) if lower <= key <= upper])

    def close(self) -> None:
        pass


class _RocksDBBytes:
    def __init__(self, path: Path) -> None:
        import rocksdict  # the optional extra; open_bytes_store checks it is there
        path.mkdir(parents=True, exist_ok=True)
        self.db = rocksdict.Rdict(str(path), options=rocksdict.Options(raw_mode=True))
        self._write_batch = rocksdict.WriteBatch
        self._unlogged = rocksdict.WriteOptions()
        self._unlogged.disable_wal = True

    def get(self, key: bytes) -> bytes | None:
        return self.db.get(key)

    def put(self, key: bytes, value: bytes) -> None:
        self.db[key] = value

    def delete(self, key: bytes) -> None:
        del self.db[key]

    def write(self, batch: list[tuple[bytes, bytes | None]]) -> None:
        """One write of many keys, past the write-ahead log (flush() makes it durable)."""
        write_batch = self._write_batch(raw_mode=True)
        for key, value in batch:
            if value is None:
                write_batch.delete(key)
            else:
                write_batch.put(key, value)
        self.db.write(write_batch, self._unlogged)

    def flush(self) -> None:
        self.db.flush()

    def items(self) -> Iterator[tuple[bytes, bytes]]:
        return iter(self.db.items())

    def range(self, lower: bytes, upper: bytes) -> Iterator[tuple[bytes, bytes]]:
        for key, value in self.db.items(from_key=lower):
            if key > upper:
                return
            yield key, value

    def close(self) -> None:
        self.db.close()


def rocksdb_available() -> bool:
    return importlib.util.find_spec("rocksdict") is not None


def open_bytes_store(path: Path | None) -> _MemoryBytes | _RocksDBBytes:
    """RocksDB at ``path``, or memory when path is None or rocksdict is not installed."""
    if path is None or not rocksdb_available():
        return _MemoryBytes()
    return _RocksDBBytes(path)


class KeyValueStore:
    """A timestamped key-value store, typed by its serdes. ``put`` writes the changelog too when the store is
    logged (at once, or when the record cache flushes it, for a cached store)."""

    #: The store's named cache in its thread's record cache (None: not cached).
    cache: NamedCache | None = None
    #: Set by the processor that owns a cached store: what a flush writes goes downstream through it.
    flush_listener: FlushListener | None = None

    def __init__(self, name: str, key_serde: Serde, value_serde: Serde, path: Path | None,
                 changelog: ChangelogWriter | None) -> None:
        self.name = name
        self.key_serde = key_serde
        self.value_serde = value_serde
        self.path = path
        self.persistent = path is not None and rocksdb_available()
        self._changelog = changelog
        self._bytes = open_bytes_store(path)

    def get(self, key: Any) -> Any:
        found = self.get_with_timestamp(key)
        return None if found is None else found[0]

    def get_with_timestamp(self, key: Any) -> tuple[Any, int] | None:
        raw = self._get(self.key_serde.serialize(key))
        if raw is None:
            return None
        return self.value_serde.deserialize(raw[8:]), _TIMESTAMP.unpack_from(raw)[0]

    def put(self, key: Any, value: Any, timestamp: int) -> None:
        self._write(self.key_serde.serialize(key), self.value_serde.serialize(value), timestamp)

    def enable_cache(self, thread_cache: ThreadCache, name: str, task: Any) -> None:
        """Cache this store in `thread_cache` (named cache `name`). ``task`` gives the record context a write keeps
        (its ``current`` record metadata and ``source`` record's headers), and is given each flushed entry's
        metadata back while the entry goes downstream (Kafka forwards it in the context of the record that wrote
        it)."""
        self.cache = thread_cache.named_cache(name, self._write_flushed)
        self._task = task

    def _get(self, key: bytes) -> bytes | None:
        """The raw value (timestamp and value) of `key`: the cache's, else the local store's."""
        if self.cache is not None:
            entry = self.cache.get(key)
            if entry is not None:
                return entry.value
        return self._bytes.get(key)

    def _write(self, key: bytes, value: bytes | None, timestamp: int) -> None:
        """Write to the cache, or straight to the local store and the changelog."""
        if self.cache is None:
            self.restore(key, value, timestamp)
            if self._changelog is not None:
                self._changelog(key, value, timestamp)
            return
        task = self._task
        source = task.source
        self.cache.put(key, None if value is None else _TIMESTAMP.pack(timestamp) + value, timestamp,
                       () if source is None else source[6], task.current)

    def _observe(self, key: bytes, present: bool) -> None:
        """A window or session store's stream time advances with each write to its local store (for a cached store,
        at the flush: as Kafka's segmented store under a cache, it expires only what it has been given), and its
        time index follows the local store (`present`: the write keeps the key, else deletes it)."""

    def _write_flushed(self, entries: list[tuple[bytes, CacheEntry]]) -> None:
        """The cache's flush: each entry goes to the local store and the changelog, and downstream with the value
        the local store held before (Kafka's caching stores and cache flush listeners); an entry that deletes a
        key the local store never had is dropped."""
        task, listener, changelog, local = self._task, self.flush_listener, self._changelog, self._bytes
        observe, deserialize, unpack = self._observe, self.value_serde.deserialize, _TIMESTAMP.unpack_from
        current = task.current
        try:
            for key, entry in entries:
                raw, old = entry.value, local.get(key)
                observe(key, raw is not None)
                if raw is None:
                    if old is None:
                        continue
                    local.delete(key)
                    value, timestamp = None, entry.timestamp
                else:
                    local.put(key, raw)
                    value, timestamp = raw[8:], unpack(raw)[0]
                if changelog is not None:
                    changelog(key, value, timestamp)
                if listener is not None:
                    task.current = entry.metadata
                    listener(self._flushed_key(key), None if value is None else deserialize(value),
                             None if old is None else deserialize(old[8:]), timestamp, entry.headers)
        finally:
            task.current = current

    def _flushed_key(self, key: bytes) -> Any:
        return self.key_serde.deserialize(key)

    def _range(self, lower: bytes, upper: bytes, stored_lower: bytes | None = None) -> Iterator[tuple[bytes, bytes]]:
        """The raw entries with keys in [lower, upper] in key order, the cache's over the local store's; from the
        local store only those from `stored_lower` (its unexpired part: Kafka's caching stores do not expire what
        the cache holds)."""
        stored = self._bytes.range(lower if stored_lower is None else max(lower, stored_lower), upper)
        if self.cache is None:
            return stored
        return _merged(stored, self.cache.range(lower, upper))

    def _items(self) -> Iterator[tuple[bytes, bytes]]:
        if self.cache is None:
            return self._bytes.items()
        return _merged(self._bytes.items(), self.cache.items())

    def delete(self, key: Any, timestamp: int) -> None:
        self.put(key, None, timestamp)

    def all(self) -> Iterator[tuple[Any, Any]]:
        """Every key and value, in the order of the serialized keys."""
        for key, raw in self._items():
            yield self.key_serde.deserialize(key), self.value_serde.deserialize(raw[8:])

    def prefix_scan(self, prefix: bytes) -> Iterator[tuple[Any, Any]]:
        """The keys whose serialized form starts with ``prefix`` and their values, in key order (Kafka's
        prefixScan with the prefix already serialized)."""
        upper = bytearray(prefix)  # the smallest key above every key with the prefix (Kafka's Bytes.increment)
        while upper and upper[-1] == 0xFF:
            upper.pop()
        if upper:
            upper[-1] += 1
        for key, raw in list(self._range(prefix, bytes(upper) if upper else prefix + b"\xff" * 64)):
            if key.startswith(prefix):
                yield self.key_serde.deserialize(key), self.value_serde.deserialize(raw[8:])

    def restore(self, key: bytes, value: bytes | None, timestamp: int) -> None:
        """Apply one changelog record (also how put() writes)."""
        if value is None:
            self._bytes.delete(key)
        else:
            self._bytes.put(key, _TIMESTAMP.pack(timestamp) + value)

    def restore_batch(self, records: list[tuple[bytes, bytes | None, int]]) -> None:
        """Apply changelog records (key, value, timestamp) in one write, as Kafka Streams restores a batch into
        RocksDB: past the write-ahead log, so flush() before a checkpoint counts them."""
        pack = _TIMESTAMP.pack
        self._bytes.write([(key, None if value is None else pack(timestamp) + value)
                           for key, value, timestamp in records])

    def flush(self) -> None:
        """Make every write durable (the restored batches, which skipped the write-ahead log)."""
        self._bytes.flush()

    def close(self) -> None:
        if self.cache is not None:
            self.cache.thread_cache.close(self.cache.name)
        self._bytes.close()

    def wipe(self) -> None:
        """Drop the local copy (it is rebuilt from the changelog): after a crash under exactly_once_v2 the store
        may hold writes of transactions that were aborted."""
        self._bytes.close()
        if self.path is not None:
            shutil.rmtree(self.path, ignore_errors=True)
        self._bytes = open_bytes_store(self.path)


class _TimeIndex:
    """A store's keys by a time they hold (a window's start, a session's end): the time order of Kafka's
    time-ordered stores, which the aggregations emitting on window close read. Built from the store's bytes on
    first use (a persistent store may open full), then kept by the store's writes; the times are kept sorted, so
    that reading a range costs its length, not the store's."""

    def __init__(self, time_of: Callable[[bytes], int]) -> None:
        self.time_of = time_of
        self.keys: dict[int, set[bytes]] | None = None
        self.times: list[int] = []

    def update(self, key: bytes, present: bool) -> None:
        if self.keys is None:
            return
        time = self.time_of(key)
        keys = self.keys.get(time)
        if present:
            if keys is None:
                keys = self.keys[time] = set()
                bisect.insort(self.times, time)
            keys.add(key)
        elif keys is not None and key in keys:
            keys.discard(key)
            if not keys:
                del self.keys[time]
                del self.times[bisect.bisect_left(self.times, time)]

    def update_batch(self, records: list[tuple[bytes, bytes | None, int]]) -> None:
        """A batch of changelog records restored (key, value or None, timestamp)."""
        if self.keys is None:
            return
        update = self.update
        for key, value, _ in records:
            update(key, value is not None)

    def reset(self) -> None:
        self.keys, self.times = None, []

    def between(self, stored: Iterator[tuple[bytes, bytes]], earliest: int,
                latest: int) -> Iterator[tuple[int, set[bytes]]]:
        """The times in [earliest, latest] in order, each with its keys (`stored`: the store's items, read only
        to build the index)."""
        if self.keys is None:
            keys: dict[int, set[bytes]] = {}
            for key, _ in stored:
                keys.setdefault(self.time_of(key), set()).add(key)
            self.keys, self.times = keys, sorted(keys)
        times = self.times[bisect.bisect_left(self.times, earliest):bisect.bisect_right(self.times, latest)]
        for time in times:
            yield time, self.keys[time]


class WindowStore(KeyValueStore):
    """A timestamped window store: one aggregate per key and window start. Its keys are Kafka's window store keys
    as its changelog carries them: the serialized key, the window start (8 bytes, big-endian) and a sequence
    number (4 bytes, 0: a window store of aggregates keeps no duplicates)."""

    #: A join's store keeps every record (retain duplicates): each put gets the next sequence number, from 1.
    retain_duplicates = False
    _sequence = 0
    #: Set for a time or sliding window store (fetch_windows() and fetch_all() then leave out expired windows).
    retention_ms: int | None = None
    #: The latest window start put or restored (Kafka's segmented stores' observed stream time).
    observed_start = -1
    #: The window keys by start, for fetch_all().
    _by_start: _TimeIndex | None = None

    def put_record(self, key: Any, value: Any, timestamp: int) -> None:
        """Keep one record of a KStream-KStream join's side (a join store retains duplicates)."""
        self._sequence = (self._sequence + 1) & 0x7FFFFFFF
        self._write(self.key_serde.serialize(key) + _WINDOW_SUFFIX.pack(timestamp, self._sequence),
                    self.value_serde.serialize(value), timestamp)

    def fetch_records(self, key: Any, time_from: int, time_to: int) -> Iterator[tuple[Any, int]]:
        """The values kept for `key` with timestamps in [time_from, time_to], oldest first, and their times."""
        prefix = self.key_serde.serialize(key)
        lower = prefix + _WINDOW_SUFFIX.pack(time_from, 0)
        upper = prefix + _WINDOW_SUFFIX.pack(time_to, 0x7FFFFFFF)
        for stored_key, raw in self._range(lower, upper):
            if len(stored_key) == len(prefix) + _WINDOW_SUFFIX.size:
                yield self.value_serde.deserialize(raw[8:]), _TIMESTAMP.unpack_from(raw)[0]

    def fetch_windows(self, key: Any, earliest_start: int, latest_start: int) -> list[tuple[int, Any, int]]:
        """`key`'s windows that start in [earliest_start, latest_start], earliest first, as (start, aggregate,
        timestamp). Like Kafka's segmented stores, it leaves out the windows that started ``retention_ms`` or more
        before the latest window start its local store has seen (when it has a retention; windows still in the
        record cache are returned, as Kafka's caching store returns them)."""
        unexpired = earliest_start
        if self.retention_ms is not None:
            unexpired = max(earliest_start, self.observed_start - self.retention_ms + 1)
        prefix = self.key_serde.serialize(key)
        found = []
        for stored_key, raw in self._range(prefix + _WINDOW_SUFFIX.pack(max(earliest_start, 0), 0),
                                           prefix + _WINDOW_SUFFIX.pack(latest_start, 0x7FFFFFFF),
                                           prefix + _WINDOW_SUFFIX.pack(max(unexpired, 0), 0)):
            if len(stored_key) == len(prefix) + _WINDOW_SUFFIX.size:
                start = _TIMESTAMP.unpack_from(stored_key, len(prefix))[0]
                found.append((start, self.value_serde.deserialize(raw[8:]), _TIMESTAMP.unpack_from(raw)[0]))
        return found

    def fetch_all(self, earliest_start: int, latest_start: int) -> list[tuple[Any, int, Any, int]]:
        """Every key's windows that start in [earliest_start, latest_start] as (key, start, aggregate, timestamp),
        by start and then by serialized key: the order of Kafka's time-ordered window store, which an
        ON_WINDOW_CLOSE aggregation emits from. Like that store, it leaves out the windows that started more than
        ``retention_ms`` before the latest window start it has seen (one ms later than fetch_windows(), as Kafka's
        time-first key schema): a hopping window may be gone before it closes."""
        if self.retention_ms is not None:
            earliest_start = max(earliest_start, self.observed_start - self.retention_ms)
        if self._by_start is None:
            self._by_start = _TimeIndex(lambda stored: _TIMESTAMP.unpack_from(stored, len(stored) - 12)[0])
        found = []
        for start, keys in self._by_start.between(self._bytes.items(), earliest_start, latest_start):
            # Kafka's time-ordered key: the start, the serialized key, the sequence number
            for stored_key in sorted(keys, key=lambda stored: stored[:-12] + stored[-4:]):
                raw = self._bytes.get(stored_key)
                found.append((self.key_serde.deserialize(stored_key[:-_WINDOW_SUFFIX.size]), start,
                              self.value_serde.deserialize(raw[8:]), _TIMESTAMP.unpack_from(raw)[0]))
        return found

    def restore(self, key: bytes, value: bytes | None, timestamp: int) -> None:
        self._observe(key, value is not None)
        super().restore(key, value, timestamp)

    def _observe(self, key: bytes, present: bool) -> None:
        start = _TIMESTAMP.unpack_from(key, len(key) - _WINDOW_SUFFIX.size)[0]
        self.observed_start = max(self.observed_start, start)
        if self._by_start is not None:
            self._by_start.update(key, present)

    def _flushed_key(self, key: bytes) -> tuple[Any, int]:
        """(record key, window start): the processor knows the window's size."""
        return (self.key_serde.deserialize(key[:-_WINDOW_SUFFIX.size]),
                _TIMESTAMP.unpack_from(key, len(key) - _WINDOW_SUFFIX.size)[0])

    def restore_batch(self, records: list[tuple[bytes, bytes | None, int]]) -> None:
        offset = -_WINDOW_SUFFIX.size
        self.observed_start = max(self.observed_start, max(
            (_TIMESTAMP.unpack_from(key, len(key) + offset)[0] for key, _, _ in records), default=-1))
        if self._by_start is not None:
            self._by_start.update_batch(records)
        super().restore_batch(records)

    def wipe(self) -> None:
        super().wipe()
        self._by_start = None

    def _window_key(self, key: Any, start: int) -> bytes:
        return self.key_serde.serialize(key) + _WINDOW_SUFFIX.pack(start, 0)

    def fetch(self, key: Any, start: int) -> tuple[Any, int] | None:
        raw = self._get(self._window_key(key, start))
        if raw is None:
            return None
        return self.value_serde.deserialize(raw[8:]), _TIMESTAMP.unpack_from(raw)[0]

    def put_window(self, key: Any, start: int, value: Any, timestamp: int) -> None:
        self._write(self._window_key(key, start), self.value_serde.serialize(value), timestamp)

    def all_windows(self) -> Iterator[tuple[Any, int, Any]]:
        """Every (key, window start, aggregate)."""
        for key, raw in self._items():
            start, _ = _WINDOW_SUFFIX.unpack_from(key, len(key) - _WINDOW_SUFFIX.size)
            yield (self.key_serde.deserialize(key[:-_WINDOW_SUFFIX.size]), start,
                   self.value_serde.deserialize(raw[8:]))


_SESSION_SUFFIX = struct.Struct(">qq")


class SessionStore(KeyValueStore):
    """A session store: one aggregate per key and session. Its keys are Kafka's session keys as its changelog
    carries them: the serialized key, the session's end, then its start (8 bytes each, big-endian), so that a key's
    sessions are ordered by end; its values are the plain aggregates (Kafka's session stores keep no timestamp).

    Like Kafka's segmented stores, it stops returning sessions that ended ``retention_ms`` or more before the
    latest session end its local store has seen: a record then starts a new session instead of merging with an
    expired one (sessions still in the record cache are found, as Kafka's caching store finds them)."""

    def __init__(self, name: str, key_serde: Serde, value_serde: Serde, path: Path | None,
                 changelog: ChangelogWriter | None, retention_ms: int) -> None:
        super().__init__(name, key_serde, value_serde, path, changelog)
        self.retention_ms = retention_ms
        self.observed_end = -1
        #: The session keys by end, for fetch_all_sessions().
        self._by_end = _TimeIndex(lambda stored: _TIMESTAMP.unpack_from(stored, len(stored) - 16)[0])

    def find_sessions(self, key: Any, earliest_end: int, latest_start: int) -> list[tuple[Window, Any]]:
        """The live sessions of `key` that end at or after `earliest_end` and start at or before `latest_start`,
        by end, then start."""
        earliest_end = max(earliest_end, 0)
        unexpired = max(earliest_end, self.observed_end - self.retention_ms + 1)
        prefix = self.key_serde.serialize(key)
        found = []
        for stored_key, raw in self._range(prefix + _SESSION_SUFFIX.pack(earliest_end, 0),
                                           prefix + _SESSION_SUFFIX.pack(0x7FFFFFFFFFFFFFFF, latest_start),
                                           prefix + _SESSION_SUFFIX.pack(unexpired, 0)):
            if len(stored_key) != len(prefix) + _SESSION_SUFFIX.size:
                continue
            end, start = _SESSION_SUFFIX.unpack_from(stored_key, len(prefix))
            if start <= latest_start:
                found.append((Window(start, end), self.value_serde.deserialize(raw[8:])))
        return found

    def put_session(self, key: Any, window: Window, value: Any, timestamp: int) -> None:
        """Keep (or with None, remove) `key`'s session `window`; the changelog record carries `timestamp`."""
        self._write(self.key_serde.serialize(key) + _SESSION_SUFFIX.pack(window.end, window.start),
                    self.value_serde.serialize(value), timestamp)

    def fetch_all_sessions(self, earliest_end: int, latest_end: int) -> list[tuple[Any, Window, Any]]:
        """Every key's sessions that end in [earliest_end, latest_end] as (key, session, aggregate), by end, start
        and serialized key: the order of Kafka's time-ordered session store (end, start, key), which an
        ON_WINDOW_CLOSE session aggregation emits from."""
        found = []
        for end, keys in self._by_end.between(self._bytes.items(), earliest_end, latest_end):
            for stored_key in sorted(keys, key=lambda stored: stored[-8:] + stored[:-16]):
                start = _TIMESTAMP.unpack_from(stored_key, len(stored_key) - 8)[0]
                found.append((self.key_serde.deserialize(stored_key[:-_SESSION_SUFFIX.size]), Window(start, end),
                              self.value_serde.deserialize(self._bytes.get(stored_key)[8:])))
        return found

    def restore(self, key: bytes, value: bytes | None, timestamp: int) -> None:
        self._observe(key, value is not None)
        super().restore(key, value, timestamp)

    def _observe(self, key: bytes, present: bool) -> None:
        end = _TIMESTAMP.unpack_from(key, len(key) - _SESSION_SUFFIX.size)[0]
        self.observed_end = max(self.observed_end, end)
        self._by_end.update(key, present)

    def _flushed_key(self, key: bytes) -> tuple[Any, Window]:
        """(record key, session window)."""
        end, start = _SESSION_SUFFIX.unpack_from(key, len(key) - _SESSION_SUFFIX.size)
        return self.key_serde.deserialize(key[:-_SESSION_SUFFIX.size]), Window(start, end)

    def restore_batch(self, records: list[tuple[bytes, bytes | None, int]]) -> None:
        offset = -_SESSION_SUFFIX.size
        self.observed_end = max(self.observed_end, max(
            (_TIMESTAMP.unpack_from(key, len(key) + offset)[0] for key, _, _ in records), default=-1))
        self._by_end.update_batch(records)
        super().restore_batch(records)

    def wipe(self) -> None:
        super().wipe()
        self._by_end.reset()


_INT = struct.Struct(">i")


class OuterJoinStore(KeyValueStore):
    """A left/outer KStream-KStream join's shared store (Kafka's outer join store): the records of either side
    that have not joined yet, until their window closes and they are emitted joined with None. As Kafka's, a key
    is the record's timestamp (8 bytes, big-endian), its side (1 left, 0 right) and its key, so that iterating
    the store goes by time; a value is the list of that key's records (a list-serde list: strategy byte 1, the
    count, then each element length-prefixed), each element its side byte and the serialized value. The
    changelog carries the whole list after each change."""

    def __init__(self, name: str, key_serde: Serde, this_value_serde: Serde, other_value_serde: Serde,
                 path: Path | None, changelog: ChangelogWriter | None) -> None:
        super().__init__(name, key_serde, this_value_serde, path, changelog)
        self.other_value_serde = other_value_serde

    def _key(self, key: Any, timestamp: int, left: bool) -> bytes:
        return _TIMESTAMP.pack(timestamp) + (b"\x01" if left else b"\x00") + self.key_serde.serialize(key)

    def add(self, key: Any, timestamp: int, left: bool, value: Any, log_timestamp: int) -> None:
        """Hold one unjoined record (the left side's value serialized with this store's value serde)."""
        key_bytes = self._key(key, timestamp, left)
        element = (b"\x01" if left else b"\x00") + (self.value_serde if left else self.other_value_serde).serialize(
            value)
        existing = self._bytes.get(key_bytes)
        elements = [] if existing is None else _list_elements(existing)
        elements.append(element)
        self._write(key_bytes, b"\x01" + _INT.pack(len(elements)) + b"".join(
            _INT.pack(len(item)) + item for item in elements), log_timestamp)

    def joined(self, key: Any, timestamp: int, left: bool, log_timestamp: int) -> None:
        """The records of `key` at `timestamp` on one side have joined: they are no longer held."""
        key_bytes = self._key(key, timestamp, left)
        if self._bytes.get(key_bytes) is not None:
            self._write(key_bytes, None, log_timestamp)

    def held(self) -> Iterator[tuple[bytes, int, bool, Any, list[Any]]]:
        """Every held key, earliest time first: (key bytes, timestamp, left side?, key, values)."""
        for key_bytes, raw in list(self._bytes.items()):
            left = key_bytes[8] == 1
            serde = self.value_serde if left else self.other_value_serde
            yield (key_bytes, _TIMESTAMP.unpack_from(key_bytes)[0], left, self.key_serde.deserialize(key_bytes[9:]),
                   [serde.deserialize(element[1:]) for element in _list_elements(raw)])

    def remove(self, key_bytes: bytes, log_timestamp: int) -> None:
        self._write(key_bytes, None, log_timestamp)

    def restore(self, key: bytes, value: bytes | None, timestamp: int) -> None:
        if value is None:
            self._bytes.delete(key)
        else:
            self._bytes.put(key, value)

    def restore_batch(self, records: list[tuple[bytes, bytes | None, int]]) -> None:
        self._bytes.write([(key, value) for key, value, _ in records])


def _merged(stored: Iterator[tuple[bytes, bytes]], cached: list[tuple[bytes, CacheEntry]]
            ) -> Iterator[tuple[bytes, bytes]]:
    """A range of the local store with a cached range laid over it (the cache's tombstones hide keys), by key."""
    merged = dict(stored)
    for key, entry in cached:
        if entry.value is None:
            merged.pop(key, None)
        else:
            merged[key] = entry.value
    return iter(sorted(merged.items()))


def _list_elements(raw: bytes) -> list[bytes]:
    count = _INT.unpack_from(raw, 1)[0]
    position, elements = 5, []
    for _ in range(count):
        length = _INT.unpack_from(raw, position)[0]
        elements.append(raw[position + 4:position + 4 + length])
        position += 4 + length
    return elements
#: The buffer changelog's record header: the version of its value format (Kafka's "v", 3).
_BUFFER_CHANGELOG_HEADERS = [("v", b"\x03")]
#: In the buffer's value format, a length of -1 is a null value and -2 an old value equal to the prior one.
_NULL_LENGTH, _SAME_AS_PRIOR_LENGTH = -1, -2


class _Buffered:
    """One key's held update: the value before it was first buffered (prior), the latest Change's old and new
    values (serialized), and the context of the record that brought the latest one (timestamp, where it was read
    from, headers), which the emitted record carries."""

    __slots__ = ("time", "prior", "old", "new", "timestamp", "metadata", "headers")

    def __init__(self, time: int, prior: bytes | None, old: bytes | None, new: bytes | None, timestamp: int,
                 metadata: RecordMetadata, headers: tuple) -> None:
        self.time, self.prior, self.old, self.new = time, prior, old, new
        self.timestamp, self.metadata, self.headers = timestamp, metadata, headers

    def serialize(self) -> bytes:
        """Kafka's buffer changelog value (version 3): the record context, the prior, old and new values (each
        length-prefixed), then the buffer time."""
        topic = self.metadata.topic.encode()
        parts = [_TIMESTAMP.pack(self.timestamp), _TIMESTAMP.pack(self.metadata.offset), _INT.pack(len(topic)),
                 topic, _INT.pack(self.metadata.partition), _INT.pack(len(self.headers))]
        for key, value in self.headers:
            encoded = key.encode()
            parts += [_INT.pack(len(encoded)), encoded]
            parts += [_INT.pack(_NULL_LENGTH)] if value is None else [_INT.pack(len(value)), value]
        parts += _sized(self.prior)
        if self.old is not None and self.old == self.prior:
            parts.append(_INT.pack(_SAME_AS_PRIOR_LENGTH))
        else:
            parts += _sized(self.old)
        parts += _sized(self.new)
        parts.append(_TIMESTAMP.pack(self.time))
        return b"".join(parts)

    @classmethod
    def deserialize(cls, data: bytes) -> _Buffered:
        view = memoryview(data)
        timestamp, offset = _TIMESTAMP.unpack_from(view, 0)[0], _TIMESTAMP.unpack_from(view, 8)[0]
        topic, position = _read_sized(view, 16)
        partition, count = _INT.unpack_from(view, position)[0], _INT.unpack_from(view, position + 4)[0]
        position += 8
        headers = []
        for _ in range(max(count, 0)):
            key, position = _read_sized(view, position)
            value, position = _read_sized(view, position)
            headers.append((key.decode(), value))
        prior, position = _read_sized(view, position)
        if _INT.unpack_from(view, position)[0] == _SAME_AS_PRIOR_LENGTH:
            old, position = prior, position + 4
        else:
            old, position = _read_sized(view, position)
        new, position = _read_sized(view, position)
        time = _TIMESTAMP.unpack_from(view, position)[0]
        return cls(time, prior, old, new, timestamp, RecordMetadata(topic.decode(), partition, offset),
                   tuple(headers))


def _sized(value: bytes | None) -> list[bytes]:
    return [_INT.pack(_NULL_LENGTH)] if value is None else [_INT.pack(len(value)), value]


def _read_sized(view: memoryview, position: int) -> tuple[bytes | None, int]:
    length = _INT.unpack_from(view, position)[0]
    position += 4
    if length < 0:
        return None, position
    return bytes(view[position:position + length]), position + length


class SuppressionBuffer:
    """suppress()'s buffer (Kafka's in-memory time-ordered change buffer): the latest update of each windowed key,
    ordered by buffer time (the window's end), until the window closes. It lives in memory and is rebuilt from its
    changelog on every start; the changelog holds Kafka's bytes (key: the record key and the window start, or for
    ``sessions`` the session's end and start; value: see _Buffered.serialize; a tombstone once the window is
    emitted), so a Java and a Python application restore each other's buffers. A later update of a key keeps its
    place in the order (Kafka's non-resetting put)."""

    persistent = False

    def __init__(self, name: str, key_serde: Serde, value_serde: Serde, changelog: ChangelogWriter | None,
                 sessions: bool = False) -> None:
        self.name, self.key_serde, self.value_serde, self.sessions = name, key_serde, value_serde, sessions
        self._changelog = changelog
        self._entries: dict[bytes, _Buffered] = {}
        #: The earliest buffer time held (or None), so that most records check the buffer in constant time.
        self._min_time: int | None = None

    def _key_bytes(self, key: Windowed) -> bytes:
        if self.sessions:
            return self.key_serde.serialize(key.key) + _SESSION_SUFFIX.pack(key.window.end, key.window.start)
        return self.key_serde.serialize(key.key) + _TIMESTAMP.pack(key.window.start)

    def put(self, time: int, key: Windowed, new: Any, old: Any, timestamp: int, metadata: RecordMetadata,
            headers: tuple) -> None:
        key_bytes = self._key_bytes(key)
        old_bytes = None if old is None else self.value_serde.serialize(old)
        new_bytes = None if new is None else self.value_serde.serialize(new)
        buffered = self._entries.get(key_bytes)
        if buffered is None:
            buffered = self._entries[key_bytes] = _Buffered(time, old_bytes, old_bytes, new_bytes, timestamp,
                                                            metadata, headers)
            self._min_time = time if self._min_time is None else min(self._min_time, time)
        else:
            buffered.old, buffered.new = old_bytes, new_bytes
            buffered.timestamp, buffered.metadata, buffered.headers = timestamp, metadata, headers
        if self._changelog is not None:
            self._changelog(key_bytes, buffered.serialize(), timestamp, _BUFFER_CHANGELOG_HEADERS)

    def evict_until(self, time: int, timestamp: int) -> Iterator[tuple[Windowed, Any, Any, _Buffered]]:
        """Remove and yield, earliest buffer time first (then by key bytes), every entry whose buffer time is at
        most `time`: (key, new value, old value, the entry)."""
        if self._min_time is None or self._min_time > time:
            return
        due = sorted((buffered.time, key_bytes) for key_bytes, buffered in self._entries.items()
                     if buffered.time <= time)
        size = _SESSION_SUFFIX.size if self.sessions else _TIMESTAMP.size
        for _, key_bytes in due:
            buffered = self._entries.pop(key_bytes)
            if self._changelog is not None:
                self._changelog(key_bytes, None, timestamp)
            start = _TIMESTAMP.unpack_from(key_bytes, len(key_bytes) - 8)[0]  # (a session key: its end, its start)
            key = Windowed(self.key_serde.deserialize(key_bytes[:-size]), Window(start, buffered.time))
            yield (key, None if buffered.new is None else self.value_serde.deserialize(buffered.new),
                   None if buffered.old is None else self.value_serde.deserialize(buffered.old), buffered)
        self._min_time = min((buffered.time for buffered in self._entries.values()), default=None)

    def restore(self, key: bytes, value: bytes | None, timestamp: int) -> None:
        if value is None:
            removed = self._entries.pop(key, None)
            if removed is not None and removed.time == self._min_time:
                self._min_time = min((buffered.time for buffered in self._entries.values()), default=None)
            return
        buffered = self._entries[key] = _Buffered.deserialize(value)
        self._min_time = buffered.time if self._min_time is None else min(self._min_time, buffered.time)

    def restore_batch(self, records: list[tuple[bytes, bytes | None, int]]) -> None:
        for key, value, timestamp in records:
            self.restore(key, value, timestamp)

    def flush(self) -> None:
        pass

    def close(self) -> None:
        self.wipe()

    def wipe(self) -> None:
        self._entries.clear()
        self._min_time = None


class Checkpoint:
    """A task's ``.checkpoint`` file in Kafka's text format (version 0, the entry count, then "topic partition
    offset" lines): the changelog offsets the local stores are known to contain, so a restart restores only the
    changelog's tail. Written on commit under at_least_once and on a clean close; under exactly_once_v2 it is
    deleted while the task runs, so after a crash the stores are rebuilt from the committed changelog."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def read(self) -> dict[TopicPartition, int]:
        try:
            lines = self.path.read_text().splitlines()
        except FileNotFoundError:
            return {}
        offsets = {}
        for line in lines[2:]:
            topic, partition, offset = line.rsplit(" ", 2)
            offsets[TopicPartition(topic, int(partition))] = int(offset)
        return offsets

    def write(self, offsets: dict[TopicPartition, int]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        lines = ["0", str(len(offsets))] + [f"{tp.topic} {tp.partition} {offset}" for tp, offset in offsets.items()]
        temporary = self.path.with_suffix(".tmp")
        temporary.write_text("\n".join(lines) + "\n")
        os.replace(temporary, self.path)

    def delete(self) -> None:
        self.path.unlink(missing_ok=True)
