"""`kfk dump-log`: kafka-dump-log.sh (DumpLogSegments). Reads segment files straight from disk, no broker needed.

- ``.log``: one line per batch, with the fields DumpLogSegments prints (baseOffset, lastOffset, count, sequences,
  producer, partitionLeaderEpoch, flags, position, timestamp, size, magic, compresscodec, crc, isvalid), the CRC
  checked for each. --deep-iteration adds a ``|`` line per record; --print-data-log adds keys and payloads, which
  --offsets-decoder, --transaction-log-decoder and --cluster-metadata-decoder decode as the records of
  __consumer_offsets, __transaction_state and __cluster_metadata (Kafka's JSON, kfk/commands/log_decoders.py).
  Bytes that do not frame as a batch are reported as "Found N invalid bytes at position P".
- ``.index`` / ``.timeindex``: the entries (an untrimmed index ends at its first empty slot), checked against the
  ``.log`` beside it: an entry must point at a batch whose last offset is the indexed one (--verify-index-only
  prints only the mismatches); --index-sanity-check runs the index's own sanity check on the entries written so
  far (a live broker's active segment still has its pre-allocated zeros: they are not entries), except that a time
  index's zeroed tail fails it, as in Kafka's tool.
- ``.snapshot``: the producer state entries.
- ``.txnindex``: one line per aborted transaction (version, producerId, firstOffset, lastOffset, lastStableOffset).
- ``.checkpoint``: a KRaft snapshot (``__cluster_metadata-0/<end offset>-<epoch>.checkpoint``, or the
  ``bootstrap.checkpoint`` kafka-storage format writes): record batches like a ``.log``, under a line naming the
  snapshot instead of the log's starting offset.
Control batches' records show their marker as Kafka's tool does: ``endTxnMarker: COMMIT|ABORT coordinatorEpoch: N``,
KRaft's ``LeaderChange:``, ``SnapshotHeader``, ``SnapshotFooter``, ``KRaftVersion`` and ``KRaftVoters`` records as
their name and JSON (Kafka 4.4's tool decodes LEADER_CHANGE too; 4.0's printed ``controlType: LEADER_CHANGE(2)``),
else the control type and its id (``controlType: <name>(<id>)``).
An offset index without entries prints as "<file> is empty." whatever the mode, as Kafka's tool does.
Unlike Kafka's tool, the exit code is 1 when anything was invalid, so scripts can tell.
"""

from __future__ import annotations

import mmap
import os
from typing import Annotated

import typer

from kfk.commands.client_options import Debug, client_errors
from kfk.commands.errors import fail

app = typer.Typer()


@app.command("dump-log")
def dump_log(
    files: Annotated[list[str], typer.Option("--files", help="Segment files (.log, .index, .timeindex, .snapshot, "
                                                             ".txnindex) or KRaft snapshots (.checkpoint); "
                                                             "repeatable or comma-separated.")],
    deep_iteration: Annotated[bool, typer.Option("--deep-iteration", help="Print every record, not just batches.")
                              ] = False,
    print_data_log: Annotated[bool, typer.Option("--print-data-log", help="Print keys and payloads (implies "
                                                                          "--deep-iteration).")] = False,
    index_sanity_check: Annotated[bool, typer.Option("--index-sanity-check",
                                                     help="Only run each index's sanity check.")] = False,
    verify_index_only: Annotated[bool, typer.Option("--verify-index-only",
                                                    help="Only report index entries that disagree with the log.")
                                 ] = False,
    max_bytes: Annotated[int, typer.Option("--max-bytes", min=1, help="Stop reading a .log after this many bytes.")
                         ] = 2**31 - 1,
    offsets_decoder: Annotated[bool, typer.Option(
        "--offsets-decoder", help="Decode records as __consumer_offsets' (implies --print-data-log).")] = False,
    transaction_log_decoder: Annotated[bool, typer.Option(
        "--transaction-log-decoder", help="Decode records as __transaction_state's (implies --print-data-log).")
    ] = False,
    cluster_metadata_decoder: Annotated[bool, typer.Option(
        "--cluster-metadata-decoder", help="Decode records as __cluster_metadata's (implies --print-data-log).")
    ] = False,
    debug: Debug = False,
) -> None:
    """Print the contents of Kafka log segment files."""
    paths = [path.strip() for item in files for path in item.split(",") if path.strip()]
    if not paths:
        fail("--files is empty")
    if offsets_decoder + transaction_log_decoder + cluster_metadata_decoder > 1:
        fail("give at most one of --offsets-decoder, --transaction-log-decoder, --cluster-metadata-decoder")
    decoder = _decoder(print_data_log, offsets_decoder, transaction_log_decoder, cluster_metadata_decoder)
    problems = 0
    with client_errors(debug):
        for path in paths:
            if not os.path.exists(path):
                fail(f"{path} does not exist")
            typer.echo(f"Dumping {path}")
            if path.endswith((".log", ".checkpoint")):
                problems += _dump_log(path, deep_iteration or decoder is not None, decoder, max_bytes)
            elif path.endswith(".index") or path.endswith(".timeindex"):
                problems += _dump_index(path, index_sanity_check, verify_index_only)
            elif path.endswith(".snapshot"):
                _dump_snapshot(path)
            elif path.endswith(".txnindex"):
                _dump_txn_index(path)
            else:
                fail(f"{path}: not a .log, .index, .timeindex or .snapshot file, nor a .txnindex or .checkpoint")
    if problems:
        raise typer.Exit(1)


def _open(path: str) -> mmap.mmap | bytes:
    with open(path, "rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        if size == 0:
            return b""
        return mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)


def _base_offset(path: str) -> int:
    from kfk.storage.log_files import offset_from_file_name

    try:
        return offset_from_file_name(os.path.basename(path))
    except ValueError:
        fail(f"{path}: the file name must start with the segment's base offset (20 digits)")


def _decoder(print_data_log: bool, offsets: bool, transaction_log: bool, cluster_metadata: bool):
    """How records' keys and payloads are printed: not at all (None), as text, or decoded as an internal
    topic's records."""
    if offsets or transaction_log or cluster_metadata:
        from kfk.commands import log_decoders

        return (log_decoders.offsets_record if offsets else log_decoders.transaction_log_record if transaction_log
                else log_decoders.cluster_metadata_record)
    return _text_record if print_data_log else None


def _text_record(record) -> tuple[str | None, str | None]:
    """Key and payload as text; a tombstone shows no payload at all, as in Kafka's tool."""
    return (None if record.key is None else _text(record.key),
            None if record.value is None else _text(record.value))


def _dump_log(path: str, deep: bool, decoder, max_bytes: int) -> int:
    from kfk.errors import CorruptRecordError
    from kfk.records import RecordBatch, iter_batches

    buffer = _open(path)
    typer.echo(_log_header(path))
    problems = 0
    position = 0
    end = min(len(buffer), max_bytes)
    try:
        for batch in iter_batches(buffer):
            if batch.position >= end:
                break
            position = batch.position
            valid = batch.is_valid()
            problems += not valid
            typer.echo(_batch_line(batch, valid))
            if deep:
                problems += _dump_records(batch, decoder, isinstance(batch, RecordBatch))
            position = batch.position + batch.size_in_bytes
    except CorruptRecordError as error:
        typer.echo(f"Found {end - position} invalid bytes at position {position} in {path}: {error}")
        return problems + 1
    if position < end and any(buffer[position:end]):
        typer.echo(f"Found {end - position} invalid bytes at the end of {os.path.basename(path)}")
        problems += 1
    return problems


def _log_header(path: str) -> str:
    """The line before a log's batches: its starting offset, or which snapshot it is (Kafka's words)."""
    from kfk.storage.log_files import (
        BOOTSTRAP_SNAPSHOT_FILE,
        snapshot_id_from_file_name,
    )

    if path.endswith(".log"):
        return f"Log starting offset: {_base_offset(path)}"
    name = os.path.basename(path)
    if name == BOOTSTRAP_SNAPSHOT_FILE:
        return "KRaft bootstrap snapshot"
    snapshot_id = snapshot_id_from_file_name(name)
    if snapshot_id is None:
        fail(f"{path}: a KRaft snapshot is named <end offset, 20 digits>-<epoch, 10 digits>.checkpoint")
    return f"Snapshot end offset: {snapshot_id[0]}, epoch: {snapshot_id[1]}"


def _batch_line(batch, valid: bool) -> str:
    from kfk.records import RecordBatch, TimestampType

    timestamp_type = "LogAppendTime" if batch.timestamp_type == TimestampType.LOG_APPEND_TIME else "CreateTime"
    codec = batch.compression_type.name.lower()
    if isinstance(batch, RecordBatch):
        horizon = f"OptionalLong[{batch.delete_horizon_ms}]" if batch.has_delete_horizon else "OptionalLong.empty"
        return (f"baseOffset: {batch.base_offset} lastOffset: {batch.last_offset} count: {batch.records_count} "
                f"baseSequence: {batch.base_sequence} lastSequence: {batch.last_sequence} "
                f"producerId: {batch.producer_id} producerEpoch: {batch.producer_epoch} "
                f"partitionLeaderEpoch: {batch.partition_leader_epoch} "
                f"isTransactional: {str(batch.is_transactional).lower()} "
                f"isControl: {str(batch.is_control).lower()} deleteHorizonMs: {horizon} "
                f"position: {batch.position} {timestamp_type}: {batch.max_timestamp} size: {batch.size_in_bytes} "
                f"magic: {batch.magic} compresscodec: {codec} crc: {batch.crc} isvalid: {str(valid).lower()}")
    timestamp = f" {timestamp_type}: {batch.timestamp}" if batch.magic > 0 else ""
    return (f"baseOffset: {batch.base_offset} lastOffset: {batch.last_offset} count: {batch.records_count} "
            f"position: {batch.position}{timestamp} size: {batch.size_in_bytes} magic: {batch.magic} "
            f"compresscodec: {codec} crc: {batch.crc} isvalid: {str(valid).lower()}")


def _dump_records(batch, decoder, is_v2: bool) -> int:
    from kfk.errors import CorruptRecordError
    from kfk.records import ControlRecordType, EndTransactionMarker, control_record_type

    # KRaft's control records Kafka's tool decodes: the name it prints and the record's schema.
    kraft_records = {ControlRecordType.LEADER_CHANGE: ("LeaderChange:", "LeaderChangeMessage"),
                     ControlRecordType.SNAPSHOT_HEADER: ("SnapshotHeader", "SnapshotHeaderRecord"),
                     ControlRecordType.SNAPSHOT_FOOTER: ("SnapshotFooter", "SnapshotFooterRecord"),
                     ControlRecordType.KRAFT_VERSION: ("KRaftVersion", "KRaftVersionRecord"),
                     ControlRecordType.KRAFT_VOTERS: ("KRaftVoters", "VotersRecord")}

    timestamp_type = "LogAppendTime" if batch.timestamp_type == 1 else "CreateTime"
    sequence = batch.base_sequence if is_v2 else -1
    try:
        for index, record in enumerate(batch):
            parts = [f"| offset: {record.offset} {timestamp_type}: {record.timestamp}",
                     f"keySize: {-1 if record.key is None else len(record.key)}",
                     f"valueSize: {-1 if record.value is None else len(record.value)}"]
            if is_v2:
                parts.append(f"sequence: {sequence + index if sequence >= 0 else -1}")
                parts.append(f"headerKeys: [{','.join(name for name, _ in record.headers)}]")
            if is_v2 and batch.is_control:
                kind = control_record_type(record.key)
                if kind in (ControlRecordType.COMMIT, ControlRecordType.ABORT):
                    marker = EndTransactionMarker.deserialize(record)
                    parts.append(f"endTxnMarker: {marker.control_type.name} "
                                 f"coordinatorEpoch: {marker.coordinator_epoch}")
                elif kind in kraft_records:
                    parts.append(_kraft_record_json(*kraft_records[kind], record.value))
                else:
                    parts.append(f"controlType: {kind.name}({kind.value})")
            elif decoder is not None:
                key, payload = decoder(record)
                if key is not None:
                    parts.append(f"key: {key}")
                if payload is not None:
                    parts.append(f"payload: {payload}")
            typer.echo(" ".join(parts))
    except CorruptRecordError as error:
        typer.echo(f"| invalid records in the batch at position {batch.position}: {error}")
        return 1
    return 0


def _kraft_record_json(name: str, schema: str, value: bytes | None) -> str:
    """A KRaft control record (LEADER_CHANGE, SNAPSHOT_HEADER, SNAPSHOT_FOOTER, KRAFT_VERSION, KRAFT_VOTERS) as Kafka's
    tool prints it: `name` and the value's JSON form (field names in camelCase, Uuids in Kafka's base64). Each value
    starts with its own int16 version, which picks the schema version."""
    import json
    import struct
    import uuid

    from kfk.errors import CorruptRecordError, ProtocolError, UnsupportedVersionError
    from kfk.protocol.messages import data_class
    from kfk.common.uuids import uuid_to_base64

    if value is None or len(value) < 2:
        raise CorruptRecordError(f"{name} control record without a value")
    (version,) = struct.unpack_from(">h", value)
    try:
        message = data_class(schema).decode(value, version)
    except (ProtocolError, UnsupportedVersionError, IndexError, struct.error) as error:  # truncated or unknown
        raise CorruptRecordError(f"{name} control record: {error}") from error

    absent = {field for field, since in _FIELDS_SINCE.get(schema, {}).items() if version < since}

    def kafka_json(data):
        if isinstance(data, dict):
            return {_camel_case(field): kafka_json(item) for field, item in data.items() if field not in absent}
        if isinstance(data, list):
            return [kafka_json(item) for item in data]
        return uuid_to_base64(data) if isinstance(data, uuid.UUID) else data

    return f"{name} {json.dumps(kafka_json(message.to_dict()), separators=(',', ':'))}"


#: Fields of the KRaft control records that their first versions do not carry, by the version that adds them (the
#: generated message holds them at every version; Kafka's JSON converter prints only a version's own).
_FIELDS_SINCE: dict[str, dict[str, int]] = {"LeaderChangeMessage": {"voter_directory_id": 1}}


def _camel_case(snake: str) -> str:
    """k_raft_version -> kRaftVersion: a generated message's field name as Kafka's JSON converters write it."""
    first, *rest = snake.split("_")
    return first + "".join(part.capitalize() for part in rest)


def _text(value: bytes) -> str:
    from kfk.commands.java_text import java_utf8

    return java_utf8(value)


def _dump_index(path: str, sanity_check_only: bool, verify_only: bool) -> int:
    from kfk.errors import KafkaStorageError
    from kfk.storage.index import OffsetIndex, TimeIndex, TimestampOffset

    base_offset = _base_offset(path)
    is_time_index = path.endswith(".timeindex")
    index_class = TimeIndex if is_time_index else OffsetIndex
    index = index_class(path, base_offset, writable=False)
    try:
        slots = index.entries
        index.ignore_preallocated_tail()
        if not is_time_index and index.entries == 0:
            typer.echo(f"{path} is empty.")
            return 0
        if sanity_check_only:
            try:
                if is_time_index and 0 < index.entries < slots:
                    # Kafka's tool counts every slot of a time index never trimmed (the active segment of a log
                    # whose broker stopped: Kafka 4.4's metadata log leaves one) as an entry: its last entry is a
                    # pre-allocated zero, which its check finds before the first timestamp.
                    index.check_last_entry(TimestampOffset(0, base_offset))
                index.sanity_check()
            except KafkaStorageError as error:
                typer.echo(f"{path} failed sanity check: {error}")
                return 1
            typer.echo(f"{path} passed sanity check.")
            return 0
        log_path = path[: path.rindex(".")] + ".log"
        log = _open(log_path) if os.path.exists(log_path) else None
        problems = 0
        for slot in range(index.entries):
            entry = index.entry(slot)
            if is_time_index:
                timestamp, offset = entry
                if slot > 0 and timestamp == 0 and offset == base_offset:
                    break  # the zeroed, pre-allocated rest of an untrimmed index
                if not verify_only:
                    typer.echo(f"timestamp: {timestamp} offset: {offset}")
                continue
            offset, position = entry
            if slot > 0 and offset == base_offset:
                break
            mismatch = _index_mismatch(log, offset, position) if log is not None else None
            if mismatch is not None:
                problems += 1
                typer.echo(f"Index offset: {offset}, log offset: {mismatch}, position: {position} (mismatch)")
            elif not verify_only:
                typer.echo(f"offset: {offset} position: {position}")
        if log is None and verify_only:
            fail(f"--verify-index-only needs {log_path} beside the index")
        return problems
    finally:
        index.close()


def _index_mismatch(log, offset: int, position: int) -> int | None:
    """None if the batch at ``position`` ends at ``offset``; else what is there (its last offset, or -1)."""
    from kfk.errors import CorruptRecordError
    from kfk.records import iter_batches

    try:
        batch = next(iter_batches(log, position), None)
    except CorruptRecordError:
        return -1
    if batch is None:
        return -1
    return None if batch.last_offset == offset else batch.last_offset


def _dump_snapshot(path: str) -> None:
    from kfk.storage.producer_state import ProducerStateManager

    for entry in ProducerStateManager.read_snapshot(path):
        first_offset = entry.current_txn_first_offset  # a Java OptionalLong in Kafka's tool, printed as such
        optional_first_offset = "OptionalLong.empty" if first_offset is None else f"OptionalLong[{first_offset}]"
        typer.echo(f"producerId: {entry.producer_id} producerEpoch: {entry.producer_epoch} "
                   f"coordinatorEpoch: {entry.coordinator_epoch} currentTxnFirstOffset: {optional_first_offset} "
                   f"lastTimestamp: {entry.last_timestamp} firstSequence: {entry.first_sequence} "
                   f"lastSequence: {entry.last_sequence} lastOffset: {entry.last_data_offset} "
                   f"offsetDelta: {entry.last_offset_delta} timestamp: {entry.last_timestamp}")


def _dump_txn_index(path: str) -> None:
    from kfk.storage.transaction_index import ABORTED_TXN_VERSION, TransactionIndex

    index = TransactionIndex(_base_offset(path), path)
    try:
        for aborted in index.all_aborted_txns():
            typer.echo(f"version: {ABORTED_TXN_VERSION} producerId: {aborted.producer_id} "
                       f"firstOffset: {aborted.first_offset} lastOffset: {aborted.last_offset} "
                       f"lastStableOffset: {aborted.last_stable_offset}")
    finally:
        index.close()
