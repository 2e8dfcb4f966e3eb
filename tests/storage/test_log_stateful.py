"""A hypothesis state machine: random append / roll / truncate / reopen (clean or not) / retention / delete-records
against a plain list model of (offset, value)."""

from __future__ import annotations

import os
import shutil
import tempfile

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from kfk.storage.fetch_data_info import FetchIsolation
from kfk.storage.log import Log

from .conftest import make_batch, read_all, small_config

CONFIG = small_config({"internal.segment.bytes": 2048, "index.interval.bytes": 100, "retention.bytes": 6000})


class LogModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.root = tempfile.mkdtemp(prefix="kfk-stateful-")
        self.dir = os.path.join(self.root, "model-0")
        self.now_ms = 0
        self.log = Log.open(self.dir, CONFIG, now_ms=self.now_ms)
        self.model: list[tuple[int, bytes]] = []  # (offset, value) from the log start offset
        self.log_start_offset = 0
        self.log_end_offset = 0

    def teardown(self) -> None:
        self.log.close()
        shutil.rmtree(self.root, ignore_errors=True)

    @rule(count=st.integers(1, 5), size=st.integers(0, 300))
    def append(self, count: int, size: int) -> None:
        values = [os.urandom(size) for _ in range(count)]
        info = self.log.append_as_leader(make_batch(self.log_end_offset, values, timestamp=self.now_ms),
                                         leader_epoch=0, now_ms=self.now_ms)
        assert info.first_offset == self.log_end_offset
        self.model.extend((self.log_end_offset + index, value) for index, value in enumerate(values))
        self.log_end_offset += count
        self.now_ms += 1

    @rule()
    def roll(self) -> None:
        self.log.roll(self.now_ms)

    @rule(data=st.data())
    def truncate(self, data: st.DataObject) -> None:
        target = data.draw(st.integers(self.log_start_offset, self.log_end_offset))
        # Truncation removes whole batches: the log ends at the first batch boundary at or below the target.
        self.log.truncate_to(target, self.now_ms)
        boundary = self.log.log_end_offset
        assert boundary <= max(target, self.log_start_offset)
        self.model = [(offset, value) for offset, value in self.model if offset < boundary]
        self.log_end_offset = boundary
        self.log_start_offset = min(self.log_start_offset, boundary)

    @rule(clean=st.booleans())
    def reopen(self, clean: bool) -> None:
        recovery_point = self.log.recovery_point
        if clean:
            self.log.flush()
            self.log.close()
        else:
            self.log.close_handlers()
        self.log = Log.open(self.dir, CONFIG, now_ms=self.now_ms, had_clean_shutdown=clean,
                            recovery_point=self.log.recovery_point if clean else recovery_point,
                            log_start_offset=self.log_start_offset)

    @precondition(lambda self: self.log_end_offset > self.log_start_offset)
    @rule(data=st.data())
    def delete_records(self, data: st.DataObject) -> None:
        target = data.draw(st.integers(self.log_start_offset, self.log_end_offset))
        self.log.update_high_watermark(self.log_end_offset)
        self.log.maybe_increment_log_start_offset(target)
        self.log_start_offset = max(self.log_start_offset, target)
        self.model = [(offset, value) for offset, value in self.model if offset >= self.log_start_offset]

    @rule()
    def retention(self) -> None:
        self.log.update_high_watermark(self.log_end_offset)
        self.log.delete_old_segments(self.now_ms)
        self.log_start_offset = self.log.log_start_offset
        self.model = [(offset, value) for offset, value in self.model if offset >= self.log_start_offset]

    @invariant()
    def matches_model(self) -> None:
        assert self.log.log_end_offset == self.log_end_offset
        assert self.log.log_start_offset == self.log_start_offset
        records = read_all(self.log, FetchIsolation.LOG_END)
        assert [(record.offset, record.value) for record in records] == self.model
        bases = self.log.segments.base_offsets
        assert bases == sorted(bases) and bases[0] <= self.log_start_offset


LogModel.TestCase.settings = settings(max_examples=30, stateful_step_count=30, deadline=None)
TestLogModel = LogModel.TestCase
