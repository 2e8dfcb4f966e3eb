"""FileStreamSource / FileStreamSink: Kafka's file connectors (org.apache.kafka.connect.file), same configs,
same records and same offsets, so either runtime resumes the other's.

The source emits one record per line (value: the line as a STRING, no key, timestamp: now) with source partition
{"filename": <file>} and offset {"position": n}. As in Kafka, n counts the characters read (UTF-16 code units,
line terminators included) and a restart skips n *bytes* of the file; the two agree for ASCII text.
The sink appends each record's value and a newline to `file` (standard output when unset).
"""

from __future__ import annotations

import codecs
import time
import sys
import threading
from typing import Any, Mapping

from kfk.connect.config_def import ConfigDef, ConfigKey, at_least, non_empty_string
from kfk.connect.connector import SinkConnector, SinkTask, SourceConnector, SourceTask
from kfk.connect.converters import java_string
from kfk.connect.data import STRING_SCHEMA
from kfk.connect.errors import ConnectException
from kfk.connect.records import SinkRecord, SourceRecord

FILE_CONFIG = "file"
TOPIC_CONFIG = "topic"
TASK_BATCH_SIZE_CONFIG = "batch.size"
DEFAULT_TASK_BATCH_SIZE = 2000
FILENAME_FIELD = "filename"
POSITION_FIELD = "position"
#: How long poll() waits for more of the file when there is nothing new (Kafka's source waits 1 s too).
IDLE_WAIT_SECONDS = 1.0

SOURCE_CONFIG = ConfigDef([
    ConfigKey(FILE_CONFIG, "STRING", None, "HIGH", "The file to read; standard input when unset."),
    ConfigKey(TOPIC_CONFIG, "STRING", importance="HIGH", documentation="The topic the lines are written to.",
              validator=non_empty_string),
    ConfigKey(TASK_BATCH_SIZE_CONFIG, "INT", DEFAULT_TASK_BATCH_SIZE, "LOW",
              "The most lines one poll returns.", validator=at_least(1)),
])
SINK_CONFIG = ConfigDef([
    ConfigKey(FILE_CONFIG, "STRING", None, "HIGH", "The file to append to; standard output when unset."),
])


class FileStreamSourceConnector(SourceConnector):
    def start(self, props: Mapping[str, str]) -> None:
        self.props = dict(props)
        SOURCE_CONFIG.parse(props)

    def task_class(self) -> type:
        return FileStreamSourceTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [dict(self.props)]  # one file, one reader

    def stop(self) -> None:
        pass

    def config(self) -> ConfigDef:
        return SOURCE_CONFIG

    def exactly_once_support(self, props: Mapping[str, str]) -> str | None:
        # the file is re-read from the committed position: exactly-once when offsets and records commit together
        return "SUPPORTED" if props.get(FILE_CONFIG) else "UNSUPPORTED"

    def alter_offsets(self, config: Mapping[str, str], offsets: Mapping[Any, Mapping[str, Any] | None]) -> bool:
        for partition, offset in offsets.items():
            if offset is None:
                continue
            if FILENAME_FIELD not in dict(partition):
                raise ConnectException(f"Partition objects should contain the key '{FILENAME_FIELD}'")
            if POSITION_FIELD not in offset:
                raise ConnectException(f"Offset objects should either be null or contain the key '{POSITION_FIELD}'")
            position = offset[POSITION_FIELD]
            if isinstance(position, bool) or not isinstance(position, int):
                raise ConnectException(f"The value for the '{POSITION_FIELD}' key in the offset is expected to be a "
                                       "Long value")
            if position < 0:
                raise ConnectException(f"The value for the '{POSITION_FIELD}' key in the offset should be a "
                                       "non-negative value")
        return True


def _utf16_length(text: str) -> int:
    """Java's String.length(): characters outside the BMP count twice."""
    return len(text) + sum(1 for char in text if ord(char) > 0xFFFF)


class FileStreamSourceTask(SourceTask):
    def start(self, props: Mapping[str, str]) -> None:
        parsed = SOURCE_CONFIG.parse(props)
        self.filename: str | None = parsed[FILE_CONFIG] or None
        self.topic: str = parsed[TOPIC_CONFIG]
        self.batch_size: int = parsed[TASK_BATCH_SIZE_CONFIG]
        self.stream = None
        self.stream_offset: int | None = None
        self.buffer = ""
        self.start = 0  # where the unread part of the buffer begins
        self.ascii = True
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self.stopping = threading.Event()

    def _open(self) -> bool:
        if self.filename is None:
            self.stream = sys.stdin.buffer
            return True
        try:
            self.stream = open(self.filename, "rb")
        except FileNotFoundError:
            return False
        offset = self.context.offset_storage_reader.offset({FILENAME_FIELD: self.filename})
        position = 0
        if offset is not None:
            position = offset.get(POSITION_FIELD)
            if isinstance(position, bool) or not isinstance(position, int):
                raise ConnectException("Offset position is the incorrect type")
            self.stream.seek(position)
        self.stream_offset = position
        return True

    def _extract_line(self) -> str | None:
        """The next whole line of the buffer (its terminator \n, \r or \r\n consumed), or None."""
        buffer, start = self.buffer, self.start
        newline, carriage = buffer.find("\n", start), buffer.find("\r", start)
        if carriage != -1 and (newline == -1 or carriage < newline):
            if carriage + 1 >= len(buffer):
                return None  # a \r\n may be split across reads
            end, next_start = carriage, carriage + 2 if buffer[carriage + 1] == "\n" else carriage + 1
        elif newline != -1:
            end, next_start = newline, newline + 1
        else:
            return None
        line = buffer[start:end]
        self.start = next_start
        if self.stream_offset is not None:
            consumed = next_start - start
            self.stream_offset += consumed if self.ascii else _utf16_length(buffer[start:next_start])
        return line

    def poll(self) -> list[SourceRecord] | None:
        if self.stream is None and not self._open():
            self.stopping.wait(IDLE_WAIT_SECONDS)
            return None
        chunk = self.stream.read1(65536) if hasattr(self.stream, "read1") else self.stream.read(65536)
        if chunk:
            self.buffer = self.buffer[self.start:] + self.decoder.decode(chunk)
            self.start = 0
            self.ascii = self.buffer.isascii()  # then a line's length is its UTF-16 length
        records: list[SourceRecord] = []
        while len(records) < self.batch_size:
            line = self._extract_line()
            if line is None:
                break
            partition = {FILENAME_FIELD: self.filename} if self.filename is not None else None
            offset = {POSITION_FIELD: self.stream_offset} if self.filename is not None else None
            records.append(SourceRecord(self.topic, None, None, None, STRING_SCHEMA, line,
                                        _now_ms(), source_partition=partition, source_offset=offset))
        if not records and not chunk:
            self.stopping.wait(IDLE_WAIT_SECONDS)
        return records

    def stop(self) -> None:
        self.stopping.set()
        if self.stream is not None and self.filename is not None:
            self.stream.close()


def _now_ms() -> int:
    return int(time.time() * 1000)


class FileStreamSinkConnector(SinkConnector):
    def start(self, props: Mapping[str, str]) -> None:
        self.props = dict(props)

    def task_class(self) -> type:
        return FileStreamSinkTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [dict(self.props) for _ in range(max_tasks)]

    def stop(self) -> None:
        pass

    def config(self) -> ConfigDef:
        return SINK_CONFIG

    def alter_offsets(self, config: Mapping[str, str], offsets: Mapping[Any, int | None]) -> bool:
        return True  # only the consumer group's offsets are involved


class FileStreamSinkTask(SinkTask):
    def start(self, props: Mapping[str, str]) -> None:
        filename = SINK_CONFIG.parse(props)[FILE_CONFIG]
        self.output = open(filename, "a", encoding="utf-8") if filename else sys.stdout
        self.owned = bool(filename)

    def put(self, records: list[SinkRecord]) -> None:
        for record in records:
            self.output.write(("null" if record.value is None else java_string(record.value)) + "\n")

    def flush(self, current_offsets: Mapping) -> None:
        self.output.flush()

    def stop(self) -> None:
        if self.owned:
            self.output.close()
