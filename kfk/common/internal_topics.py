"""The internal topics' names (Kafka's Topic constants). The rules over them (which are internal, which names are
legal) live with the metadata, kfk.metadata.topic_names."""

from __future__ import annotations

import uuid

GROUP_METADATA_TOPIC_NAME = "__consumer_offsets"
TRANSACTION_STATE_TOPIC_NAME = "__transaction_state"
SHARE_GROUP_STATE_TOPIC_NAME = "__share_group_state"
CLUSTER_METADATA_TOPIC_NAME = "__cluster_metadata"
"""The KRaft metadata log's topic. It is never a topic of the image (clients can neither see nor create it), and its
partition folder sits in a log dir but belongs to the metadata backend: the LogManager never loads it, so retention,
the cleaner and topic deletion never touch metadata."""
#: Kafka's Uuid.METADATA_TOPIC_ID (AAAAAAAAAAAAAAAAAAAAAQ): the topic id of __cluster_metadata, fixed in every cluster.
CLUSTER_METADATA_TOPIC_ID = uuid.UUID(int=1)

#: What users may neither delete nor re-partition: the coordinators hash their keys over the internal topics'
#: partitions, and the metadata log is the cluster itself. The controller refuses (INVALID_REQUEST), and so do the
#: tools, before they send anything.
CLUSTER_MANAGED_TOPIC_NAMES = frozenset({GROUP_METADATA_TOPIC_NAME, TRANSACTION_STATE_TOPIC_NAME,
                                         SHARE_GROUP_STATE_TOPIC_NAME, CLUSTER_METADATA_TOPIC_NAME})
