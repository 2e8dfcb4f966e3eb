"""The DSL: StreamsBuilder, KStream, BranchedKStream, KGroupedStream and KTable, named as Kafka Streams' in
snake_case.

Each operator adds nodes to the Topology the builder holds, named as Kafka names them: an operator without an
explicit ``named`` takes ``<PREFIX>-<index>`` (KSTREAM-FILTER-0000000001), the index counting every name the
builder has generated so far, including the names Kafka generates and then discards (a named repartition still
uses up three indexes), so that a topology written the same way in Java and in Python has the same processor,
store and internal topic names, and the same describe() text.

An operator that changes keys (map, flat_map, select_key, group_by) marks the stream as needing a repartition: the
next aggregation first writes the stream through ``<application.id>-<name>-repartition``, where ``name`` is the
store's (or repartition()'s) name, so that every record of a key reaches the same task.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any

from kfk.streams import dsl_processors as p
from kfk.streams import foreign_key_join as fk
from kfk.streams.materialized import Materialized
from kfk.streams.serdes import Serde, Serdes
from kfk.streams.suppressed import Suppressed
from kfk.streams.topology import (REPARTITION_TOPIC_SUFFIX, StoreBuilder, StreamPartitioner, TopicNameExtractor,
                                  Topology)
from kfk.streams.windows import EmitStrategy, JoinWindows, SessionWindows, SlidingWindows, TimeWindows

__all__ = ["StreamsBuilder", "KStream", "KTable", "GlobalKTable", "KGroupedStream", "TimeWindowedKStream", "SessionWindowedKStream",
           "BranchedKStream", "Branched", "TableJoined"]

_GENERATED = re.compile(r"KSTREAM.*-[0-9]{10}")


@dataclass(frozen=True)
class Branched:
    """A branch of split(): its name (suffix of the split's prefix), and either a ``chain`` (KStream -> KStream,
    whose result is what the branches map holds) or a ``consumer`` (KStream -> None; the branch is not in it)."""

    name: str | None = None
    chain: Callable[[KStream], KStream | None] | None = None
    consumer: Callable[[KStream], None] | None = None


@dataclass(frozen=True)
class TableJoined:
    """How a foreign-key join is named and partitioned (Kafka's TableJoined, for KTable.join/left_join with a
    foreign key extractor). With a ``name`` its processors, its subscription store and its two internal topics are
    named from it (``<name>-subscription-registration-topic``, ``<name>-subscription-store``, ``<name>-result``...)
    instead of Kafka's generated names, so that they stay the same when the topology around them changes.

    The partitioners are for tables whose topics were not partitioned by the default partitioner: ``partitioner``
    is how this (left) table is, and places the answers (else each goes back to the partition its subscription
    came from); ``other_partitioner`` how the other table is, and places the subscriptions by foreign key. Each is
    Kafka's StreamPartitioner: ``(topic, key, None, partition count) -> partition``, None for the default."""

    name: str | None = None
    partitioner: StreamPartitioner | None = None
    other_partitioner: StreamPartitioner | None = None

    @classmethod
    def as_(cls, name: str) -> TableJoined:
        """Kafka's TableJoined.as(name) (``as`` is a Python keyword)."""
        return cls(name)

    @classmethod
    def with_(cls, partitioner: StreamPartitioner | None,
              other_partitioner: StreamPartitioner | None) -> TableJoined:
        """Kafka's TableJoined.with(partitioner, otherPartitioner)."""
        return cls(None, partitioner, other_partitioner)

    def with_name(self, name: str) -> TableJoined:
        return replace(self, name=name)

    def with_partitioner(self, partitioner: StreamPartitioner | None) -> TableJoined:
        return replace(self, partitioner=partitioner)

    def with_other_partitioner(self, other_partitioner: StreamPartitioner | None) -> TableJoined:
        return replace(self, other_partitioner=other_partitioner)


class StreamsBuilder:
    def __init__(self) -> None:
        self.topology = Topology()
        self._index = 0

    def new_processor_name(self, prefix: str) -> str:
        name = f"{prefix}{self._index:010d}"
        self._index += 1
        return name

    def new_store_name(self, prefix: str) -> str:
        return self.new_processor_name(f"{prefix}STATE-STORE-")

    def _name(self, named: str | None, prefix: str) -> str:
        return named if named is not None else self.new_processor_name(prefix)

    def stream(self, topics: str | Iterable[str], *, key_serde: Serde | None = None,
               value_serde: Serde | None = None, named: str | None = None) -> KStream:
        topics = [topics] if isinstance(topics, str) else list(topics)
        name = self._name(named, "KSTREAM-SOURCE-")
        self.topology.add_source(name, *topics, key_serde=key_serde, value_serde=value_serde)
        return KStream(self, name, key_serde, value_serde, repartition_required=False)

    def table(self, topic: str, *, key_serde: Serde | None = None, value_serde: Serde | None = None,
              materialized: str | Materialized | None = None) -> KTable:
        """The topic as a table: the latest value per key, kept in a store (``materialized``, else
        ``<topic>-STATE-STORE-<index>``) with its own changelog. As in Kafka, the store is cached only once the
        table is materialized: named by ``materialized``, or read by a join."""
        materialized = Materialized.of(materialized)
        named = materialized.store_name is not None
        store = materialized.store_name if named else self.new_store_name(f"{topic}-")
        source = self.new_processor_name("KSTREAM-SOURCE-")
        name = self.new_processor_name("KTABLE-SOURCE-")
        self.topology.add_source(source, topic, key_serde=key_serde, value_serde=value_serde)
        self.topology.add_processor(name, lambda: p.TableSource(store), source)
        self.topology.add_state_store(StoreBuilder(store, key_serde, value_serde,
                                                   caching=named and materialized.caching), name)
        return KTable(self, name, key_serde, value_serde, store,
                      materialize_caching=materialized.caching and not named)

    def global_table(self, topic: str, *, key_serde: Serde | None = None, value_serde: Serde | None = None,
                     materialized: str | None = None) -> GlobalKTable:
        """The topic as a table every instance holds in full (all partitions), in a store named ``materialized``
        (else ``<topic>-STATE-STORE-<index>``), fed by a global consumer; joined from any stream with a key
        selector, without co-partitioning."""
        store = materialized if materialized is not None else self.new_store_name(f"{topic}-")
        source = self.new_processor_name("KSTREAM-SOURCE-")
        name = self.new_processor_name("KTABLE-SOURCE-")
        self.topology.add_global_store(StoreBuilder(store, key_serde, value_serde), source, topic, name,
                                       lambda: p.TableSource(store), key_serde=key_serde, value_serde=value_serde)
        return GlobalKTable(store)

    def build(self) -> Topology:
        return self.topology


def _by_foreign_key(partitioner: StreamPartitioner | None) -> StreamPartitioner | None:
    """A foreign-key join's subscriptions placed by a TableJoined's other partitioner, given their foreign key
    (Kafka's SubscriptionSinkPartitioner); without one, the producer's partitioner places them."""
    if partitioner is None:
        return None
    return lambda topic, key, registration, partitions: partitioner(topic, registration.foreign_key, None, partitions)


def _by_primary_key(partitioner: StreamPartitioner | None) -> StreamPartitioner:
    """A foreign-key join's answers placed by a TableJoined's partitioner, given their primary key (Kafka's
    ForeignResponseSinkPartitioner), else back to the partition of the subscription they answer."""
    if partitioner is None:
        return lambda topic, key, response, partitions: response.subscription.primary_partition
    return lambda topic, key, response, partitions: partitioner(topic, response.primary_key(), None, partitions)


@dataclass(frozen=True)
class GlobalKTable:
    """What global_table() returns: the name of the store every instance holds."""

    store_name: str


class KStream:
    def __init__(self, builder: StreamsBuilder, name: str, key_serde: Serde | None, value_serde: Serde | None,
                 repartition_required: bool) -> None:
        self.builder = builder
        self.name = name
        self.key_serde = key_serde
        self.value_serde = value_serde
        self.repartition_required = repartition_required

    def _then(self, prefix: str, processor: Callable[[], Any], named: str | None, *, key_changed: bool = False,
              value_changed: bool = False) -> KStream:
        name = self.builder._name(named, prefix)
        self.builder.topology.add_processor(name, processor, self.name)
        return KStream(self.builder, name, None if key_changed else self.key_serde,
                       None if value_changed else self.value_serde, self.repartition_required or key_changed)

    # --- stateless ---------------------------------------------------------------------------------------------------

    def filter(self, predicate: Callable[[Any, Any], bool], named: str | None = None) -> KStream:
        return self._then("KSTREAM-FILTER-", lambda: p.Filter(predicate, negate=False), named)

    def filter_not(self, predicate: Callable[[Any, Any], bool], named: str | None = None) -> KStream:
        return self._then("KSTREAM-FILTER-", lambda: p.Filter(predicate, negate=True), named)

    def map(self, mapper: Callable[[Any, Any], tuple[Any, Any]], named: str | None = None) -> KStream:
        return self._then("KSTREAM-MAP-", lambda: p.Map(mapper), named, key_changed=True, value_changed=True)

    def map_values(self, mapper: Callable[[Any], Any], named: str | None = None) -> KStream:
        return self._then("KSTREAM-MAPVALUES-", lambda: p.MapValues(mapper), named, value_changed=True)

    def flat_map(self, mapper: Callable[[Any, Any], Iterable[tuple[Any, Any]]], named: str | None = None) -> KStream:
        return self._then("KSTREAM-FLATMAP-", lambda: p.FlatMap(mapper), named, key_changed=True,
                          value_changed=True)

    def flat_map_values(self, mapper: Callable[[Any], Iterable[Any]], named: str | None = None) -> KStream:
        return self._then("KSTREAM-FLATMAPVALUES-", lambda: p.FlatMapValues(mapper), named, value_changed=True)

    def peek(self, action: Callable[[Any, Any], None], named: str | None = None) -> KStream:
        return self._then("KSTREAM-PEEK-", lambda: p.Peek(action, forward=True), named)

    def foreach(self, action: Callable[[Any, Any], None], named: str | None = None) -> None:
        self._then("KSTREAM-FOREACH-", lambda: p.Peek(action, forward=False), named)

    def select_key(self, mapper: Callable[[Any, Any], Any], named: str | None = None) -> KStream:
        return self._then("KSTREAM-KEY-SELECT-", lambda: p.SelectKey(mapper), named, key_changed=True)

    def merge(self, other: KStream, named: str | None = None) -> KStream:
        name = self.builder._name(named, "KSTREAM-MERGE-")
        self.builder.topology.add_processor(name, p.PassThrough, self.name, other.name)
        same = self.key_serde is other.key_serde and self.value_serde is other.value_serde
        return KStream(self.builder, name, self.key_serde if same else None, self.value_serde if same else None,
                       self.repartition_required or other.repartition_required)

    def join(self, other: KTable | KStream, joiner: Callable[[Any, Any], Any], windows: JoinWindows | None = None,
             named: str | None = None) -> KStream:
        """KStream-KTable inner join: ``joiner(stream value, table value)`` for records whose key is in the table;
        KStream-KStream inner join (``windows`` required): ``joiner(this value, other value)`` for every pair of
        records of one key at most the windows' time difference apart."""
        if isinstance(other, KStream):
            return self._join_stream(other, joiner, windows, named, left_outer=False, right_outer=False)
        if isinstance(other, GlobalKTable):  # join(global_table, key_selector, joiner), as Kafka's
            return self._join_global(other, joiner, windows, named, left=False)
        return self._join_table(other, joiner, named, left=False)

    def left_join(self, other: KTable | KStream, joiner: Callable[[Any, Any], Any],
                  windows: JoinWindows | None = None, named: str | None = None) -> KStream:
        """KStream-KTable left join: every record, with None where the key is not in the table. KStream-KStream
        left join (``windows`` required): the inner join's pairs, and each record of this stream that none of the
        other's joined, as ``joiner(value, None)``, once its window has closed."""
        if isinstance(other, KStream):
            return self._join_stream(other, joiner, windows, named, left_outer=True, right_outer=False)
        if isinstance(other, GlobalKTable):  # left_join(global_table, key_selector, joiner), as Kafka's
            return self._join_global(other, joiner, windows, named, left=True)
        return self._join_table(other, joiner, named, left=True)

    def _join_global(self, table: GlobalKTable, key_selector: Callable[[Any, Any], Any], joiner: Any,
                     named: str | None, left: bool) -> KStream:
        """KStream-GlobalKTable join: each record looks up ``key_selector(key, value)`` in the global store and
        keeps its own key; the stream needs no repartition and no co-partitioning."""
        name = self.builder._name(named, "KSTREAM-LEFTJOIN-" if left else "KSTREAM-JOIN-")
        store = table.store_name
        self.builder.topology.add_processor(
            name, lambda: p.StreamTableJoin(store, joiner, left, key_selector=key_selector), self.name)
        return KStream(self.builder, name, self.key_serde, None, self.repartition_required)

    def outer_join(self, other: KStream, joiner: Callable[[Any, Any], Any], windows: JoinWindows,
                   named: str | None = None) -> KStream:
        """KStream-KStream outer join: the left join, and the other stream's records that none of this one's
        joined, as ``joiner(None, value)``."""
        return self._join_stream(other, joiner, windows, named, left_outer=True, right_outer=True)

    def _join_stream(self, other: KStream, joiner: Callable[[Any, Any], Any], windows: JoinWindows | None,
                     named: str | None, *, left_outer: bool, right_outer: bool) -> KStream:
        if windows is None:
            raise ValueError("a KStream-KStream join needs JoinWindows")
        if self.repartition_required or other.repartition_required:
            raise NotImplementedError("kfk.streams does not yet repartition a re-keyed stream before a join: "
                                      "call repartition() first")
        builder = self.builder
        this_prefix = "KSTREAM-OUTERTHIS-" if right_outer else "KSTREAM-JOINTHIS-"
        other_prefix = "KSTREAM-OUTEROTHER-" if left_outer else "KSTREAM-JOINOTHER-"
        this_windowed = f"{named}-this-windowed" if named else builder.new_processor_name("KSTREAM-WINDOWED-")
        other_windowed = f"{named}-other-windowed" if named else builder.new_processor_name("KSTREAM-WINDOWED-")
        this_join = f"{named}-this-join" if named else builder.new_processor_name(this_prefix)
        other_join = f"{named}-other-join" if named else builder.new_processor_name(other_prefix)
        merge = f"{named}-merge" if named else builder.new_processor_name("KSTREAM-MERGE-")
        this_store, other_store = f"{this_join}-store", f"{other_join}-store"
        # Kafka names the shared store after the this-side processor's index
        outer_store = f"KSTREAM-OUTERSHARED-{this_join[len(this_prefix):]}-store" if left_outer else None
        topology = builder.topology
        topology.add_processor(this_windowed, lambda: p.JoinWindowed(this_store), self.name)
        topology.add_state_store(StoreBuilder(this_store, self.key_serde, self.value_serde, windows=windows),
                                 this_windowed)
        topology.add_processor(other_windowed, lambda: p.JoinWindowed(other_store), other.name)
        topology.add_state_store(StoreBuilder(other_store, other.key_serde, other.value_serde, windows=windows),
                                 other_windowed)
        times: dict = {}  # the sides' shared stream time, per task
        topology.add_processor(this_join, lambda: p.StreamStreamJoin(other_store, joiner, windows, True, left_outer,
                                                                     outer_store, times), this_windowed)
        topology.connect_processor_and_state_stores(this_join, stores=[other_store])
        topology.add_processor(other_join, lambda: p.StreamStreamJoin(this_store, joiner, windows, False,
                                                                      right_outer, outer_store, times),
                               other_windowed)
        topology.connect_processor_and_state_stores(other_join, stores=[this_store])
        topology.add_processor(merge, p.PassThrough, this_join, other_join)
        if outer_store is not None:
            topology.add_state_store(StoreBuilder(outer_store, self.key_serde, self.value_serde, outer_join=True,
                                                  other_value_serde=other.value_serde), this_join, other_join)
        topology.copartition_groups.append(set(topology.upstream_source_topics(self.name))
                                           | set(topology.upstream_source_topics(other.name)))
        return KStream(builder, merge, self.key_serde, None, repartition_required=False)

    def _join_table(self, table: KTable, joiner: Callable[[Any, Any], Any], named: str | None,
                    left: bool) -> KStream:
        if self.repartition_required:
            raise NotImplementedError("kfk.streams does not yet repartition a re-keyed stream before a join: "
                                      "call repartition() first")
        store = table.store_name
        if store is None:
            raise NotImplementedError("kfk.streams joins only tables backed by a store (builder.table() or an "
                                      "aggregation)")
        table._materialize()
        name = self.builder._name(named, "KSTREAM-LEFTJOIN-" if left else "KSTREAM-JOIN-")
        topology = self.builder.topology
        topology.add_processor(name, lambda: p.StreamTableJoin(store, joiner, left), self.name)
        topology.connect_processor_and_state_stores(name, stores=[store])
        topology.copartition_groups.append(set(topology.upstream_source_topics(self.name))
                                           | set(topology.upstream_source_topics(table.name)))
        return KStream(self.builder, name, self.key_serde, None, repartition_required=False)

    def split(self, named: str | None = None) -> BranchedKStream:
        # Kafka always draws an index for the split, even a named one.
        generated = self.builder.new_processor_name("KSTREAM-BRANCH-")
        name = named if named is not None else generated
        branches: list[tuple[Callable[[Any, Any], bool] | None, str]] = []
        self.builder.topology.add_processor(name, lambda: p.Branch(branches), self.name)
        return BranchedKStream(self, name, branches)

    def to(self, topic: str | TopicNameExtractor, *, key_serde: Serde | None = None,
           value_serde: Serde | None = None, named: str | None = None) -> None:
        """Write to ``topic``, or to the topic a TopicNameExtractor (key, value, record) -> str picks per record."""
        name = self.builder._name(named, "KSTREAM-SINK-")
        self.builder.topology.add_sink(name, topic, self.name, key_serde=key_serde or self.key_serde,
                                       value_serde=value_serde or self.value_serde)

    def repartition(self, name: str | None = None, *, num_partitions: int | None = None,
                    key_serde: Serde | None = None, value_serde: Serde | None = None) -> KStream:
        """Write through ``<application.id>-<name>-repartition`` and read back (Kafka's repartition())."""
        prefix = name if name is not None else self.builder.new_processor_name("KSTREAM-REPARTITION-")
        source = self._through_repartition_topic(prefix, key_serde or self.key_serde,
                                                 value_serde or self.value_serde, num_partitions)
        return KStream(self.builder, source, key_serde or self.key_serde, value_serde or self.value_serde,
                       repartition_required=False)

    def _through_repartition_topic(self, prefix: str, key_serde: Serde | None, value_serde: Serde | None,
                                   num_partitions: int | None = None) -> str:
        """The filter, sink and source of a repartition topic; returns the source's name."""
        topic = prefix if prefix.endswith(REPARTITION_TOPIC_SUFFIX) else prefix + REPARTITION_TOPIC_SUFFIX
        builder = self.builder
        generated = [builder.new_processor_name(kind) for kind in ("KSTREAM-SINK-", "KSTREAM-FILTER-",
                                                                     "KSTREAM-SOURCE-")]
        if _GENERATED.fullmatch(prefix):
            sink, filter_name, source = generated
        else:
            sink, filter_name, source = (f"{topic}-sink", f"{topic}-filter", f"{topic}-source")
        topology = builder.topology
        topology.add_processor(filter_name, p.DropNullKeys, self.name)
        topology.add_sink(sink, topic, filter_name, key_serde=key_serde, value_serde=value_serde)
        topology.add_source(source, topic, key_serde=key_serde, value_serde=value_serde)
        topology.repartition_topics[topic] = num_partitions
        return source

    # --- grouping ----------------------------------------------------------------------------------------------------

    def group_by_key(self, *, key_serde: Serde | None = None, value_serde: Serde | None = None,
                     name: str | None = None) -> KGroupedStream:
        return KGroupedStream(self, key_serde or self.key_serde, value_serde or self.value_serde, name,
                              self.repartition_required)

    def group_by(self, selector: Callable[[Any, Any], Any], *, key_serde: Serde | None = None,
                 value_serde: Serde | None = None, name: str | None = None) -> KGroupedStream:
        selected = self.select_key(selector)
        return KGroupedStream(selected, key_serde, value_serde or self.value_serde, name, True)


class BranchedKStream:
    """What split() returns: add branches, then default_branch() or no_default_branch() give the branches by
    name (the split's name followed by the branch's name, or by its position from 1; the default branch's is 0)."""

    def __init__(self, stream: KStream, name: str, branches: list) -> None:
        self.stream, self.name, self._branches = stream, name, branches
        self._result: dict[str, KStream] = {}

    def branch(self, predicate: Callable[[Any, Any], bool], branched: Branched = Branched()) -> BranchedKStream:
        self._add(predicate, branched, str(len(self._branches) + 1))
        return self

    def default_branch(self, branched: Branched = Branched()) -> dict[str, KStream]:
        self._add(None, branched, "0")
        return self._result

    def no_default_branch(self) -> dict[str, KStream]:
        return self._result

    def _add(self, predicate: Callable[[Any, Any], bool] | None, branched: Branched, position: str) -> None:
        builder = self.stream.builder
        builder.new_processor_name("KSTREAM-BRANCHCHILD-")  # Kafka draws an index for every branch
        child = self.name + (branched.name if branched.name is not None else position)
        builder.topology.add_processor(child, p.PassThrough, self.name)
        self._branches.append((predicate, child))
        stream = KStream(builder, child, self.stream.key_serde, self.stream.value_serde,
                         self.stream.repartition_required)
        if branched.consumer is not None:
            branched.consumer(stream)
            return
        if branched.chain is not None:
            chained = branched.chain(stream)
            if chained is None:
                return
            stream = chained
        self._result[child] = stream


class KGroupedStream:
    def __init__(self, stream: KStream, key_serde: Serde | None, value_serde: Serde | None, name: str | None,
                 repartition_required: bool) -> None:
        self.stream = stream
        self.key_serde = key_serde
        self.value_serde = value_serde
        self.name = name
        self.repartition_required = repartition_required

    def count(self, materialized: str | Materialized | None = None, named: str | None = None) -> KTable:
        """Records per key, in a store named ``materialized`` (or KSTREAM-AGGREGATE-STATE-STORE-<index>)."""
        return self._aggregate("KSTREAM-AGGREGATE-", materialized, named, Serdes.long(),
                               lambda store: p.StreamAggregate(store, lambda: 0, lambda key, value, total: total + 1))

    def reduce(self, reducer: Callable[[Any, Any], Any], materialized: str | Materialized | None = None,
               named: str | None = None, value_serde: Serde | None = None) -> KTable:
        return self._aggregate("KSTREAM-REDUCE-", materialized, named, value_serde or self.value_serde,
                               lambda store: p.StreamReduce(store, reducer))

    def aggregate(self, initializer: Callable[[], Any], aggregator: Callable[[Any, Any, Any], Any],
                  materialized: str | Materialized | None = None, named: str | None = None,
                  value_serde: Serde | None = None) -> KTable:
        """``aggregator(key, value, aggregate)`` returns the new aggregate; ``value_serde`` is the aggregate's
        (the store's and changelog's; default.value.serde when None)."""
        return self._aggregate("KSTREAM-AGGREGATE-", materialized, named, value_serde,
                               lambda store: p.StreamAggregate(store, initializer, aggregator))

    def windowed_by(self, windows: TimeWindows | SlidingWindows | SessionWindows
                    ) -> TimeWindowedKStream | SessionWindowedKStream:
        if isinstance(windows, SessionWindows):
            return SessionWindowedKStream(self, windows)
        return TimeWindowedKStream(self, windows)

    def _aggregate(self, prefix: str, materialized: str | Materialized | None, named: str | None,
                   value_serde: Serde | None, processor: Callable[[str], Any],
                   windows: TimeWindows | SlidingWindows | SessionWindows | None = None,
                   emit_strategy: EmitStrategy = EmitStrategy.ON_WINDOW_UPDATE) -> KTable:
        """The aggregation's processor and its store (named by ``materialized``, else generated; cached unless
        ``materialized`` disables caching or the aggregation emits on window close).

        An ON_WINDOW_CLOSE aggregation emits from its local store, never cached: as Kafka's session and sliding
        window aggregations (their materializers disable caching for it). Kafka does cache a time-window one, in a
        time-ordered store whose range reads merge the cache: its output is the same, but its changelog receives
        the windows' updates batched by the cache where kfk.streams' receives every update."""
        builder = self.stream.builder
        materialized = Materialized.of(materialized)
        store = (materialized.store_name if materialized.store_name is not None
                 else builder.new_store_name(prefix))
        name = builder._name(named, prefix)
        parent = self.stream.name
        if self.repartition_required:
            parent = self.stream._through_repartition_topic(self.name or store, self.key_serde, self.value_serde)
        topology = builder.topology
        topology.add_processor(name, lambda: processor(store), parent)
        caching = materialized.caching and emit_strategy is EmitStrategy.ON_WINDOW_UPDATE
        topology.add_state_store(StoreBuilder(store, self.key_serde, value_serde, windows=windows, caching=caching),
                                 name)
        return KTable(builder, name, self.key_serde, value_serde, store, windows)


class TimeWindowedKStream:
    """A grouped stream cut into time windows or sliding windows (windowed_by): its aggregations give a KTable
    keyed by Windowed keys (record key and window), updated on every record or, with
    emit_strategy(EmitStrategy.on_window_close()), once per window when it closes."""

    def __init__(self, grouped: KGroupedStream, windows: TimeWindows | SlidingWindows) -> None:
        self.grouped = grouped
        self.windows = windows
        self.strategy = EmitStrategy.ON_WINDOW_UPDATE

    def emit_strategy(self, strategy: EmitStrategy) -> TimeWindowedKStream:
        """When the aggregations below forward their windows (Kafka's emitStrategy, KIP-825)."""
        self.strategy = strategy
        return self

    def _processor(self, store: str, initializer: Callable[[], Any] | None,
                   aggregator: Callable[[Any, Any, Any], Any]) -> p.Processor:
        if isinstance(self.windows, SlidingWindows):
            return p.SlidingWindowAggregate(store, self.windows, initializer or (lambda: None), aggregator,
                                            self.strategy)
        return p.WindowAggregate(store, self.windows, initializer, aggregator, self.strategy)

    def count(self, materialized: str | Materialized | None = None, named: str | None = None) -> KTable:
        return self.grouped._aggregate(
            "KSTREAM-AGGREGATE-", materialized, named, Serdes.long(),
            lambda store: self._processor(store, lambda: 0, lambda key, value, total: total + 1), self.windows,
            self.strategy)

    def aggregate(self, initializer: Callable[[], Any], aggregator: Callable[[Any, Any, Any], Any],
                  materialized: str | Materialized | None = None, named: str | None = None,
                  value_serde: Serde | None = None) -> KTable:
        return self.grouped._aggregate(
            "KSTREAM-AGGREGATE-", materialized, named, value_serde,
            lambda store: self._processor(store, initializer, aggregator), self.windows, self.strategy)

    def reduce(self, reducer: Callable[[Any, Any], Any], materialized: str | Materialized | None = None,
               named: str | None = None) -> KTable:
        """The first value of a window is its aggregate (reducer(aggregate, value) after it)."""
        return self.grouped._aggregate(
            "KSTREAM-REDUCE-", materialized, named, self.grouped.value_serde,
            lambda store: self._processor(
                store, None, lambda key, value, old: value if old is None else reducer(old, value)),
            self.windows, self.strategy)


class SessionWindowedKStream:
    """A grouped stream cut into sessions (windowed_by(SessionWindows)): its aggregations give a KTable keyed by
    Windowed keys whose window is the session [start, end] (both inclusive); a merge of sessions shows as
    tombstones for the merged ones and the new session's value (or, with
    emit_strategy(EmitStrategy.on_window_close()), each session once, when it closes)."""

    def __init__(self, grouped: KGroupedStream, windows: SessionWindows) -> None:
        self.grouped = grouped
        self.windows = windows
        self.strategy = EmitStrategy.ON_WINDOW_UPDATE

    def emit_strategy(self, strategy: EmitStrategy) -> SessionWindowedKStream:
        """When the aggregations below forward their sessions (Kafka's emitStrategy, KIP-825)."""
        self.strategy = strategy
        return self

    def count(self, materialized: str | Materialized | None = None, named: str | None = None) -> KTable:
        return self.aggregate(lambda: 0, lambda key, value, total: total + 1, lambda key, one, two: one + two,
                              materialized, named, Serdes.long())

    def aggregate(self, initializer: Callable[[], Any], aggregator: Callable[[Any, Any, Any], Any],
                  merger: Callable[[Any, Any, Any], Any], materialized: str | Materialized | None = None,
                  named: str | None = None, value_serde: Serde | None = None) -> KTable:
        """``merger(key, aggregate, other session's aggregate)`` combines two sessions a record bridges."""
        return self.grouped._aggregate(
            "KSTREAM-AGGREGATE-", materialized, named, value_serde,
            lambda store: p.SessionWindowAggregate(store, self.windows, initializer, aggregator, merger,
                                                   self.strategy),
            self.windows, self.strategy)

    def reduce(self, reducer: Callable[[Any, Any], Any], materialized: str | Materialized | None = None,
               named: str | None = None) -> KTable:
        def aggregator(key: Any, value: Any, aggregate: Any) -> Any:
            return value if aggregate is None else reducer(aggregate, value)

        return self.grouped._aggregate(
            "KSTREAM-REDUCE-", materialized, named, self.grouped.value_serde,
            lambda store: p.SessionWindowAggregate(store, self.windows, lambda: None, aggregator,
                                                   lambda key, one, two: aggregator(key, two, one), self.strategy),
            self.windows, self.strategy)


class KTable:
    """A changelog stream: every update of a key replaces its value; None (a tombstone) deletes it."""

    def __init__(self, builder: StreamsBuilder, name: str, key_serde: Serde | None, value_serde: Serde | None,
                 store_name: str | None, windows: TimeWindows | SlidingWindows | SessionWindows | None = None,
                 materialize_caching: bool = False) -> None:
        """``materialize_caching``: a source table not materialized yet, whose store a join then caches."""
        self.builder = builder
        self.name = name
        self.key_serde = key_serde
        self.value_serde = value_serde
        self.store_name = store_name
        #: The windows of the windowed aggregation this table comes from (suppress() waits for their grace).
        self.windows = windows
        self.materialize_caching = materialize_caching

    def _materialize(self) -> None:
        """A join reads this table's store: a source table not materialized until now is (Kafka's
        KTableSource.materialize()), and its store cached as Kafka's default Materialized caches it."""
        if self.materialize_caching:
            self.builder.topology.store_builders[self.store_name].caching = True

    def queryable_store_name(self) -> str | None:
        return self.store_name

    def _then(self, prefix: str, processor: Callable[[], Any], named: str | None, value_changed: bool) -> KTable:
        name = self.builder._name(named, prefix)
        self.builder.topology.add_processor(name, processor, self.name)
        return KTable(self.builder, name, self.key_serde, None if value_changed else self.value_serde, None,
                      self.windows)

    def suppress(self, suppressed: Suppressed) -> KTable:
        """Hold updates back (Kafka's suppress()): with Suppressed.until_window_closes, each window of a windowed
        table is emitted once, with its final value, when stream time passes its end plus the windows' grace (a
        session's end plus the inactivity gap and the grace)."""
        if self.windows is None:
            raise ValueError("suppress(until_window_closes) needs a windowed KTable (from windowed_by(...) "
                             "and an aggregation)")
        sessions = isinstance(self.windows, SessionWindows)
        builder = self.builder
        name = suppressed.name if suppressed.name is not None else builder.new_processor_name("KTABLE-SUPPRESS-")
        store = f"{suppressed.name}-store" if suppressed.name is not None else builder.new_store_name(
            "KTABLE-SUPPRESS-")
        grace_ms = self.windows.grace_ms + (self.windows.gap_ms if sessions else 0)
        topology = builder.topology
        topology.add_processor(name, lambda: p.WindowedTableSuppress(store, grace_ms), self.name)
        topology.add_state_store(StoreBuilder(store, self.key_serde, self.value_serde, persistent=False,
                                              logging=suppressed.buffer_config.logging,
                                              suppression="sessions" if sessions else "windows"), name)
        return KTable(builder, name, self.key_serde, self.value_serde, None, self.windows)

    def filter(self, predicate: Callable[[Any, Any], bool], named: str | None = None) -> KTable:
        return self._then("KTABLE-FILTER-", lambda: p.TableFilter(predicate, negate=False), named, False)

    def filter_not(self, predicate: Callable[[Any, Any], bool], named: str | None = None) -> KTable:
        return self._then("KTABLE-FILTER-", lambda: p.TableFilter(predicate, negate=True), named, False)

    def map_values(self, mapper: Callable[[Any], Any], named: str | None = None) -> KTable:
        return self._then("KTABLE-MAPVALUES-", lambda: p.TableMapValues(mapper), named, True)

    def join(self, other: KTable, joiner_or_foreign_key_extractor: Callable[..., Any],
             joiner: Callable[[Any, Any], Any] | None = None, named: str | None = None, *,
             table_joined: TableJoined = TableJoined(), materialized: str | None = None) -> KTable:
        """KTable-KTable inner join, ``join(other, joiner)``: a key is in the result while it is in both tables.
        Foreign-key join (KIP-213), ``join(other, foreign_key_extractor, joiner)``: each row of this table joined
        with the other's row whose key ``foreign_key_extractor(value)`` gives, while that row exists; named by
        ``table_joined`` (Kafka's TableJoined, not ``named``), its result kept in the store ``materialized``."""
        if joiner is not None:
            return self._join_on_foreign_key(other, joiner_or_foreign_key_extractor, joiner, False, named,
                                             table_joined, materialized)
        return self._join(other, joiner_or_foreign_key_extractor, named, ("inner", "inner"))

    def left_join(self, other: KTable, joiner_or_foreign_key_extractor: Callable[..., Any],
                  joiner: Callable[[Any, Any], Any] | None = None, named: str | None = None, *,
                  table_joined: TableJoined = TableJoined(), materialized: str | None = None) -> KTable:
        """KTable-KTable left join, ``left_join(other, joiner)``: every key of this table, joined with None while
        the other lacks it. Foreign-key left join, ``left_join(other, foreign_key_extractor, joiner)``: every row
        of this table, joined with the other's row of its foreign key or None (``table_joined`` and
        ``materialized`` as in join())."""
        if joiner is not None:
            return self._join_on_foreign_key(other, joiner_or_foreign_key_extractor, joiner, True, named,
                                             table_joined, materialized)
        return self._join(other, joiner_or_foreign_key_extractor, named, ("left", "right"))

    def _join_on_foreign_key(self, other: KTable, extractor: Callable[[Any], Any], joiner: Callable[[Any, Any], Any],
                             left_join: bool, named: str | None, table_joined: TableJoined,
                             materialized: str | None) -> KTable:
        """The foreign-key join's nodes, named and wired as Kafka's (kfk.streams.foreign_key_join says how the
        subscriptions and responses flow). Kafka draws every generated name even when TableJoined names the join,
        so a named join uses up as many indexes as an unnamed one."""
        if named is not None:
            raise TypeError("a foreign-key join is named by table_joined=TableJoined.as_(name), as in Kafka")
        if self.store_name is None or other.store_name is None:
            raise NotImplementedError("kfk.streams joins only tables backed by a store (builder.table() or an "
                                      "aggregation)")
        self._materialize()
        other._materialize()
        builder, topology = self.builder, self.builder.topology
        new = builder.new_processor_name
        registration = new("KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-") + "-topic"
        send, registration_sink = new("KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-"), new("KTABLE-SINK-")
        registration_source = new("KTABLE-SOURCE-")
        subscriptions = builder.new_store_name("KTABLE-FK-JOIN-SUBSCRIPTION-")
        receive, lookup, foreign = (new("KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR-") for _ in range(3))
        response = new("KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-") + "-topic"
        response_sink, response_source = new("KTABLE-SINK-"), new("KTABLE-SOURCE-")
        resolver = new("KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-RESOLVER-PROCESSOR-")
        output = new("KTABLE-FK-JOIN-OUTPUT-")
        if materialized is None:
            builder.new_store_name("KTABLE-FK-JOIN-OUTPUT-")  # Kafka draws the (unmaterialized) result's store name
        if table_joined.name is not None:
            name = table_joined.name
            registration, response = (f"{name}-subscription-{topic}-topic" for topic in ("registration", "response"))
            send, registration_sink, registration_source = (f"{name}-subscription-registration-{role}"
                                                            for role in ("processor", "sink", "source"))
            subscriptions, receive = f"{name}-subscription-store", f"{name}-subscription-receive"
            lookup, foreign = f"{name}-subscription-join-foreign", f"{name}-foreign-join-subscription"
            response_sink, response_source, resolver = (f"{name}-subscription-response-{role}"
                                                        for role in ("sink", "source", "resolver"))
            output = f"{name}-result"
        raw = Serdes.bytes()
        left_store, right_store = self.store_name, other.store_name
        key_serde, value_serde, foreign_key_serde = self.key_serde, self.value_serde, other.key_serde
        topology.add_processor(send, lambda: fk.SubscriptionSend(extractor, left_join, foreign_key_serde, key_serde,
                                                                 value_serde, registration), self.name)
        topology.add_sink(registration_sink, registration, send, key_serde=raw,
                          value_serde=Serde("SubscriptionWrapperSerde", fk.Registration.serialize, bytes),
                          partitioner=_by_foreign_key(table_joined.other_partitioner))
        topology.add_source(registration_source, registration, key_serde=raw, value_serde=raw)
        topology.add_processor(receive, lambda: fk.SubscriptionReceive(subscriptions), registration_source)
        topology.add_state_store(StoreBuilder(subscriptions, raw, raw), receive)
        topology.add_processor(lookup, lambda: fk.SubscriptionJoin(right_store, key_serde, response), receive)
        topology.connect_processor_and_state_stores(lookup, stores=[right_store])
        right_key_serde, right_value_serde = other.key_serde, other.value_serde
        topology.add_processor(foreign, lambda: fk.ForeignTableJoin(subscriptions, right_key_serde, right_value_serde,
                                                                    key_serde, response), other.name)
        topology.connect_processor_and_state_stores(foreign, stores=[subscriptions])
        topology.add_sink(response_sink, response, lookup, foreign, key_serde=raw,
                          value_serde=Serde("SubscriptionResponseWrapperSerde", fk.Response.serialize, bytes),
                          partitioner=_by_primary_key(table_joined.partitioner))
        topology.add_source(response_source, response, key_serde=raw, value_serde=raw)
        topology.add_processor(resolver, lambda: fk.ResponseJoin(left_store, joiner, left_join, right_value_serde),
                               response_source)
        topology.connect_processor_and_state_stores(resolver, stores=[left_store])
        if materialized is None:
            topology.add_processor(output, p.PassThrough, resolver)
        else:
            topology.add_processor(output, lambda: p.MaterializedChange(materialized), resolver)
            topology.add_state_store(StoreBuilder(materialized, key_serde, None), output)
        topology.repartition_topics[registration] = None
        topology.repartition_topics[response] = None
        topology.copartition_groups.append({registration, *topology.upstream_source_topics(other.name)})
        topology.copartition_groups.append({response, *topology.upstream_source_topics(self.name)})
        return KTable(builder, output, self.key_serde, None, materialized)

    def outer_join(self, other: KTable, joiner: Callable[[Any, Any], Any], named: str | None = None) -> KTable:
        """KTable-KTable outer join: every key of either table (None for the side that lacks it)."""
        return self._join(other, joiner, named, ("outer", "outer"))

    def _join(self, other: KTable, joiner: Callable[[Any, Any], Any], named: str | None,
              modes: tuple[str, str]) -> KTable:
        if self.store_name is None or other.store_name is None:
            raise NotImplementedError("kfk.streams joins only tables backed by a store (builder.table() or an "
                                      "aggregation)")
        self._materialize()
        other._materialize()
        builder = self.builder
        merge = builder._name(named, "KTABLE-MERGE-")
        this_name = f"{named}-join-this" if named else builder.new_processor_name("KTABLE-JOINTHIS-")
        other_name = f"{named}-join-other" if named else builder.new_processor_name("KTABLE-JOINOTHER-")
        this_store, other_store = self.store_name, other.store_name
        topology = builder.topology
        topology.add_processor(this_name, lambda: p.TableTableJoin(other_store, joiner, modes[0], True), self.name)
        topology.connect_processor_and_state_stores(this_name, stores=[other_store])
        topology.add_processor(other_name, lambda: p.TableTableJoin(this_store, joiner, modes[1], False),
                               other.name)
        topology.connect_processor_and_state_stores(other_name, stores=[this_store])
        topology.add_processor(merge, p.PassThrough, this_name, other_name)
        topology.copartition_groups.append(set(topology.upstream_source_topics(self.name))
                                           | set(topology.upstream_source_topics(other.name)))
        return KTable(builder, merge, self.key_serde, None, None)

    def to_stream(self, named: str | None = None) -> KStream:
        name = self.builder._name(named, "KTABLE-TOSTREAM-")
        self.builder.topology.add_processor(name, p.TableToStream, self.name)
        return KStream(self.builder, name, self.key_serde, self.value_serde, repartition_required=False)
