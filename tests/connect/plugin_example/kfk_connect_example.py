"""A third-party Connect plugin, as a user writes one: found by kfk through its entry point (the dist-info beside
this file declares it under `kfk.connect.plugins`), never imported by kfk's code."""

from kfk.connect.config_def import ConfigDef, ConfigKey
from kfk.connect.connector import SinkConnector, SinkTask, SourceConnector, SourceTask
from kfk.connect.data import INT64_SCHEMA, STRING_SCHEMA, SchemaBuilder, Struct
from kfk.connect.records import SourceRecord

COUNTER_SCHEMA = SchemaBuilder.struct().name("example.Count").field("n", INT64_SCHEMA) \
    .field("label", STRING_SCHEMA).build()


class CounterSource(SourceConnector):
    """Counts from the stored offset up to `limit`, one struct per number, keyed by its label."""

    def config(self):
        return ConfigDef([ConfigKey("topic", "STRING", importance="HIGH", documentation="Where counts go."),
                          ConfigKey("limit", "LONG", 10, "LOW", "Where counting stops.")])

    def start(self, props):
        self.props = dict(props)

    def task_class(self):
        return CounterTask

    def task_configs(self, max_tasks):
        return [dict(self.props)]

    def stop(self):
        pass


class CounterTask(SourceTask):
    def start(self, props):
        self.topic, self.limit = props["topic"], int(props.get("limit", 10))
        offset = self.context.offset_storage_reader.offset({"counter": "main"})
        self.next = offset["next"] if offset else 0
        self.committed_records = 0

    def poll(self):
        if self.next >= self.limit:
            import time
            time.sleep(0.2)
            return []
        n, self.next = self.next, self.next + 1
        return [SourceRecord(self.topic, None, STRING_SCHEMA, f"label-{n}", COUNTER_SCHEMA,
                             Struct(COUNTER_SCHEMA).put("n", n).put("label", f"label-{n}"),
                             source_partition={"counter": "main"}, source_offset={"next": self.next})]

    def commit_record(self, record, metadata):
        self.committed_records += 1

    def stop(self):
        pass


class StopSource(SourceConnector):
    """Numbers its polls: the first returns at once, the next waits for stop() and returns what it had then."""

    def config(self):
        return ConfigDef([ConfigKey("topic", "STRING", importance="HIGH", documentation="Where polls go.")])

    def start(self, props):
        self.props = dict(props)

    def task_class(self):
        return StopTask

    def task_configs(self, max_tasks):
        return [dict(self.props)]

    def stop(self):
        pass


class StopTask(SourceTask):
    def start(self, props):
        import threading
        self.topic, self.stopped = props["topic"], threading.Event()
        offset = self.context.offset_storage_reader.offset({"stops": "main"})
        self.next = offset["next"] if offset else 0
        self.first = True

    def poll(self):
        if not self.first:
            self.stopped.wait()
        label = "first" if self.first else "at-stop"
        self.first, n, self.next = False, self.next, self.next + 1
        return [SourceRecord(self.topic, None, STRING_SCHEMA, f"{label}-{n}", STRING_SCHEMA, f"{label}-{n}",
                             source_partition={"stops": "main"}, source_offset={"next": self.next})]

    def stop(self):
        self.stopped.set()


class CollectingSink(SinkConnector):
    """Appends "key=value.n" lines to `file` on flush (so only flushed records are ever visible)."""

    def config(self):
        return ConfigDef([ConfigKey("file", "STRING", importance="HIGH", documentation="The output file.")])

    def start(self, props):
        self.props = dict(props)

    def task_class(self):
        return CollectingTask

    def task_configs(self, max_tasks):
        return [dict(self.props)]

    def stop(self):
        pass


class CollectingTask(SinkTask):
    def start(self, props):
        self.file, self.pending = props["file"], []

    def put(self, records):
        self.pending += [f"{record.key}={record.value.get('n')}" for record in records]

    def flush(self, current_offsets):
        with open(self.file, "a") as handle:
            handle.writelines(line + "\n" for line in self.pending)
        self.pending = []

    def stop(self):
        pass
