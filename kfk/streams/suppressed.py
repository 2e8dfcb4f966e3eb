"""Suppression (Kafka's Suppressed): hold a windowed KTable's updates back and emit each window's final result
once, when the window closes.

``until_window_closes`` waits, by stream time, for the end of each window plus the grace period of the windowed
aggregation above it (the same moment the aggregation stops accepting late records), so that exactly one result per
window reaches the output. The held updates live in a buffer store logged to its own changelog, restored in full on
start (Kafka's buffer is in memory). Only the unbounded buffer is implemented: bounded buffers (max records/bytes,
emit early or shut down when full) are not.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["BufferConfig", "Suppressed"]


@dataclass(frozen=True)
class BufferConfig:
    """How suppression's buffer is kept: ``logging`` backs it with a changelog (Kafka's default, so that held
    results survive a restart)."""

    logging: bool = True

    @classmethod
    def unbounded(cls) -> BufferConfig:
        return cls()

    def with_logging_disabled(self) -> BufferConfig:
        return BufferConfig(logging=False)


@dataclass(frozen=True)
class Suppressed:
    """What KTable.suppress() holds back: ``name`` names its processor (and ``<name>-store`` its buffer)."""

    buffer_config: BufferConfig
    name: str | None = None

    @classmethod
    def until_window_closes(cls, buffer_config: BufferConfig) -> Suppressed:
        return cls(buffer_config)

    def with_name(self, name: str) -> Suppressed:
        return Suppressed(self.buffer_config, name)
