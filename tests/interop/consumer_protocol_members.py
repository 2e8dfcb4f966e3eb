"""Driving tests/interop/java/ConsumerProtocolMembers.java (Java consumers with group.protocol=consumer) from a test,
and the checks every consumer-protocol scenario makes on what they reported: every record consumed, committed
offsets never going backwards, and no partition owned by two members at once (from the assignment callbacks'
microsecond timestamps; every member runs on this machine, so their clocks agree)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

from kfk.testing.apache_kafka import java_command

MAIN_CLASS = "ConsumerProtocolMembers"


class MemberProcess:
    """One JVM running members of a group; `add`/`remove` drive it, `events` is what it printed so far."""

    def __init__(self, classes: Path, bootstrap: str, group: str, subscription: str) -> None:
        self.process = subprocess.Popen(java_command(MAIN_CLASS, [bootstrap, group, subscription],
                                                     extra_classpath=[classes]),
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                        text=True, start_new_session=True)
        self.events: list[dict] = []
        self._lock = threading.Lock()
        self._members = 0
        self.killed_at_us: int | None = None
        self._stderr: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._read_stderr, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            if line.startswith("{"):
                with self._lock:
                    self.events.append(json.loads(line))

    def _read_stderr(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self._stderr.append(line)

    def snapshot(self) -> list[dict]:
        with self._lock:
            return list(self.events)

    def _send(self, command: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()

    def add(self, instance_id: str | None = None) -> int:
        self._send("add" if instance_id is None else f"add {instance_id}")
        self._members += 1
        return self._members - 1

    def remove(self, member: int) -> None:
        self._send(f"remove {member}")

    def stop(self, timeout: float = 60) -> None:
        if self.process.poll() is None:
            self._send("stop")
            self.process.wait(timeout)
        assert self.process.returncode in (0, -signal.SIGKILL), "".join(self._stderr[-50:])

    def kill(self) -> None:
        """kill -9: the members vanish without leaving; their ownership ends now."""
        self.killed_at_us = time.time_ns() // 1000
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(30)

    def close(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(30)

    def diagnostics(self) -> str:
        return "".join(self._stderr[-40:])


def wait_until(condition: Callable[[], bool], what: str, timeout: float = 90.0,
               processes: tuple[MemberProcess, ...] = ()) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            details = "\n".join(p.diagnostics() for p in processes)
            raise AssertionError(f"timed out waiting for {what}\n{details}")
        time.sleep(0.1)


def current_owners(processes: tuple[MemberProcess, ...]) -> dict[tuple[int, int], set[str]]:
    """(process index, member) -> the partitions it owns now, from its callbacks."""
    owned: dict[tuple[int, int], set[str]] = {}
    for index, process in enumerate(processes):
        if process.killed_at_us is not None:
            continue
        for event in process.snapshot():
            key = (index, event.get("member", -1))
            if event["check"] == "assigned":
                owned.setdefault(key, set()).update(event["partitions"])
            elif event["check"] in ("revoked", "lost"):
                owned.setdefault(key, set()).difference_update(event["partitions"])
            elif event["check"] == "closed":
                owned.pop(key, None)
    return owned


def settled(processes: tuple[MemberProcess, ...], partitions: set[str], members: int) -> bool:
    """Every partition owned, by exactly `members` members each owning some."""
    owned = {key: value for key, value in current_owners(processes).items() if value}
    union = set().union(*owned.values()) if owned else set()
    return union == partitions and len(owned) == members and sum(map(len, owned.values())) == len(partitions)


def consumed(processes: tuple[MemberProcess, ...]) -> set[tuple[str, int]]:
    return {(f"{e['topic']}-{e['partition']}", e["offset"]) for p in processes for e in p.snapshot()
            if e["check"] == "record"}


def check_ownership_never_overlaps(processes: tuple[MemberProcess, ...]) -> None:
    """For each partition, the owners' intervals [assigned, revoked/lost/closed/killed) are disjoint."""
    intervals: dict[str, list[tuple[int, int, str]]] = defaultdict(list)
    for index, process in enumerate(processes):
        opened: dict[tuple[int, str], int] = {}
        end_of_process = process.killed_at_us or 2**62
        for event in process.snapshot():
            member = event.get("member", -1)
            if event["check"] == "assigned":
                for partition in event["partitions"]:
                    opened.setdefault((member, partition), event["us"])
            elif event["check"] in ("revoked", "lost"):
                for partition in event["partitions"]:
                    start = opened.pop((member, partition), None)
                    if start is not None:
                        intervals[partition].append((start, event["us"], f"{index}/{member}"))
            elif event["check"] == "closed":
                for (owner, partition), start in list(opened.items()):
                    if owner == member:
                        intervals[partition].append((start, event["us"], f"{index}/{member}"))
                        del opened[(owner, partition)]
        for (member, partition), start in opened.items():
            intervals[partition].append((start, end_of_process, f"{index}/{member}"))
    for partition, spans in intervals.items():
        spans.sort()
        for (start, end, owner), (next_start, _, next_owner) in zip(spans, spans[1:]):
            assert next_start >= end, f"{partition} owned by {owner} until {end} and by {next_owner} from " \
                                      f"{next_start}"


def check_commits_never_go_backwards(processes: tuple[MemberProcess, ...]) -> None:
    commits = sorted((e["us"], e["partition"], e["offset"]) for p in processes for e in p.snapshot()
                     if e["check"] == "commit")
    last: dict[str, int] = {}
    for at, partition, offset in commits:
        assert offset >= last.get(partition, 0), f"{partition}: commit {offset} after {last[partition]} at {at}"
        last[partition] = offset
