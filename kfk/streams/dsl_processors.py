"""The processors behind the DSL's operators, with Kafka Streams' semantics record for record (each forwards what
Kafka's KStream*/KTable* processor of the same name forwards).

Stateful ones read and write a timestamped key-value store: the aggregate's timestamp is the largest timestamp of
the records it has seen for the key, as in Kafka, and that is the timestamp of the update they forward.

The aggregations and materialized table sources (CachedForwarding) forward each update themselves only when their
store is not cached; a cached store's updates go downstream when the record cache flushes them (kfk.streams.cache):
the latest value of each key, with the value the store held before as its old value.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from kfk.streams.processor import Change, Processor, ProcessorContext, Record
from kfk.streams.windows import (EmitStrategy, JoinWindows, SessionWindows, SlidingWindows, TimeWindows, Window,
                                 Windowed)

log = logging.getLogger("kfk.streams")


class Filter(Processor):
    def __init__(self, predicate: Callable[[Any, Any], bool], negate: bool) -> None:
        self.predicate, self.negate = predicate, negate

    def process(self, record: Record) -> None:
        if bool(self.predicate(record.key, record.value)) != self.negate:
            self.context.forward(record)


class Map(Processor):
    def __init__(self, mapper: Callable[[Any, Any], tuple[Any, Any]]) -> None:
        self.mapper = mapper

    def process(self, record: Record) -> None:
        key, value = self.mapper(record.key, record.value)
        self.context.forward(Record(key, value, record.timestamp, record.headers))


class MapValues(Processor):
    def __init__(self, mapper: Callable[[Any], Any]) -> None:
        self.mapper = mapper

    def process(self, record: Record) -> None:
        self.context.forward(record.with_value(self.mapper(record.value)))


class FlatMap(Processor):
    def __init__(self, mapper: Callable[[Any, Any], Any]) -> None:
        self.mapper = mapper

    def process(self, record: Record) -> None:
        for key, value in self.mapper(record.key, record.value):
            self.context.forward(Record(key, value, record.timestamp, record.headers))


class FlatMapValues(Processor):
    def __init__(self, mapper: Callable[[Any], Any]) -> None:
        self.mapper = mapper

    def process(self, record: Record) -> None:
        for value in self.mapper(record.value):
            self.context.forward(record.with_value(value))


class Peek(Processor):
    """peek() forwards after the action; foreach() (forward=False) ends the branch."""

    def __init__(self, action: Callable[[Any, Any], None], forward: bool) -> None:
        self.action, self.forward = action, forward

    def process(self, record: Record) -> None:
        self.action(record.key, record.value)
        if self.forward:
            self.context.forward(record)


class SelectKey(Processor):
    def __init__(self, mapper: Callable[[Any, Any], Any]) -> None:
        self.mapper = mapper

    def process(self, record: Record) -> None:
        self.context.forward(record.with_key(self.mapper(record.key, record.value)))


class PassThrough(Processor):
    """merge(), the branches of split() and the sources' successors that only pass records on."""

    def process(self, record: Record) -> None:
        self.context.forward(record)


class DropNullKeys(Processor):
    """The filter before a repartition topic: a record without a key has no partition to go to."""

    def process(self, record: Record) -> None:
        if record.key is not None:
            self.context.forward(record)


class Branch(Processor):
    """split(): the record goes to the child of the first predicate it satisfies, else to the default branch (if
    any). ``branches`` is filled by BranchedKStream after the node exists: (predicate or None, child name)."""

    def __init__(self, branches: list[tuple[Callable[[Any, Any], bool] | None, str]]) -> None:
        self.branches = branches

    def process(self, record: Record) -> None:
        for predicate, child in self.branches:
            if predicate is None or predicate(record.key, record.value):
                self.context.forward(record, child)
                return


class CachedForwarding(Processor):
    """A processor whose store ``store_name`` may be cached: then ``caching`` is set, process() forwards nothing,
    and the store's flushes forward through forward_flushed() (Kafka's TimestampedTupleForwarder and cache flush
    listener)."""

    store_name: str
    caching = False

    def init(self, context: ProcessorContext) -> None:
        super().init(context)
        store = context.get_state_store(self.store_name)
        if store.cache is not None:
            self.caching = True
            store.flush_listener = self.forward_flushed

    def forward_flushed(self, key: Any, new: Any, old: Any, timestamp: int, headers: tuple) -> None:
        self.context.forward(Record(key, Change(new, old), timestamp, headers))


class StreamAggregate(CachedForwarding):
    """count() and aggregate(): records without a key are skipped, as Kafka skips them."""

    def __init__(self, store_name: str, initializer: Callable[[], Any],
                 aggregator: Callable[[Any, Any, Any], Any]) -> None:
        self.store_name, self.initializer, self.aggregator = store_name, initializer, aggregator

    def process(self, record: Record) -> None:
        if record.key is None:
            log.warning("Skipping record due to null key. topic=%s", self.context.record_metadata())
            return
        store = self.context.get_state_store(self.store_name)
        old = store.get_with_timestamp(record.key)
        if old is None:
            aggregate, timestamp = self.initializer(), record.timestamp
        else:
            aggregate, timestamp = old[0], max(old[1], record.timestamp)
        new = self.aggregator(record.key, record.value, aggregate)
        store.put(record.key, new, timestamp)
        if not self.caching:
            self.context.forward(Record(record.key, Change(new, None if old is None else old[0]), timestamp,
                                        record.headers))


class StreamReduce(CachedForwarding):
    """reduce(): the first value of a key is its aggregate; records without a key or value are skipped."""

    def __init__(self, store_name: str, reducer: Callable[[Any, Any], Any]) -> None:
        self.store_name, self.reducer = store_name, reducer

    def process(self, record: Record) -> None:
        if record.key is None or record.value is None:
            log.warning("Skipping record due to null key or value. topic=%s", self.context.record_metadata())
            return
        store = self.context.get_state_store(self.store_name)
        old = store.get_with_timestamp(record.key)
        if old is None:
            value, timestamp = record.value, record.timestamp
        else:
            value, timestamp = self.reducer(old[0], record.value), max(old[1], record.timestamp)
        store.put(record.key, value, timestamp)
        if not self.caching:
            self.context.forward(Record(record.key, Change(value, None if old is None else old[0]), timestamp,
                                        record.headers))


class TableSource(CachedForwarding):
    """builder.table(): each record is the key's new value (None deletes it), kept in the table's store."""

    def __init__(self, store_name: str) -> None:
        self.store_name = store_name

    def process(self, record: Record) -> None:
        if record.key is None:
            log.warning("Skipping record due to null key. topic=%s", self.context.record_metadata())
            return
        store = self.context.get_state_store(self.store_name)
        old = store.get(record.key)
        store.put(record.key, record.value, record.timestamp)
        if not self.caching:
            self.context.forward(record.with_value(Change(record.value, old)))


class MaterializedChange(Processor):
    """A KTable operator's result kept in its own store (Kafka's materialized KTableSource after a foreign-key
    join): each new value is put (None deletes) and forwarded with the value it replaces as the old value."""

    def __init__(self, store_name: str) -> None:
        self.store_name = store_name

    def process(self, record: Record) -> None:
        store = self.context.get_state_store(self.store_name)
        new = record.value.new_value
        old = store.get(record.key)
        store.put(record.key, new, record.timestamp)
        self.context.forward(record.with_value(Change(new, old)))


class StreamTableJoin(Processor):
    """A KStream-KTable join: each stream record looks its key up in the table (as it is when the record is
    processed); an inner join drops the record when the key is absent, a left join joins it with None. Records
    without a value are dropped; a left join keeps records without a key (KIP-962), an inner join drops them."""

    def __init__(self, store_name: str, joiner: Callable[[Any, Any], Any], left: bool,
                 key_selector: Callable[[Any, Any], Any] | None = None) -> None:
        """``key_selector``: a KStream-GlobalKTable join's, the table key of each record (else the record key)."""
        self.store_name, self.joiner, self.left, self.key_selector = store_name, joiner, left, key_selector

    def process(self, record: Record) -> None:
        key = record.key if self.key_selector is None else self.key_selector(record.key, record.value)
        if record.value is None or (key is None and not self.left):
            log.warning("Skipping record due to null join key or value. topic=%s", self.context.record_metadata())
            return
        table_value = None if key is None else self.context.get_state_store(self.store_name).get(key)
        if table_value is None and not self.left:
            return
        self.context.forward(record.with_value(self.joiner(record.value, table_value)))


class TableTableJoin(Processor):
    """One side of a KTable-KTable join: an update of this side's table looks the key up in the other table's
    store and forwards the joined value, timestamped with the later of the two. ``mode`` is Kafka's processor for
    this side: "inner" (both sides of join()), "left" (this side of left_join()), "right" (the other side of
    left_join(): only keys the left table has) or "outer"; ``this_is_left`` orders the joiner's arguments."""

    def __init__(self, store_name: str, joiner: Callable[[Any, Any], Any], mode: str, this_is_left: bool) -> None:
        self.store_name, self.mode, self.this_is_left = store_name, mode, this_is_left
        self.joiner = joiner if this_is_left else (lambda this, other: joiner(other, this))

    def process(self, record: Record) -> None:
        if record.key is None:
            log.warning("Skipping record due to null key. topic=%s", self.context.record_metadata())
            return
        change: Change = record.value
        other = self.context.get_state_store(self.store_name).get_with_timestamp(record.key)
        other_value = None if other is None else other[0]
        timestamp = record.timestamp if other is None else max(record.timestamp, other[1])
        if self.mode in ("inner", "right"):
            if other is None:
                return
            if self.mode == "inner" and change.new_value is None:
                joined = None
            else:
                joined = self.joiner(change.new_value, other_value)
        else:  # left, outer
            if other is None and change.new_value is None and change.old_value is None:
                return
            joined = (self.joiner(change.new_value, other_value)
                      if change.new_value is not None or (self.mode == "outer" and other is not None) else None)
        self.context.forward(Record(record.key, Change(joined), timestamp, record.headers))


class TableFilter(Processor):
    """A KTable's filter: a value that fails the predicate becomes a tombstone (the key leaves the result), sent
    only when the key had passed before (Kafka sends the old values to a filter and drops an update that is a
    tombstone in both)."""

    def __init__(self, predicate: Callable[[Any, Any], bool], negate: bool) -> None:
        self.predicate, self.negate = predicate, negate

    def _kept(self, key: Any, value: Any) -> Any:
        if value is not None and bool(self.predicate(key, value)) == self.negate:
            return None
        return value

    def process(self, record: Record) -> None:
        change: Change = record.value
        new, old = self._kept(record.key, change.new_value), self._kept(record.key, change.old_value)
        if new is None and old is None:
            return
        self.context.forward(record.with_value(Change(new, old)))


class TableMapValues(Processor):
    def __init__(self, mapper: Callable[[Any], Any]) -> None:
        self.mapper = mapper

    def process(self, record: Record) -> None:
        change: Change = record.value
        self.context.forward(record.with_value(Change(
            None if change.new_value is None else self.mapper(change.new_value),
            None if change.old_value is None else self.mapper(change.old_value))))


class TableToStream(Processor):
    def process(self, record: Record) -> None:
        self.context.forward(record.with_value(record.value.new_value))


class _WindowedAggregate(CachedForwarding):
    """What the windowed aggregations share (Kafka's AbstractKStreamTimeWindowAggregateProcessor and its session
    sibling): with EmitStrategy.ON_WINDOW_CLOSE they forward no update; instead, after a record, the windows that
    closed since the last emission are forwarded from the store, each once with its final aggregate (no old value),
    in the order of Kafka's time-ordered stores. Kafka makes that pass at most once per
    __emit.interval.ms.kstreams.windowed.aggregation__ of wall clock (1 s by default); kfk.streams makes it after
    every record, as Kafka does with that interval set to 0. (Kafka keeps the last emission's close time in the
    committed offsets' metadata; kfk.streams starts again from none after a restart.)

    With the default strategy a cached store's flushes forward the updates (CachedForwarding); the DSL never
    caches the store of an ON_WINDOW_CLOSE aggregation (kfk.streams.kstream), whose emission reads the local
    store."""

    def __init__(self, emit_strategy: EmitStrategy) -> None:
        self.emit_on_close = emit_strategy is EmitStrategy.ON_WINDOW_CLOSE
        self.last_emit_close_time = -1
        self.observed_stream_time = -1

    def init(self, context: ProcessorContext) -> None:
        super().init(context)
        #: Whether process() forwards each update itself: not when the cache's flushes or the emission on close do.
        self.forward_updates = not (self.caching or self.emit_on_close)

    def _closed_windows(self, store: Any, close_time: int) -> list[tuple[Any, Window, Any, int]] | None:
        """The windows closed since the last emission as (key, window, aggregate, timestamp), read from the store
        between Kafka's emitRange bounds; None when there is no range to read."""
        raise NotImplementedError

    def _emit_closed_windows(self, store: Any, record: Record, close_time: int) -> None:
        if self.last_emit_close_time != -1 and self.last_emit_close_time >= close_time:
            return
        closed = self._closed_windows(store, close_time)
        if closed is None:
            return
        for key, window, aggregate, timestamp in closed:
            self.context.forward(Record(Windowed(key, window), Change(aggregate, None), timestamp, record.headers))
        self.last_emit_close_time = close_time


class WindowAggregate(_WindowedAggregate):
    """A windowed count()/aggregate()/reduce(): the record is added to each of its windows that is still open
    (stream time < window end + grace), and each updated window is forwarded with a Windowed key (or, on window
    close, each closed window once)."""

    def __init__(self, store_name: str, windows: TimeWindows, initializer: Callable[[], Any] | None,
                 aggregator: Callable[[Any, Any, Any], Any],
                 emit_strategy: EmitStrategy = EmitStrategy.ON_WINDOW_UPDATE) -> None:
        super().__init__(emit_strategy)
        self.store_name, self.windows = store_name, windows
        self.initializer, self.aggregator = initializer, aggregator

    def _closed_windows(self, store: Any, close_time: int) -> list[tuple[Any, Window, Any, int]] | None:
        size, last = self.windows.size_ms, self.last_emit_close_time
        latest = close_time - size
        if latest < 0:
            return None
        earliest = 0 if last == -1 else max(0, last - size) + 1
        # no window starts in the range when both ends fall in the same windows (Kafka's shouldRangeFetch)
        if last != -1 and self.windows.windows_for(latest) == self.windows.windows_for(earliest - 1):
            return None
        return [(key, Window(start, start + size), aggregate, timestamp)
                for key, start, aggregate, timestamp in store.fetch_all(earliest, latest)]

    def process(self, record: Record) -> None:
        if record.key is None or (self.initializer is None and record.value is None):
            log.warning("Skipping record due to null key or value. topic=%s", self.context.record_metadata())
            return
        store = self.context.get_state_store(self.store_name)
        self.observed_stream_time = max(self.observed_stream_time, record.timestamp)
        close_time = self.observed_stream_time - self.windows.grace_ms
        for window in self.windows.windows_for(record.timestamp):
            if window.end <= close_time:
                log.warning("Skipping record for expired window. window=[%d,%d) expiration=%d", window.start,
                            window.end, close_time)
                continue
            stored = store.fetch(record.key, window.start)
            if stored is None:
                # the old value a new window's first update carries is the initial aggregate (as Kafka's: a
                # suppress() buffer logs it as the window's prior value)
                timestamp = record.timestamp
                old = self.initializer() if self.initializer is not None else None
                new = (self.aggregator(record.key, record.value, old) if self.initializer is not None
                       else record.value)
            else:
                old, timestamp = stored[0], max(record.timestamp, stored[1])
                new = self.aggregator(record.key, record.value, old)
            store.put_window(record.key, window.start, new, timestamp)
            if self.forward_updates:
                self.context.forward(Record(Windowed(record.key, window), Change(new, old), timestamp,
                                            record.headers))
        if self.emit_on_close:
            self._emit_closed_windows(store, record, close_time)

    def forward_flushed(self, key: tuple[Any, int], new: Any, old: Any, timestamp: int, headers: tuple) -> None:
        record_key, start = key
        self.context.forward(Record(Windowed(record_key, Window(start, start + self.windows.size_ms)),
                                    Change(new, old), timestamp, headers))


class SlidingWindowAggregate(_WindowedAggregate):
    """A sliding-windowed count()/aggregate()/reduce() (Kafka's KStreamSlidingWindowAggregate): a record at t is
    added to the key's windows that hold t, its left window [t - d, t] is created from the aggregate of the window
    before it (the records of the last d ms), the previous record's right window is created when t falls in it, and
    its own right window [t + 1, t + 1 + d] from the aggregate of the later records when there are any. Windows
    are visited latest first, as Kafka's store iterates them backwards, so updates come out in Kafka's order. A
    window closed (end < stream time - grace) is not updated; a record too late for all of its windows is dropped.

    Records before the difference (t < d) would have windows starting before 0: they all go into [0, d] instead,
    as in Kafka. On window close, the closed windows are emitted after a record that is neither too late nor
    before the difference (as Kafka's)."""

    def __init__(self, store_name: str, windows: SlidingWindows, initializer: Callable[[], Any],
                 aggregator: Callable[[Any, Any, Any], Any],
                 emit_strategy: EmitStrategy = EmitStrategy.ON_WINDOW_UPDATE) -> None:
        super().__init__(emit_strategy)
        self.store_name, self.difference = store_name, windows.time_difference_ms
        self.grace_ms, self.initializer, self.aggregator = windows.grace_ms, initializer, aggregator

    def _closed_windows(self, store: Any, close_time: int) -> list[tuple[Any, Window, Any, int]] | None:
        latest = close_time - self.difference - 1
        if latest < 0:
            return None
        last = self.last_emit_close_time
        return [(key, Window(start, start + self.difference), aggregate, timestamp) for key, start, aggregate, timestamp
                in store.fetch_all(0 if last == -1 else max(0, last - self.difference), latest)]

    def process(self, record: Record) -> None:
        if record.key is None or record.value is None:
            log.warning("Skipping record due to null key or value. topic=%s", self.context.record_metadata())
            return
        timestamp, difference = record.timestamp, self.difference
        self.observed_stream_time = max(self.observed_stream_time, timestamp)
        close_time = self.observed_stream_time - self.grace_ms
        if timestamp + 1 + difference <= close_time:
            log.warning("Skipping record for expired window. timestamp=%d window=[%d,%d] expiration=%d", timestamp,
                        timestamp - difference, timestamp, close_time)
            return
        store = self.context.get_state_store(self.store_name)
        if timestamp < difference:
            self._process_early(store, record, close_time)
            return
        self._process_in_order(store, record, close_time)
        if self.emit_on_close:
            self._emit_closed_windows(store, record, close_time)

    def _process_in_order(self, store: Any, record: Record, close_time: int) -> None:
        timestamp, difference = record.timestamp, self.difference
        starts: set[int] = set()
        left_aggregate = right_aggregate = None  # (aggregate, timestamp) of the windows to copy
        left_exists = right_exists = False
        previous = None  # the time of the key's latest record before this one, when its right window may be due
        for start, value, latest in reversed(store.fetch_windows(record.key, timestamp - 2 * difference,
                                                                 timestamp + 1)):
            starts.add(start)
            end = start + difference
            if start == timestamp + 1:
                right_exists = True
            elif end > timestamp:
                if right_aggregate is None:
                    right_aggregate = (value, latest)
                self._update(store, record, start, value, latest, close_time)
            elif end == timestamp:
                left_exists = True
                self._update(store, record, start, value, latest, close_time)
                if latest >= timestamp:
                    return  # a record at this time came before: the windows it needs exist
                previous = latest
            else:
                left_aggregate, previous = value, latest
                break
        if previous is not None and previous + 1 not in starts and previous + 1 + difference >= timestamp:
            self._update(store, record, previous + 1, self.initializer(), timestamp, close_time)
        if not left_exists:
            copy = left_aggregate is not None and previous is not None and timestamp - difference <= previous
            self._update(store, record, timestamp - difference,
                         left_aggregate if copy else self.initializer(), timestamp, close_time)
        if not right_exists and right_aggregate is not None and right_aggregate[1] > timestamp:
            self._create_right_window(store, record, right_aggregate)

    def _process_early(self, store: Any, record: Record, close_time: int) -> None:
        """A record at t < d: added to the combined window [0, d] and to the later windows holding t."""
        timestamp = record.timestamp
        combined = right_aggregate = previous = None
        right_exists = False
        starts: set[int] = set()
        for start, value, latest in store.fetch_windows(record.key, 0, timestamp + 1):
            starts.add(start)
            if start == 0:
                combined = (value, latest)
                if latest < timestamp:
                    previous = latest
            elif start <= timestamp:
                right_aggregate = (value, latest)
                self._update(store, record, start, value, latest, close_time)
            else:
                right_exists = True
        if right_aggregate is None and combined is not None and combined[1] > timestamp:
            right_aggregate = combined  # the combined window only holds records after this one
        if not right_exists and right_aggregate is not None and right_aggregate[1] > timestamp:
            self._create_right_window(store, record, right_aggregate)
        if previous is not None and previous + 1 not in starts:
            self._update(store, record, previous + 1, self.initializer(), timestamp, close_time)
        if combined is None:
            self._update(store, record, 0, self.initializer(), timestamp, close_time)
        else:
            self._update(store, record, 0, combined[0], combined[1], close_time)

    def _create_right_window(self, store: Any, record: Record, aggregate: tuple[Any, int]) -> None:
        """The record's right window holds exactly the later records the found window holds: its aggregate."""
        start = record.timestamp + 1
        store.put_window(record.key, start, aggregate[0], aggregate[1])
        if self.forward_updates:
            self.context.forward(Record(Windowed(record.key, Window(start, start + self.difference)),
                                        Change(aggregate[0], None), aggregate[1], record.headers))

    def _update(self, store: Any, record: Record, start: int, old: Any, old_timestamp: int,
                close_time: int) -> None:
        end = start + self.difference
        if end < close_time:
            log.warning("Skipping record for expired window. timestamp=%d window=[%d,%d] expiration=%d",
                        record.timestamp, start, end, close_time)
            return
        new = self.aggregator(record.key, record.value, old)
        timestamp = record.timestamp if old is None else max(record.timestamp, old_timestamp)
        store.put_window(record.key, start, new, timestamp)
        if self.forward_updates:
            self.context.forward(Record(Windowed(record.key, Window(start, end)), Change(new, old), timestamp,
                                        record.headers))

    def forward_flushed(self, key: tuple[Any, int], new: Any, old: Any, timestamp: int, headers: tuple) -> None:
        record_key, start = key
        self.context.forward(Record(Windowed(record_key, Window(start, start + self.difference)), Change(new, old),
                                    timestamp, headers))


class JoinWindowed(Processor):
    """A KStream-KStream join's side: records with a key are passed on to the join, then kept in this side's
    store for the other side's records to find."""

    def __init__(self, store_name: str) -> None:
        self.store_name = store_name

    def process(self, record: Record) -> None:
        if record.key is None:
            return
        self.context.forward(record)
        if record.value is not None:
            self.context.get_state_store(self.store_name).put_record(record.key, record.value, record.timestamp)


class JoinTimes:
    """What the two sides of a left/outer KStream-KStream join share in a task (Kafka's TimeTracker): the stream
    time of both inputs, and a lower bound of the times of the records held in the outer join store."""

    def __init__(self) -> None:
        self.stream_time = -1
        self.min_time = _MAX_TIME


_MAX_TIME = 0x7FFFFFFFFFFFFFFF


class StreamStreamJoin(Processor):
    """A KStream-KStream join's side: each record joins the other side's records of its key from `before_ms`
    earlier to `after_ms` later, oldest first, each result timestamped with the later record's time.

    A left/outer join's side (``outer``) also emits its records that found nothing, joined with None (Kafka 3.x+
    semantics): such a record is held in the shared outer join store while a record of the other side may still
    join it, and emitted once stream time (of both sides) passes its time plus the window and the grace; one the
    other side joins is dropped from the store. (Kafka throttles those emissions to one pass a second by wall clock;
    kfk.streams makes the pass on every record, as Kafka does with the internal emit interval set to 0.)"""

    def __init__(self, other_store: str, joiner: Callable[[Any, Any], Any], windows: JoinWindows,
                 this_is_left: bool, outer: bool = False, outer_store: str | None = None,
                 times: dict | None = None) -> None:
        self.other_store = other_store
        self.windows, self.this_is_left, self.outer, self.outer_store = windows, this_is_left, outer, outer_store
        self.before_ms = windows.before_ms if this_is_left else windows.after_ms
        self.after_ms = windows.after_ms if this_is_left else windows.before_ms
        self.user_joiner = joiner
        self.joiner = joiner if this_is_left else (lambda this, other: joiner(other, this))
        self.times_by_task = times if times is not None else {}

    def init(self, context: ProcessorContext) -> None:
        super().init(context)
        self.times = self.times_by_task.setdefault(context.task_id, JoinTimes())

    def close(self) -> None:
        self.times_by_task.pop(self.context.task_id, None)

    def process(self, record: Record) -> None:
        timestamp = record.timestamp
        times = self.times
        times.stream_time = max(times.stream_time, timestamp)
        if self.outer and record.key is None and record.value is not None:
            self.context.forward(record.with_value(self.joiner(record.value, None)))
            return
        if record.key is None or record.value is None:
            log.warning("Skipping record due to null key or value. topic=%s", self.context.record_metadata())
            return
        outer_store = None if self.outer_store is None else self.context.get_state_store(self.outer_store)
        if outer_store is not None and timestamp == times.stream_time:
            self._emit_unjoined(outer_store, record)
        time_from = max(0, timestamp - self.before_ms)
        time_to = max(0, timestamp + self.after_ms)
        store = self.context.get_state_store(self.other_store)
        others = list(store.fetch_records(record.key, time_from, time_to))
        for other_value, other_timestamp in others:
            if outer_store is not None:
                outer_store.joined(record.key, other_timestamp, not self.this_is_left, timestamp)
            self.context.forward(Record(record.key, self.joiner(record.value, other_value),
                                        max(timestamp, other_timestamp), record.headers))
        if self.outer and not others:
            if outer_store is None or time_to < times.stream_time:
                self.context.forward(record.with_value(self.joiner(record.value, None)))
            else:
                times.min_time = min(times.min_time, timestamp)
                outer_store.add(record.key, timestamp, self.this_is_left, record.value, timestamp)

    def _emit_unjoined(self, outer_store: Any, record: Record) -> None:
        times, grace = self.times, self.windows.grace_ms
        if times.min_time + self.after_ms + grace >= times.stream_time:
            return
        times.min_time = _MAX_TIME
        previous = None
        for key_bytes, timestamp, left, key, values in outer_store.held():
            times.min_time = timestamp
            look_back = self.windows.after_ms if left else self.windows.before_ms
            if timestamp + look_back + grace >= times.stream_time:
                continue  # still open: the other side may join it
            for value in values:
                joined = self.user_joiner(value, None) if left else self.user_joiner(None, value)
                self.context.forward(Record(key, joined, timestamp, record.headers))
            if previous is not None and previous != key_bytes:
                outer_store.remove(previous, record.timestamp)
            previous = key_bytes
        if previous is not None:
            outer_store.remove(previous, record.timestamp)

class WindowedTableSuppress(Processor):
    """suppress(until_window_closes): each update of a windowed table is held in the buffer (the latest per window)
    until stream time, as the updates' own timestamps advance it, reaches the window's end plus `grace_ms`; then
    the window's final value is forwarded once, with the timestamp and headers of the update that brought it."""

    def __init__(self, store_name: str, grace_ms: int) -> None:
        self.store_name, self.grace_ms = store_name, grace_ms
        self.observed_stream_time = -1

    def process(self, record: Record) -> None:
        self.observed_stream_time = max(self.observed_stream_time, record.timestamp)
        buffer = self.context.get_state_store(self.store_name)
        change: Change = record.value
        buffer.put(record.key.window.end, record.key, change.new_value, change.old_value, record.timestamp,
                   self.context.record_metadata(), record.headers)
        for key, new, old, buffered in buffer.evict_until(self.observed_stream_time - self.grace_ms,
                                                          record.timestamp):
            if new is not None:  # a final result's tombstone is safe to drop
                self.context.forward(Record(key, Change(new, old), buffered.timestamp, buffered.headers))


class SessionWindowAggregate(_WindowedAggregate):
    """A session-windowed count()/aggregate()/reduce(): a record joins every session of its key that ends at most
    the gap before it or starts at most the gap after it; those sessions are merged (``merger(key, aggregate,
    session's aggregate)``, from the initial aggregate), removed and forwarded as tombstones, and the merged session,
    with the record added, is kept and forwarded. Each result is timestamped with its session's end. A record whose
    merged session ended before stream time - grace - gap is dropped, as Kafka drops it. On window close, the
    sessions that ended before stream time - grace - gap are emitted, by end, start and key, after every record
    (also a dropped one, as Kafka's)."""

    def __init__(self, store_name: str, windows: SessionWindows, initializer: Callable[[], Any],
                 aggregator: Callable[[Any, Any, Any], Any], merger: Callable[[Any, Any, Any], Any],
                 emit_strategy: EmitStrategy = EmitStrategy.ON_WINDOW_UPDATE) -> None:
        super().__init__(emit_strategy)
        self.store_name, self.windows = store_name, windows
        self.initializer, self.aggregator, self.merger = initializer, aggregator, merger

    def _closed_windows(self, store: Any, close_time: int) -> list[tuple[Any, Window, Any, int]] | None:
        earliest, latest = max(0, self.last_emit_close_time), close_time - 1
        if latest < earliest:
            return None
        return [(key, session, aggregate, session.end)
                for key, session, aggregate in store.fetch_all_sessions(earliest, latest)]

    def process(self, record: Record) -> None:
        if record.key is None:
            log.warning("Skipping record due to null key. topic=%s", self.context.record_metadata())
            return
        store = self.context.get_state_store(self.store_name)
        timestamp = record.timestamp
        self.observed_stream_time = max(self.observed_stream_time, timestamp)
        close_time = self.observed_stream_time - self.windows.grace_ms - self.windows.gap_ms
        merged = store.find_sessions(record.key, timestamp - self.windows.gap_ms, timestamp + self.windows.gap_ms)
        aggregate = self.initializer()
        start = end = timestamp
        for window, value in merged:
            aggregate = self.merger(record.key, aggregate, value)
            start, end = min(start, window.start), max(end, window.end)
        if end < close_time:
            log.warning("Skipping record for expired window. window=[%d,%d] expiration=%d", start, end, close_time)
        else:
            self._update(store, record, merged, aggregate, Window(start, end))
        if self.emit_on_close:
            self._emit_closed_windows(store, record, close_time)

    def _update(self, store: Any, record: Record, merged: list[tuple[Window, Any]], aggregate: Any,
                session: Window) -> None:
        if session != Window(record.timestamp, record.timestamp):
            for window, value in merged:
                store.put_session(record.key, window, None, record.timestamp)
                if self.forward_updates:
                    self.context.forward(Record(Windowed(record.key, window), Change(None, value), window.end,
                                                record.headers))
        aggregate = self.aggregator(record.key, record.value, aggregate)
        store.put_session(record.key, session, aggregate, record.timestamp)
        if self.forward_updates:
            self.context.forward(Record(Windowed(record.key, session), Change(aggregate, None), session.end,
                                        record.headers))

    def forward_flushed(self, key: tuple[Any, Window], new: Any, old: Any, timestamp: int, headers: tuple) -> None:
        """A session's update goes downstream at the session's end, as Kafka's session cache flush listener sends
        it."""
        record_key, window = key
        self.context.forward(Record(Windowed(record_key, window), Change(new, old), window.end, headers))
