"""`meta.properties`: who a log dir belongs to (Kafka's MetaProperties), a Java properties file.

Version 1 (KRaft):                       Version 0 (ZooKeeper):
    #                                        #
    #Tue Mar 05 10:00:00 UTC 2024            #Tue Mar 05 10:00:00 UTC 2024
    cluster.id=Hc8uTNLTQz6dYx8b8Dkh5Q        broker.id=1
    directory.id=...                         cluster.id=...
    node.id=1                                version=0
    version=1

A broker refuses a log dir whose cluster id or node id is not its own, so data of another cluster is never served.
"""

from __future__ import annotations

import dataclasses
import os

import javaproperties

from kfk.errors import KafkaStorageError
from kfk.storage.checkpoint import atomic_write
from kfk.storage.log_files import META_PROPERTIES_FILE


def read_properties(path: str) -> dict[str, str]:
    """A Java properties file as a dict (Properties.load: ISO-8859-1 with \\uXXXX escapes, comments, `=`/`:`/space
    separators, escapes and line continuations), by the javaproperties library."""
    with open(path, "rb") as handle:
        return javaproperties.load(handle)


def write_properties(path: str, properties: dict[str, str]) -> None:
    """Write like Java's Properties.store(writer, ""), as Kafka writes meta.properties: an empty comment line, a date
    line, sorted key=value lines; atomically (tmp file, fsync, rename) as Kafka's PropertiesUtils does."""
    text = javaproperties.dumps(properties, comments="", sort_keys=True)
    atomic_write(path, text.encode("latin-1"))


@dataclasses.dataclass(frozen=True)
class MetaProperties:
    version: int
    cluster_id: str | None = None
    node_id: int | None = None
    directory_id: str | None = None

    def to_properties(self) -> dict[str, str]:
        properties = {"version": str(self.version)}
        if self.cluster_id is not None:
            properties["cluster.id"] = self.cluster_id
        if self.node_id is not None:
            properties["broker.id" if self.version == 0 else "node.id"] = str(self.node_id)
        if self.directory_id is not None:
            properties["directory.id"] = self.directory_id
        return properties

    @classmethod
    def from_properties(cls, properties: dict[str, str], source: str = META_PROPERTIES_FILE) -> MetaProperties:
        try:
            version = int(properties["version"])
        except (KeyError, ValueError):
            raise KafkaStorageError(f"{source}: missing or invalid 'version'") from None
        if version not in (0, 1):
            raise KafkaStorageError(f"{source}: unknown meta.properties version {version}")
        node_key = "broker.id" if version == 0 else "node.id"
        node_id: int | None = None
        if node_key in properties:
            try:
                node_id = int(properties[node_key])
            except ValueError:
                raise KafkaStorageError(f"{source}: invalid {node_key} {properties[node_key]!r}") from None
        elif version == 1:
            raise KafkaStorageError(f"{source}: version 1 requires node.id")
        cluster_id = properties.get("cluster.id")
        if version == 1 and not cluster_id:
            raise KafkaStorageError(f"{source}: version 1 requires cluster.id")
        return cls(version, cluster_id, node_id, properties.get("directory.id"))

    @classmethod
    def read(cls, log_dir: str) -> MetaProperties | None:
        """The log dir's meta.properties, or None when it has none (a fresh directory)."""
        path = os.path.join(log_dir, META_PROPERTIES_FILE)
        try:
            properties = read_properties(path)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise KafkaStorageError(f"Error while reading {path}: {exc}") from exc
        return cls.from_properties(properties, path)

    def write(self, log_dir: str) -> None:
        write_properties(os.path.join(log_dir, META_PROPERTIES_FILE), self.to_properties())
