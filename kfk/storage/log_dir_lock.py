"""The exclusive lock a broker holds on each of its log dirs (`<log dir>/.lock`, Kafka's file name) for its lifetime.

Two brokers on one log dir would recover, truncate and delete each other's segments. The lock is an open file
description lock (Linux's F_OFD_SETLK): it conflicts with the POSIX record locks Apache Kafka's JVM takes on the same
file (FileChannel.tryLock), so kfk and Apache Kafka also keep out of each other's dirs, and, unlike a POSIX lock, it
is not dropped when the same process happens to close another descriptor of the file. It goes away with the
process, so a killed broker never leaves a stale lock behind.

The holder writes its pid into the file: a refused broker, `kfk server stop` and `kfk storage format` name it.
"""

from __future__ import annotations

import errno
import fcntl
import os
import struct
from collections.abc import Iterator
from contextlib import contextmanager

from kfk.errors import KafkaStorageError
from kfk.storage.log_files import LOCK_FILE

#: struct flock on 64-bit Linux: l_type, l_whence, l_start, l_len, l_pid (and the padding the kernel copies).
_FLOCK = struct.Struct("hhqqi4x")


class LogDirLockedError(KafkaStorageError):
    """Another process holds the log dir's lock."""

    def __init__(self, log_dir: str, pid: int | None) -> None:
        holder = f"pid {pid}" if pid is not None else "another process"
        super().__init__(f"log dir {log_dir} is in use by {holder} (its {LOCK_FILE} is locked): stop that broker "
                         f"first (kfk server stop --log-dir {log_dir})")
        self.log_dir = log_dir
        self.pid = pid


def _try_lock(fd: int) -> bool:
    """Take the write lock on the whole file; False when another open file description holds a conflicting one."""
    try:
        fcntl.fcntl(fd, fcntl.F_OFD_SETLK, _FLOCK.pack(fcntl.F_WRLCK, os.SEEK_SET, 0, 0, 0))
    except OSError as error:
        if error.errno in (errno.EAGAIN, errno.EACCES):
            return False
        raise
    return True


def _holder_pid(fd: int) -> int | None:
    """The holder's pid: the one kfk writes into the file, else the pid of a POSIX lock (Apache Kafka's)."""
    text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    if text.isdigit():
        return int(text)
    _, _, _, _, pid = _FLOCK.unpack(fcntl.fcntl(fd, fcntl.F_GETLK, _FLOCK.pack(fcntl.F_WRLCK, os.SEEK_SET, 0, 0, 0)))
    return pid if pid > 0 else None


class LogDirLock:
    """The held lock of one log dir; release() (or the process's exit) lets the next broker in."""

    def __init__(self, log_dir: str, fd: int, created: bool) -> None:
        self.log_dir = log_dir
        self._fd = fd
        #: True when acquire() created the dir itself: a start that fails before using it removes it again.
        self.created = created

    @classmethod
    def acquire(cls, log_dir: str) -> LogDirLock:
        """Lock `log_dir` (created if missing) or raise LogDirLockedError naming the holder; KafkaStorageError
        when the dir cannot be created or written."""
        created = not os.path.isdir(log_dir)
        try:
            os.makedirs(log_dir, exist_ok=True)
        except OSError as error:
            raise KafkaStorageError(f"cannot create log dir {log_dir}: {error.strerror or error}") from None
        path = os.path.join(log_dir, LOCK_FILE)
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as error:
            raise KafkaStorageError(f"log dir {log_dir} is not writable: {error.strerror or error}") from None
        if not _try_lock(fd):
            pid = _holder_pid(fd)
            os.close(fd)
            raise LogDirLockedError(log_dir, pid)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
        return cls(log_dir, fd, created)

    def release(self, remove_created: bool = False) -> None:
        """Unlock; with `remove_created`, also remove the dir if this lock created it and nothing else was written
        into it (a start that failed leaves no trace)."""
        if self._fd < 0:
            return
        os.close(self._fd)
        self._fd = -1
        if remove_created and self.created and os.listdir(self.log_dir) == [LOCK_FILE]:
            os.unlink(os.path.join(self.log_dir, LOCK_FILE))
            os.rmdir(self.log_dir)


def acquire_log_dirs(log_dirs: list[str]) -> list[LogDirLock]:
    """Lock every dir, or none: on a failure the locks taken so far are released (and the dirs they created
    removed) before the error is raised."""
    locks: list[LogDirLock] = []
    try:
        for log_dir in log_dirs:
            locks.append(LogDirLock.acquire(log_dir))
    except BaseException:
        release_log_dirs(locks, remove_created=True)
        raise
    return locks


def release_log_dirs(locks: list[LogDirLock], remove_created: bool = False) -> None:
    for lock in locks:
        lock.release(remove_created)


@contextmanager
def log_dirs_locked(log_dirs: list[str]) -> Iterator[None]:
    """Hold every dir's lock for a tool's offline work on them (formatting), as a broker would."""
    locks = acquire_log_dirs(log_dirs)
    try:
        yield
    finally:
        release_log_dirs(locks)


def lock_holder(log_dir: str) -> int | None:
    """The pid of the process that holds the log dir's lock (0 when its pid cannot be told), or None when nobody
    does (or there is no lock file). Another process than the holder asks: `kfk server stop` checks its target."""
    try:
        fd = os.open(os.path.join(log_dir, LOCK_FILE), os.O_RDWR | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        answer = fcntl.fcntl(fd, fcntl.F_OFD_GETLK, _FLOCK.pack(fcntl.F_WRLCK, os.SEEK_SET, 0, 0, 0))
        lock_type = _FLOCK.unpack(answer)[0]
        if lock_type == fcntl.F_UNLCK:
            return None
        return _holder_pid(fd) or 0
    finally:
        os.close(fd)
