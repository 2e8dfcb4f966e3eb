"""Build the Go (franz-go) and Node (kafkajs) interop programs once, into the download cache, outside the repo.

The Go program is built with the module versions go.mod/go.sum pin (modules in Go's own module cache); the Node
program's node_modules is installed with `npm ci` from package-lock.json into a cached directory that node finds
through NODE_PATH. Both are keyed by a hash of what they are built from, so an edit rebuilds and parallel xdist
workers share one build (a file lock keeps them from building at the same time). scripts/test.sh runs this module
before the tests so that no test waits for a download: `python3 -m tests.interop.programs`.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

from kfk.testing.apache_kafka import cache_dir, file_lock

HERE = Path(__file__).resolve().parent
GO_DIR = HERE / "go"
NODE_DIR = HERE / "node"


class ToolchainMissing(RuntimeError):
    """go, node or npm is not installed, or the build failed: the interop tests fail with this message."""


def _digest(files: list[Path]) -> str:
    hasher = hashlib.sha256()
    for path in files:
        hasher.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return hasher.hexdigest()[:16]


def _run(args: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: float = 600) -> None:
    if shutil.which(args[0]) is None:
        raise ToolchainMissing(f"{args[0]} is not installed (scripts/test.sh installs it)")
    result = subprocess.run(args, cwd=cwd, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                            timeout=timeout)
    if result.returncode != 0:
        raise ToolchainMissing(f"{' '.join(args)} failed ({result.returncode}): {result.stderr.strip()[-2000:]}")


def franz_go_program() -> Path:
    """The built Go program (tests/interop/go/main.go against franz-go)."""
    sources = sorted(GO_DIR.glob("*.go")) + [GO_DIR / "go.mod", GO_DIR / "go.sum"]
    target = cache_dir() / "franz-go" / _digest(sources)
    binary = target / "interop"
    with file_lock(target.with_name(target.name + ".lock")):
        if not binary.exists():
            target.mkdir(parents=True, exist_ok=True)
            partial = target / "interop.partial"
            _run(["go", "build", "-mod=readonly", "-buildvcs=false", "-o", str(partial), "."], GO_DIR)
            partial.rename(binary)
    return binary


def kafkajs_node_path() -> Path:
    """A node_modules directory holding the kafkajs package-lock.json pins (give it to node as NODE_PATH)."""
    manifests = [NODE_DIR / "package.json", NODE_DIR / "package-lock.json"]
    target = cache_dir() / "kafkajs" / _digest(manifests)
    modules = target / "node_modules"
    with file_lock(target.with_name(target.name + ".lock")):
        if not (target / "installed").exists():
            target.mkdir(parents=True, exist_ok=True)
            for manifest in manifests:
                shutil.copyfile(manifest, target / manifest.name)
            _run(["npm", "ci", "--no-audit", "--no-fund", "--ignore-scripts"], target)
            (target / "installed").touch()
    return modules


def node_command(*args: str) -> list[str]:
    if shutil.which("node") is None:
        raise ToolchainMissing("node is not installed (scripts/test.sh installs it)")
    return ["node", str(NODE_DIR / "interop.js"), *args]


if __name__ == "__main__":
    try:
        print(franz_go_program())
        print(kafkajs_node_path())
    except ToolchainMissing as error:
        sys.exit(f"tests/interop/programs.py: {error}")
