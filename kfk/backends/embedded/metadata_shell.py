"""The metadata image read offline and shown as a tree: what `kfk metadata show` prints (Kafka's
kafka-metadata-shell, reduced to reading).

`read_image(log_dir)` rebuilds the committed image of a (stopped, or live: it only reads) node's
`__cluster_metadata-0` from its newest valid snapshot and the log after it, without opening the log for writing
(no recovery, no truncation: a torn tail simply ends the read). `read_snapshot_image(path)` reads one snapshot
file. `image_tree(image)` is the image as nested plain data, addressed by paths such as `/topics/foo/partitions/0`.
"""

from __future__ import annotations

import os
from typing import Any

from kfk.backends.embedded.metadata_log import METADATA_TOPIC_PARTITION
from kfk.backends.embedded.record_serde import deserialize_record
from kfk.backends.embedded.snapshots import latest_valid_snapshot, read_snapshot
from kfk.errors import CorruptRecordError, KafkaStorageError
from kfk.metadata.image import MetadataImage
from kfk.records import iter_batches
from kfk.storage.log_files import LOG_FILE_SUFFIX, log_dir_name, offset_from_file_name
from kfk.storage.meta_properties import MetaProperties
from kfk.common.uuids import uuid_to_base64


def read_image(log_dir: str) -> MetadataImage:
    """The image of the metadata log in `log_dir` (the node's first log dir)."""
    directory = os.path.join(log_dir, log_dir_name(METADATA_TOPIC_PARTITION))
    if not os.path.isdir(directory):
        raise KafkaStorageError(f"{log_dir} holds no metadata log ({log_dir_name(METADATA_TOPIC_PARTITION)})")
    meta = MetaProperties.read(log_dir)
    image = MetadataImage(cluster_id=None if meta is None else meta.cluster_id)
    snapshot = latest_valid_snapshot(directory)
    start = 0
    if snapshot is not None:
        start = snapshot.snapshot_id.end_offset
        image = image.apply(snapshot.records, start - 1)
    segments = sorted(name for name in os.listdir(directory) if name.endswith(LOG_FILE_SUFFIX))
    for index, name in enumerate(segments):
        following = segments[index + 1] if index + 1 < len(segments) else None
        if following is not None and offset_from_file_name(following) <= start:
            continue  # wholly behind the snapshot
        with open(os.path.join(directory, name), "rb") as file:
            data = file.read()
        try:
            for batch in iter_batches(data):
                if batch.last_offset < start or batch.is_control:
                    continue
                batch.validate()
                records = [deserialize_record(record.value) for record in batch.records()]
                image = image.apply(records, batch.last_offset)
        except CorruptRecordError:
            break  # what recovery would truncate: the image is what came before
    return image


def read_snapshot_image(path: str) -> MetadataImage:
    snapshot = read_snapshot(path)
    return MetadataImage().apply(snapshot.records, snapshot.snapshot_id.end_offset - 1)


def image_tree(image: MetadataImage) -> dict[str, Any]:
    """The image as nested dicts: /clusterId, /offset, /features, /brokers/<id>, /topics/<name>/partitions/<n>,
    /configs/<resource type>/<name>, /producerIds. Names are Kafka's JSON names (camelCase), ids as Kafka prints."""
    return {
        "clusterId": image.cluster_id,
        "offset": image.offset,
        "features": dict(sorted(image.features.items())),
        "brokers": {str(broker_id): {
            "brokerId": broker.broker_id, "brokerEpoch": broker.broker_epoch,
            "incarnationId": uuid_to_base64(broker.incarnation_id),
            "endpoints": [{"name": endpoint.listener_name, "host": endpoint.host, "port": endpoint.port,
                           "securityProtocol": endpoint.security_protocol} for endpoint in broker.endpoints],
            "rack": broker.rack, "fenced": broker.fenced, "inControlledShutdown": broker.in_controlled_shutdown,
        } for broker_id, broker in sorted(image.brokers.items())},
        "topics": {name: {
            "topicId": uuid_to_base64(topic.topic_id),
            "partitions": {str(partition_id): {
                "replicas": list(partition.replicas), "isr": list(partition.isr),
                "removingReplicas": list(partition.removing_replicas),
                "addingReplicas": list(partition.adding_replicas), "leader": partition.leader,
                "leaderEpoch": partition.leader_epoch, "partitionEpoch": partition.partition_epoch,
            } for partition_id, partition in sorted(topic.partitions.items())},
        } for name, topic in sorted(image.topics_by_name.items())},
        "configs": _configs(image),
        "producerIds": {"nextProducerId": image.next_producer_id},
    }


def _configs(image: MetadataImage) -> dict[str, dict[str, dict[str, str]]]:
    tree: dict[str, dict[str, dict[str, str]]] = {}
    for (resource_type, name), values in sorted(image.configs.items()):
        tree.setdefault(resource_type.name, {})[name] = dict(sorted(values.items()))
    return tree


def lookup(tree: dict[str, Any], path: str) -> Any:
    """The node at `path` ("/" the whole tree); KeyError naming the first missing part."""
    node: Any = tree
    walked = ""
    for part in filter(None, path.split("/")):
        walked += "/" + part
        if not isinstance(node, dict) or part not in node:
            raise KeyError(walked)
        node = node[part]
    return node
