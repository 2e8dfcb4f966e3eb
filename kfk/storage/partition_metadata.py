"""`partition.metadata`: the topic id of the partition a folder holds (Kafka's PartitionMetadataFile).

    version: 0
    topic_id: <topic id, Kafka's base64 form>

A topic deleted and re-created under the same name gets a new id, so a stale folder is recognised by its id rather
than mistaken for the new topic's.
"""

from __future__ import annotations

import os
import uuid

from kfk.common.uuids import uuid_from_base64, uuid_to_base64
from kfk.errors import InconsistentTopicIdError, KafkaStorageError
from kfk.storage.checkpoint import atomic_write
from kfk.storage.log_files import PARTITION_METADATA_FILE

CURRENT_VERSION = 0


class PartitionMetadataFile:
    def __init__(self, directory: str) -> None:
        self.path = os.path.join(directory, PARTITION_METADATA_FILE)

    def exists(self) -> bool:
        return os.path.exists(self.path)

    def write(self, topic_id: uuid.UUID) -> None:
        """Record the topic id; a different id already on file raises InconsistentTopicIdError."""
        if self.exists():
            existing = self.read()
            if existing == topic_id:
                return
            raise InconsistentTopicIdError(
                f"Tried to record topic ID {uuid_to_base64(topic_id)} to file but had already recorded "
                f"{uuid_to_base64(existing)}"
            )
        text = f"version: {CURRENT_VERSION}\ntopic_id: {uuid_to_base64(topic_id)}"
        atomic_write(self.path, text.encode("utf-8"))

    def read(self) -> uuid.UUID:
        try:
            with open(self.path, encoding="utf-8") as handle:
                lines = handle.read().splitlines()
        except OSError as exc:
            raise KafkaStorageError(f"Error while reading partition metadata file {self.path}: {exc}") from exc
        fields: dict[str, str] = {}
        for line in lines:
            key, sep, value = line.partition(":")
            if not sep:
                raise KafkaStorageError(f"Malformed line in partition metadata file {self.path}: {line!r}")
            fields[key.strip()] = value.strip()
        if fields.get("version") != str(CURRENT_VERSION):
            raise KafkaStorageError(
                f"Unrecognized version of partition metadata file {self.path}: {fields.get('version')!r}"
            )
        try:
            return uuid_from_base64(fields.get("topic_id", ""))
        except ValueError as exc:
            raise KafkaStorageError(f"Invalid topic_id in partition metadata file {self.path}: {exc}") from exc
