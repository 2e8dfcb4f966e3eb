"""Topology: the graph of source, processor and sink nodes a Streams application runs, and its description.

The DSL (StreamsBuilder) and the Processor API both build one: ``add_source``, ``add_processor``, ``add_sink`` and
``add_state_store``, each node naming its parents. build-time facts live here:
- sub-topologies: nodes connected by an edge or by a shared state store form one; each gets an id in the order of
  its alphabetically first source node (as Kafka numbers them), and runs as one task per input partition;
- internal topics: repartition topics (``<application.id>-<name>-repartition``) and the changelog of every logged
  store (``<application.id>-<store>-changelog``), named unprefixed here as Kafka's describe() prints them;
- ``describe()``: Kafka's TopologyDescription text, line for line (sub-topologies, nodes in Kafka's order: by the
  size of the sub-tree below each node, then by name).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from kfk.streams.processor import Processor, Record
from kfk.streams.serdes import Serde
from kfk.streams.windows import JoinWindows, SessionWindows, SlidingWindows, TimeWindows

__all__ = ["Topology", "TopologyException", "TopicNameExtractor", "StreamPartitioner", "StoreBuilder", "SubTopology",
           "NodeKind"]

#: A sink's topic chosen per record: (key, value, record context) -> topic name (Kafka's TopicNameExtractor).
TopicNameExtractor = Callable[[Any, Any, Record], str]
#: A sink's partition chosen per record: (topic, key, value, partition count) -> partition, or None for the
#: producer's partitioner (Kafka's StreamPartitioner).
StreamPartitioner = Callable[[str, Any, Any, int], "int | None"]
REPARTITION_TOPIC_SUFFIX = "-repartition"
CHANGELOG_TOPIC_SUFFIX = "-changelog"


class TopologyException(Exception):
    """The topology is invalid (Kafka's TopologyException): the message starts as Kafka's does."""

    def __init__(self, message: str) -> None:
        super().__init__(f"Invalid topology: {message}")


class NodeKind(enum.Enum):
    SOURCE = "Source"
    PROCESSOR = "Processor"
    SINK = "Sink"


@dataclass
class StoreBuilder:
    """A key-value store to create in every task whose processors use it. ``logging``: back it by a changelog
    topic; ``persistent``: on disk (RocksDB) rather than in memory; ``caching``: keep its writes in the record
    cache until a flush (kfk.streams.cache). As Kafka's Stores builders, a store of the Processor API is not cached
    unless with_caching_enabled() says so; the DSL caches its aggregations' and materialized tables' stores."""

    name: str
    key_serde: Serde | None = None
    value_serde: Serde | None = None
    logging: bool = True
    persistent: bool = True
    #: Set for a window store (its changelog is compacted and deleted after the windows' retention).
    windows: TimeWindows | JoinWindows | SessionWindows | SlidingWindows | None = None
    #: Set for suppression's buffer (kfk.streams.state.SuppressionBuffer), always in memory: "windows" or
    #: "sessions", the kind of windowed keys it holds.
    suppression: str | None = None
    #: Set for a left/outer KStream-KStream join's shared store (kfk.streams.state.OuterJoinStore): the serde of
    #: the right side's values (value_serde is the left side's).
    outer_join: bool = False
    other_value_serde: Serde | None = None
    caching: bool = False

    def with_caching_enabled(self) -> StoreBuilder:
        self.caching = True
        return self

    def with_caching_disabled(self) -> StoreBuilder:
        self.caching = False
        return self


@dataclass
class Node:
    name: str
    kind: NodeKind
    predecessors: list[str]
    supplier: Callable[[], Processor] | None = None
    topics: list[str] = field(default_factory=list)
    topic: str | None = None
    extractor: TopicNameExtractor | None = None
    key_serde: Serde | None = None
    value_serde: Serde | None = None
    #: A sink's choice of partition (Kafka's StreamPartitioner): ``partitioner(topic, key, value, partitions)``
    #: with the record's key and value as the sink is given them and the topic's partition count; None (or no
    #: partitioner) leaves it to the producer's partitioner.
    partitioner: StreamPartitioner | None = None
    stores: list[str] = field(default_factory=list)
    children: list[str] = field(default_factory=list)


@dataclass
class SubTopology:
    id: int
    nodes: list[str]
    source_topics: list[str]
    stores: list[str]
    #: A global store's source and processor: run by every instance over all partitions, not as tasks.
    is_global: bool = False


class Topology:
    """A processing graph. Build it through StreamsBuilder.build() or with the Processor API methods below."""

    def __init__(self) -> None:
        self.nodes: dict[str, Node] = {}
        self.store_builders: dict[str, StoreBuilder] = {}
        #: Repartition topics by their unprefixed name -> the partition count repartition() asked for (or None).
        self.repartition_topics: dict[str, int | None] = {}
        #: Groups of source topics whose partitions must line up (joins), checked when the application starts.
        self.copartition_groups: list[set[str]] = []
        #: The nodes (source and processor) that keep global stores.
        self.global_nodes: set[str] = set()

    # --- the Processor API ---------------------------------------------------------------------------------------

    def add_source(self, name: str, *topics: str, key_serde: Serde | None = None,
                   value_serde: Serde | None = None) -> Topology:
        if not topics:
            raise TopologyException("You must provide at least one topic")
        for node in self.nodes.values():
            overlap = set(topics) & set(node.topics)
            if overlap:
                raise TopologyException(f"Topic {sorted(overlap)[0]} has already been registered by another source.")
        self._add(Node(name, NodeKind.SOURCE, [], topics=list(topics), key_serde=key_serde, value_serde=value_serde))
        return self

    def add_processor(self, name: str, supplier: Callable[[], Processor], *parent_names: str) -> Topology:
        self._add(Node(name, NodeKind.PROCESSOR, self._parents(name, parent_names), supplier=supplier))
        return self

    def add_sink(self, name: str, topic: str | TopicNameExtractor, *parent_names: str,
                 key_serde: Serde | None = None, value_serde: Serde | None = None,
                 partitioner: StreamPartitioner | None = None) -> Topology:
        node = Node(name, NodeKind.SINK, self._parents(name, parent_names), key_serde=key_serde,
                    value_serde=value_serde, partitioner=partitioner)
        if isinstance(topic, str):
            node.topic = topic
        else:
            node.extractor = topic
        self._add(node)
        return self

    def add_state_store(self, builder: StoreBuilder, *processor_names: str) -> Topology:
        if builder.name in self.store_builders:
            raise TopologyException(f"A different StateStore has already been added with the name {builder.name}")
        self.store_builders[builder.name] = builder
        self.connect_processor_and_state_stores(*processor_names, stores=[builder.name])
        return self

    def add_global_store(self, builder: StoreBuilder, source_name: str, topic: str, processor_name: str,
                         supplier: Callable[[], Processor], *, key_serde: Serde | None = None,
                         value_serde: Serde | None = None) -> Topology:
        """A global store (Kafka's addGlobalStore): every instance reads all partitions of ``topic`` through
        the processor into its own copy of the store (the topic is its changelog: the store is not logged)."""
        self.add_source(source_name, topic, key_serde=key_serde, value_serde=value_serde)
        self.add_processor(processor_name, supplier, source_name)
        builder.logging = False
        self.add_state_store(builder, processor_name)
        self.global_nodes.update((source_name, processor_name))
        return self

    def global_stores(self) -> dict[str, list[str]]:
        """Each global store's name -> the topics that feed it."""
        stores: dict[str, list[str]] = {}
        for name in self.global_nodes:
            node = self.nodes[name]
            for store in node.stores:
                stores[store] = [topic for parent in node.predecessors for topic in self.nodes[parent].topics]
        return stores

    def connect_processor_and_state_stores(self, *processor_names: str, stores: Iterable[str]) -> Topology:
        for processor in processor_names:
            node = self.nodes.get(processor)
            if node is None or node.kind is not NodeKind.PROCESSOR:
                raise TopologyException(f"Processor {processor} is not added yet.")
            for store in stores:
                if store not in self.store_builders:
                    raise TopologyException(f"StateStore {store} is not added yet.")
                if store not in node.stores:
                    node.stores.append(store)
        return self

    def _add(self, node: Node) -> None:
        if node.name in self.nodes:
            raise TopologyException(f"Processor {node.name} is already added.")
        self.nodes[node.name] = node
        for parent in node.predecessors:
            self.nodes[parent].children.append(node.name)

    def _parents(self, name: str, parent_names: Iterable[str]) -> list[str]:
        parents = list(parent_names)
        if not parents:
            raise TopologyException(f"Processor {name} must have at least one parent")
        for parent in parents:
            if parent == name:
                raise TopologyException(f"Processor {name} cannot be a predecessor of itself.")
            if parent not in self.nodes:
                raise TopologyException(f"Parent processor {parent} is not added yet for {name}")
            if self.nodes[parent].kind is NodeKind.SINK:
                raise TopologyException(f"Sink {parent} cannot be used a parent.")
        return parents

    # --- what the runtime needs ----------------------------------------------------------------------------------

    def sub_topologies(self, include_global: bool = False) -> list[SubTopology]:
        """The connected groups of nodes (edges and shared stores connect), numbered as Kafka numbers them (global
        stores' groups take a number too, but run no tasks: they are left out unless ``include_global``)."""
        parent: dict[str, str] = {name: name for name in self.nodes}

        def root(name: str) -> str:
            while parent[name] != name:
                parent[name] = parent[parent[name]]
                name = parent[name]
            return name

        def union(a: str, b: str) -> None:
            parent[root(a)] = root(b)

        by_store: dict[str, str] = {}
        for node in self.nodes.values():
            for predecessor in node.predecessors:
                union(node.name, predecessor)
            for store in node.stores:
                if store in by_store:
                    union(node.name, by_store[store])
                by_store[store] = node.name
        groups: dict[str, list[str]] = {}
        for name in self.nodes:
            groups.setdefault(root(name), []).append(name)
        ordered = sorted(groups.values(), key=lambda names: min(
            (name for name in names if self.nodes[name].kind is NodeKind.SOURCE), default=min(names)))
        result = []
        for subtopology_id, names in enumerate(ordered):
            topics = [topic for name in names for topic in self.nodes[name].topics]
            stores = list(dict.fromkeys(store for name in names for store in self.nodes[name].stores))
            is_global = any(name in self.global_nodes for name in names)
            if include_global or not is_global:
                result.append(SubTopology(subtopology_id, names, topics, stores, is_global))
        return result

    def upstream_source_topics(self, name: str) -> list[str]:
        """The source topics that feed node `name` (through its ancestors)."""
        seen, pending, topics = set(), [name], []
        while pending:
            node = self.nodes[pending.pop()]
            if node.name in seen:
                continue
            seen.add(node.name)
            topics.extend(node.topics)
            pending.extend(node.predecessors)
        return topics

    def source_topics(self) -> list[str]:
        """The topics the tasks read (not the global stores')."""
        return [topic for node in self.nodes.values() if node.name not in self.global_nodes for topic in node.topics]

    def describe(self) -> TopologyDescription:
        return TopologyDescription(self)

    def __str__(self) -> str:
        return str(self.describe())


class _DescribedNode:
    """Kafka's AbstractNode of a description: the sub-tree size orders nodes (bigger first, then by name)."""

    def __init__(self, node: Node) -> None:
        self.node = node
        self.name = node.name
        self.size = 1
        self.predecessors = _JavaTreeSet()
        self.successors = _JavaTreeSet()

    def key(self) -> tuple[int, str]:
        return (-self.size, self.name)

    def __str__(self) -> str:
        node = self.node
        if node.kind is NodeKind.SOURCE:
            return f"Source: {self.name} (topics: [{', '.join(node.topics)}])\n      --> {self.successors}"
        if node.kind is NodeKind.SINK:
            target = f"topic: {node.topic}" if node.topic is not None else f"extractor class: {node.extractor}"
            return f"Sink: {self.name} ({target})\n      <-- {self.predecessors}"
        # Kafka keeps a processor's store names in a HashSet: printed in its iteration order
        stores = ", ".join(_java_hash_map_order(node.stores))
        return (f"Processor: {self.name} (stores: [{stores}])\n      --> {self.successors}\n"
                f"      <-- {self.predecessors}")


class _JavaTreeSet:
    """A red-black tree ordered by _DescribedNode.key() at insertion time, as java.util.TreeSet (TreeMap) is. Kafka
    builds the description with TreeSets whose elements' sizes keep growing after insertion, so the order it prints
    depends on which elements each insertion was compared with: the tree is balanced as Java's is (the textbook
    red-black insertion TreeMap uses), so that the same comparisons are made."""

    def __init__(self) -> None:
        self.root: _TreeEntry | None = None

    def add(self, item: _DescribedNode) -> None:
        if self.root is None:
            self.root = _TreeEntry(item, None)
            self.root.red = False
            return
        current = self.root
        while True:
            if current.item is item:
                return
            left = item.key() < current.item.key()
            child = current.left if left else current.right
            if child is None:
                entry = _TreeEntry(item, current)
                if left:
                    current.left = entry
                else:
                    current.right = entry
                self._balance(entry)
                return
            current = child

    def _balance(self, entry: _TreeEntry) -> None:
        while entry is not self.root and entry.parent.red:
            parent = entry.parent
            grandparent = parent.parent
            parent_is_left = parent is grandparent.left
            uncle = grandparent.right if parent_is_left else grandparent.left
            if uncle is not None and uncle.red:
                parent.red = uncle.red = False
                grandparent.red = True
                entry = grandparent
                continue
            if entry is (parent.right if parent_is_left else parent.left):
                entry = parent
                self._rotate(entry, parent_is_left)
            entry.parent.red = False
            entry.parent.parent.red = True
            self._rotate(entry.parent.parent, not parent_is_left)
        self.root.red = False

    def _rotate(self, entry: _TreeEntry, to_left: bool) -> None:
        """A left rotation (the right child rises) when `to_left`, else a right one."""
        child = entry.right if to_left else entry.left
        grandchild = child.left if to_left else child.right
        if to_left:
            entry.right = grandchild
        else:
            entry.left = grandchild
        if grandchild is not None:
            grandchild.parent = entry
        child.parent = entry.parent
        if entry.parent is None:
            self.root = child
        elif entry is entry.parent.left:
            entry.parent.left = child
        else:
            entry.parent.right = child
        if to_left:
            child.left = entry
        else:
            child.right = entry
        entry.parent = child

    def __iter__(self):
        def walk(entry):
            if entry is not None:
                yield from walk(entry.left)
                yield entry.item
                yield from walk(entry.right)
        return walk(self.root)

    def __str__(self) -> str:
        names = [item.name for item in self]
        return ", ".join(names) if names else "none"


class _TreeEntry:
    __slots__ = ("item", "parent", "left", "right", "red")

    def __init__(self, item: _DescribedNode, parent: _TreeEntry | None) -> None:
        self.item, self.parent = item, parent
        self.left: _TreeEntry | None = None
        self.right: _TreeEntry | None = None
        self.red = True


def _java_string_hash(text: str) -> int:
    value = 0
    for unit in text.encode("utf-16-be").hex(" ", 2).split():
        value = (31 * value + int(unit, 16)) & 0xFFFFFFFF
    return value


def _java_hash_map_order(names: list[str]) -> list[str]:
    """The iteration order of a java.util.HashMap holding `names` (inserted in that order): by bucket, then by
    insertion. Kafka links the described nodes in this order, which decides the order of equal-sized children."""
    capacity = 16
    while len(names) > capacity * 0.75:
        capacity *= 2

    def bucket(name: str) -> int:
        h = _java_string_hash(name)
        return (h ^ (h >> 16)) & (capacity - 1)

    return sorted(names, key=lambda name: (bucket(name), names.index(name)))


class TopologyDescription:
    """Kafka's TopologyDescription; str() is the text Kafka's Topology.describe() prints."""

    def __init__(self, topology: Topology) -> None:
        self.subtopologies: list[tuple[int, list[_DescribedNode], bool]] = []
        for subtopology in topology.sub_topologies(include_global=True):
            described = {name: _DescribedNode(topology.nodes[name])
                         for name in _java_hash_map_order(subtopology.nodes)}
            for node in described.values():
                for predecessor_name in node.node.predecessors:
                    predecessor = described[predecessor_name]
                    node.predecessors.add(predecessor)
                    predecessor.successors.add(node)
                    _grow(predecessor, node.size)
            ordered = sorted(described.values(), key=_DescribedNode.key)
            self.subtopologies.append((subtopology.id, ordered, subtopology.is_global))

    def __str__(self) -> str:
        parts = []
        for subtopology_id, nodes, is_global in self.subtopologies:
            lines = "".join(f"    {node}\n" for node in nodes)
            if is_global:
                parts.append(f"  Sub-topology: {subtopology_id} for global store (will not generate tasks)\n{lines}")
            else:
                parts.append(f"  Sub-topology: {subtopology_id}\n{lines}\n")
        return "Topologies:\n " + "".join(parts)


def _grow(node: _DescribedNode, delta: int) -> None:
    node.size += delta
    for predecessor in node.predecessors:
        _grow(predecessor, delta)
