"""kfk.streams: Kafka Streams' model in Python, on kfk's client library, against any Kafka cluster.

    builder = StreamsBuilder()
    (builder.stream("lines").flat_map_values(str.split).group_by(lambda key, word: word).count("counts")
     .to_stream().to("word-counts", value_serde=Serdes.long()))
    streams = KafkaStreams(builder.build(), {"application.id": "wordcount", "bootstrap.servers": "localhost:9092",
                                             "default.key.serde": "string", "default.value.serde": "string"})
    streams.start()
"""

from kfk.streams.config import StreamsConfig
from kfk.streams.kafka_streams import KafkaStreams, MissingSourceTopicException, State
from kfk.streams.metadata import HostInfo, KeyQueryMetadata, StreamsMetadata
from kfk.streams.kstream import (Branched, BranchedKStream, GlobalKTable, KGroupedStream, KStream, KTable,
                                StreamsBuilder, TableJoined)
from kfk.streams.materialized import Materialized
from kfk.streams.processor import Change, Processor, ProcessorContext, Record, TaskId
from kfk.streams.serdes import Serde, Serdes
from kfk.streams.suppressed import BufferConfig, Suppressed
from kfk.streams.topology import StoreBuilder, Topology, TopologyException
from kfk.streams.windows import EmitStrategy, JoinWindows, SessionWindows, SlidingWindows, TimeWindows, Window, Windowed

__all__ = [
    "Branched", "BranchedKStream", "EmitStrategy", "GlobalKTable", "HostInfo", "KeyQueryMetadata", "StreamsMetadata", "BufferConfig", "Suppressed", "JoinWindows", "Change", "KafkaStreams", "MissingSourceTopicException", "State", "KGroupedStream", "KStream", "KTable", "Materialized", "Processor",
    "ProcessorContext", "Record", "Serde", "Serdes", "StoreBuilder", "StreamsBuilder", "StreamsConfig", "TableJoined", "TaskId", "SessionWindows", "SlidingWindows",
    "TimeWindows", "Topology", "TopologyException", "Window", "Windowed",
]
