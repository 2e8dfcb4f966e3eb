"""The ground layer: the small values every other package speaks, each defined in exactly one place.

structs (TopicPartition, OffsetAndMetadata), config_types (config resource types, sources and entries), constants
(wire sentinels and integer limits), internal_topics (the internal topics' names), topic_collisions (the topic names
metrics cannot tell apart), varint (the one varint codec) and clock (where time comes from). common imports nothing
else of kfk (an import-linter contract), so every layer may import it.
"""
