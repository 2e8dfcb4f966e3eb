"""Connect workers for tests: kfk's (`kfk connect standalone` in a subprocess) and Apache Kafka's
(connect-standalone's main class on the Connect jars), both on a free port, both stopped by the caller."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

from kfk.client import Consumer, TopicPartition
from kfk.testing.apache_kafka import CONNECT_STANDALONE_MAIN_CLASS, connect_classpath, java_command
from kfk.testing.ports import free_port


def write_properties(path: Path, properties: dict[str, str]) -> Path:
    path.write_text("".join(f"{key}={value}\n" for key, value in properties.items()))
    return path


def http(method: str, url: str, body: Any = None, headers: dict[str, str] | None = None) -> tuple[int, Any]:
    """(status, parsed JSON body or None) of one request, errors included."""
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method,
                                     headers={"Content-Type": "application/json", "Accept": "application/json",
                                              **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            status, raw = response.status, response.read()
    except urllib.error.HTTPError as error:
        status, raw = error.code, error.read()
    return status, json.loads(raw) if raw else None


def read_topic(bootstrap: str, topic: str, count: int) -> list:
    """The first `count` records of partition 0 of `topic` (fewer if they do not come within 120 s)."""
    with Consumer({"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest"}) as consumer:
        consumer.assign([TopicPartition(topic, 0)])
        records: list = []
        deadline = time.monotonic() + 120
        while len(records) < count and time.monotonic() < deadline:
            records.extend(consumer.poll(1.0))
        return records


def wait_for(condition: Callable[[], Any], what: str, timeout: float = 180.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        result = condition()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


@dataclass
class Worker:
    process: subprocess.Popen
    url: str
    log_path: Path

    def call(self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None
             ) -> tuple[int, Any]:
        return http(method, self.url + path, body, headers)

    def call_between_rebalances(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        """A write, sent again while the group rebalances (the worker answers 409 then, as Kafka's do)."""
        return wait_for(lambda: (lambda answer: answer if answer[0] != 409 else None)(self.call(method, path, body)),
                        f"{method} {path} between rebalances")

    def wait_ready(self, timeout: float) -> Worker:
        def ready() -> bool:
            if self.process.poll() is not None:
                raise AssertionError(f"worker exited:\n{self.log_path.read_text()[-5000:]}")
            try:
                return self.call("GET", "/")[0] == 200
            except OSError:
                return False
        wait_for(ready, f"the worker at {self.url}", timeout)
        return self

    def wait_running(self, connector: str, tasks: int = 1) -> dict:
        def running() -> dict | None:
            status, body = self.call("GET", f"/connectors/{connector}/status")
            if status == 200 and body["connector"]["state"] == "RUNNING" and len(body["tasks"]) == tasks \
                    and all(task["state"] == "RUNNING" for task in body["tasks"]):
                return body
            return None
        return wait_for(running, f"{connector} running on {self.url}")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def units_per_worker(worker: Worker, connectors: Iterable[str]) -> dict[str, int] | None:
    """How many of the connectors and their tasks each worker id runs, as ``worker`` reports them; None until
    every one of them is RUNNING."""
    per_worker: Counter = Counter()
    for name in connectors:
        code, body = worker.call("GET", f"/connectors/{name}/status")
        if code != 200 or body["connector"]["state"] != "RUNNING" or not body["tasks"] \
                or any(task["state"] != "RUNNING" for task in body["tasks"]):
            return None
        per_worker[body["connector"]["worker_id"]] += 1
        per_worker.update(task["worker_id"] for task in body["tasks"])
    return dict(per_worker)


def start_kfk_worker(directory: Path, worker: dict[str, str], connectors: list[dict[str, str]],
                     mode: str = "standalone", name: str = "kfk") -> Worker:
    port = free_port()
    worker = {**worker, "listeners": f"http://127.0.0.1:{port}"}
    files = [write_properties(directory / f"{name}-worker.properties", worker)]
    files += [write_properties(directory / f"connector-{index}.properties", connector)
              for index, connector in enumerate(connectors)]
    log_path = directory / f"{name}-connect.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen([sys.executable, "-m", "kfk", "connect", mode, *map(str, files)],
                                   stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    return Worker(process, f"http://127.0.0.1:{port}", log_path).wait_ready(120)


def start_java_worker(directory: Path, worker: dict[str, str], connectors: list[dict[str, str]],
                      main_class: str = CONNECT_STANDALONE_MAIN_CLASS, name: str = "java") -> Worker:
    port = free_port()
    worker = {**worker, "listeners": f"http://127.0.0.1:{port}"}
    files = [write_properties(directory / f"{name}-worker.properties", worker)]
    files += [write_properties(directory / f"{name}-connector-{index}.properties", connector)
              for index, connector in enumerate(connectors)]
    log_path = directory / f"{name}-connect.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(java_command(main_class, list(map(str, files)),
                                                connect_classpath()),
                                   stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    return Worker(process, f"http://127.0.0.1:{port}", log_path).wait_ready(300)
