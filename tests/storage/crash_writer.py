"""A writer process for the crash tests: appends forever to one partition through a LogManager, and prints the
recovery point after each flush (an acknowledged, fsynced offset). The test kills it with SIGKILL at random points.

Values are a function of their offset (`value_for`), so the reader can check every record without a record of what
was written.
"""

from __future__ import annotations

import random
import sys
import time

from kfk.common.constants import INT64_MAX
from kfk.common.structs import TopicPartition
from kfk.config import LogConfig
from kfk.records import MemoryRecordsBuilder
from kfk.storage.log_manager import LogManager

TOPIC_PARTITION = TopicPartition("crash", 0)
# The records carry fixed 2020 timestamps while the clocks start near 0 (so that time never rolls or expires
# segments): no bound on future timestamps (Kafka 4's default rejects records over an hour ahead of the clock).
CONFIG = {"internal.segment.bytes": 32 * 1024, "index.interval.bytes": 1024, "file.delete.delay.ms": 0,
          "segment.index.bytes": 4096, "message.timestamp.after.max.ms": INT64_MAX}


def value_for(offset: int) -> bytes:
    size = 20 + (offset * 7919) % 300
    return (f"{offset}:" * (size // 3 + 1)).encode()[:size]


def timestamp_for(offset: int) -> int:
    return 1_600_000_000_000 + offset * 10


def log_manager(log_dir: str) -> LogManager:
    return LogManager([log_dir], LogConfig.from_properties(CONFIG), offset_checkpoint_interval_ms=5,
                      flush_check_interval_ms=5, retention_check_interval_ms=10**9)


def main(log_dir: str, seed: int) -> None:
    rng = random.Random(seed)
    manager = log_manager(log_dir)

    def now_ms() -> int:
        return int(time.monotonic() * 1000)

    manager.startup(now_ms())
    log = manager.get_or_create_log(TOPIC_PARTITION, now_ms())
    print(f"start {log.log_end_offset}", flush=True)
    while True:
        base = log.log_end_offset
        builder = MemoryRecordsBuilder(base_offset=base, partition_leader_epoch=0)
        for offset in range(base, base + rng.randint(1, 12)):
            builder.append(timestamp_for(offset), None, value_for(offset))
        log.append_as_leader(builder.close(), leader_epoch=0, now_ms=now_ms())
        if rng.random() < 0.3:
            log.flush()
            print(f"acked {log.recovery_point}", flush=True)
        manager.tick(now_ms())


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
