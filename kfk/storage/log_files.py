"""Kafka's file and directory names for a partition's log (LogFileUtils, UnifiedLog's name helpers).

A partition lives in `<log dir>/<topic>-<partition>/`; each segment is a set of files named by its base offset as a
20-digit zero-padded number (`00000000000000000000.log`, `.index`, `.timeindex`, `.txnindex`), producer state
snapshots are `<offset>.snapshot`. The KRaft metadata log's snapshots are `<end offset>-<epoch>.checkpoint` (20 and
10 digits), and `kafka-storage format` writes the bootstrap snapshot `bootstrap.checkpoint` into the log dir. Suffixes appended to those names mark the steps of deletion (`.deleted`) and of
compaction (`.cleaned`, then `.swap`), so that a crash at any step can be resolved from the names alone.
"""

from __future__ import annotations

import os
import uuid

from kfk.common.structs import TopicPartition

LOG_FILE_SUFFIX = ".log"
INDEX_FILE_SUFFIX = ".index"
TIME_INDEX_FILE_SUFFIX = ".timeindex"
TXN_INDEX_FILE_SUFFIX = ".txnindex"
PRODUCER_SNAPSHOT_FILE_SUFFIX = ".snapshot"
KRAFT_SNAPSHOT_FILE_SUFFIX = ".checkpoint"
BOOTSTRAP_SNAPSHOT_FILE = "bootstrap.checkpoint"
DELETED_FILE_SUFFIX = ".deleted"
CLEANED_FILE_SUFFIX = ".cleaned"
SWAP_FILE_SUFFIX = ".swap"
DELETE_DIR_SUFFIX = "-delete"
FUTURE_DIR_SUFFIX = "-future"
STRAY_DIR_SUFFIX = "-stray"

LEADER_EPOCH_CHECKPOINT_FILE = "leader-epoch-checkpoint"
PARTITION_METADATA_FILE = "partition.metadata"
RECOVERY_POINT_CHECKPOINT_FILE = "recovery-point-offset-checkpoint"
REPLICATION_CHECKPOINT_FILE = "replication-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT_FILE = "log-start-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT_FILE = "cleaner-offset-checkpoint"
META_PROPERTIES_FILE = "meta.properties"
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
#: The file a broker locks for as long as it uses the log dir (kfk/storage/log_dir_lock.py).
LOCK_FILE = ".lock"
#: kfk's own: the pid of the broker serving a log dir (`kfk server stop` signals it; offline readers refuse it).
BROKER_PID_FILE = "kfk.pid"

MAX_FILE_NAME_LENGTH = 255


def filename_prefix_from_offset(offset: int) -> str:
    """`5` -> `00000000000000000005`: zero-padded so that `ls` sorts segments numerically."""
    return f"{offset:020d}"


def offset_from_file_name(name: str) -> int:
    """The number before the first dot: `00000000000000000005.log.deleted` -> 5."""
    return int(name[: name.index(".")])


def snapshot_id_from_file_name(name: str) -> tuple[int, int] | None:
    """`00000000000000000145-0000000001.checkpoint` -> (145, 1): a KRaft snapshot's end offset and epoch (the
    snapshot holds the records before that offset); None if the name is not a snapshot's."""
    stem, _, suffix = name.partition(".")
    offset, dash, epoch = stem.partition("-")
    if "." + suffix != KRAFT_SNAPSHOT_FILE_SUFFIX or not dash or len(offset) != 20 or len(epoch) != 10 \
            or not (offset + epoch).isdigit():
        return None
    return int(offset), int(epoch)


def log_file(directory: str, offset: int, suffix: str = "") -> str:
    return os.path.join(directory, filename_prefix_from_offset(offset) + LOG_FILE_SUFFIX + suffix)


def offset_index_file(directory: str, offset: int, suffix: str = "") -> str:
    return os.path.join(directory, filename_prefix_from_offset(offset) + INDEX_FILE_SUFFIX + suffix)


def time_index_file(directory: str, offset: int, suffix: str = "") -> str:
    return os.path.join(directory, filename_prefix_from_offset(offset) + TIME_INDEX_FILE_SUFFIX + suffix)


def transaction_index_file(directory: str, offset: int, suffix: str = "") -> str:
    return os.path.join(directory, filename_prefix_from_offset(offset) + TXN_INDEX_FILE_SUFFIX + suffix)


def producer_snapshot_file(directory: str, offset: int) -> str:
    return os.path.join(directory, filename_prefix_from_offset(offset) + PRODUCER_SNAPSHOT_FILE_SUFFIX)


def log_dir_name(topic_partition: TopicPartition) -> str:
    """`orders-3`: the folder of one partition inside a log dir."""
    return f"{topic_partition.topic}-{topic_partition.partition}"


def log_delete_dir_name(topic_partition: TopicPartition) -> str:
    """`orders-3.<32 hex>-delete`: a deleted partition's folder while its files wait for removal (Kafka's form,
    the topic prefix shortened so the name fits in 255 bytes)."""
    return _unique_dir_name(topic_partition, DELETE_DIR_SUFFIX)


def log_stray_dir_name(topic_partition: TopicPartition) -> str:
    """`orders-3.<32 hex>-stray`: a partition folder the metadata has no place for (its topic deleted, or deleted
    and re-created, while this broker was down), set aside for the operator instead of deleted."""
    return _unique_dir_name(topic_partition, STRAY_DIR_SUFFIX)


def log_future_dir_name(topic_partition: TopicPartition) -> str:
    """`orders-3.<32 hex>-future`: the copy of a partition being moved into another log dir."""
    return _unique_dir_name(topic_partition, FUTURE_DIR_SUFFIX)


def _unique_dir_name(topic_partition: TopicPartition, dir_suffix: str) -> str:
    suffix = f"-{topic_partition.partition}.{uuid.uuid4().hex}{dir_suffix}"
    prefix_length = min(len(topic_partition.topic), MAX_FILE_NAME_LENGTH - len(suffix))
    return topic_partition.topic[:prefix_length] + suffix


def parse_topic_partition_name(dir_name: str) -> TopicPartition:
    """The TopicPartition a partition folder holds: `orders-3`, `orders-3.<id>-delete`, `orders-3.<id>-future`,
    `orders-3.<id>-stray`. Raises ValueError for a name that is not a partition folder."""
    name = dir_name
    for suffix in (DELETE_DIR_SUFFIX, FUTURE_DIR_SUFFIX, STRAY_DIR_SUFFIX):
        if name.endswith(suffix):
            dot = name.rfind(".")
            if dot < 0:
                raise ValueError(f"{dir_name!r} is not a partition directory name")
            name = name[:dot]
            break
    dash = name.rfind("-")
    if dash <= 0 or dash == len(name) - 1:
        raise ValueError(f"{dir_name!r} is not a partition directory name (expected <topic>-<partition>)")
    topic, partition = name[:dash], name[dash + 1 :]
    if not partition.isdigit():
        raise ValueError(f"{dir_name!r} is not a partition directory name (partition {partition!r} not a number)")
    return TopicPartition(topic, int(partition))
