"""librdkafka's own C benchmark, rdkafka_performance, built once into the kfk cache and run by bench/run.py.

    python bench/rdkafka_performance.py      # fetch and build it if needed, print its path

Debian's librdkafka packages ship no examples, so it is built from source: the npm tarball of node-rdkafka
(NODE_RDKAFKA, fetched with `npm pack`) carries librdkafka's whole source tree under package/deps/librdkafka. It is
configured without SSL, SASL, zstd, zlib or curl (nothing a plaintext benchmark needs; lz4 and snappy are built in),
and only librdkafka.a and examples/rdkafka_performance are made: about two minutes on two cores, once. The binary
goes to the kfk cache (kfk.testing.apache_kafka.cache_dir(): $KFK_CACHE_DIR, else ~/.cache/kfk), under a file lock
and written last, so that an interrupted build is redone and never used; nothing lands in the repository.

The runs below use rdkafka_performance's own figures: a producer's from its first produce() to its last delivery
report, a consumer's from its first message to its last; neither counts start-up or metadata.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

from kfk.testing.apache_kafka import cache_dir, file_lock

#: The npm package whose tarball bundles librdkafka's source (node-rdkafka 3.6.1: librdkafka 2.12.0).
NODE_RDKAFKA = "node-rdkafka@3.6.1"
CONFIGURE_OPTIONS = ("--disable-ssl", "--disable-gssapi", "--disable-curl", "--disable-zstd", "--disable-zlib",
                     "--disable-lz4-ext", "--disable-syslog")
BUILD_SECONDS_LIMIT = 1800


class RdkafkaPerformanceUnavailable(RuntimeError):
    """npm, a C toolchain or the build itself failed: the message says which."""


def _build_dir() -> Path:
    return cache_dir() / "rdkafka_performance" / NODE_RDKAFKA.replace("@", "-")


def rdkafka_performance_path() -> Path:
    """The path of the rdkafka_performance binary, fetched and built on first use."""
    binary = _build_dir() / "rdkafka_performance"
    if not binary.exists():
        with file_lock(_build_dir() / ".lock"):
            if not binary.exists():
                _build(binary)
    return binary


def _run(command: list[str], cwd: Path, what: str) -> None:
    try:
        result = subprocess.run(command, cwd=cwd, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                                timeout=BUILD_SECONDS_LIMIT)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise RdkafkaPerformanceUnavailable(f"{what}: {error}") from None
    if result.returncode != 0:
        tail = "\n".join((result.stdout + result.stderr).strip().splitlines()[-20:])
        raise RdkafkaPerformanceUnavailable(f"{what} failed (exit {result.returncode}):\n{tail}")


def _build(binary: Path) -> None:
    for tool in ("npm", "cc", "make"):
        if shutil.which(tool) is None:
            raise RdkafkaPerformanceUnavailable(f"building rdkafka_performance needs {tool} "
                                                "(Debian: apt-get install npm build-essential)")
    binary.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="rdkafka-build-", dir=binary.parent) as scratch:
        work = Path(scratch)
        _run(["npm", "pack", "--silent", NODE_RDKAFKA], work, f"npm pack {NODE_RDKAFKA}")
        (tarball,) = work.glob("*.tgz")
        with tarfile.open(tarball) as archive:
            members = [m for m in archive.getmembers() if m.name.startswith("package/deps/librdkafka/")]
            archive.extractall(work, members=members, filter="tar")
        source = work / "package" / "deps" / "librdkafka"
        _run(["./configure", *CONFIGURE_OPTIONS], source, "librdkafka's configure")
        _run(["make", "-j2", "-C", "src", "librdkafka.a"], source, "make of librdkafka.a")
        _run(["make", "-C", "examples", "rdkafka_performance"], source, "make of rdkafka_performance")
        built = binary.with_name(binary.name + ".tmp")
        shutil.copy2(source / "examples" / "rdkafka_performance", built)
        built.replace(binary)  # last: its presence means a complete build


# -- runs ----------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Throughput:
    records: int
    records_per_second: float
    mb_per_second: float  # of record values, 10^6 bytes


_PRODUCED = re.compile(r"% (\d+) messages produced \(\d+ bytes\), (\d+) delivered .* in \d+ms: (\d+) msgs/s and "
                       r"([\d.]+) MB/s")
_CONSUMED = re.compile(r"% (\d+) messages \(\d+ bytes\) consumed in \d+ms: (\d+) msgs/s \(([\d.]+) MB/s\)")


def _run_benchmark(arguments: list[str], timeout: float) -> str:
    result = subprocess.run([str(rdkafka_performance_path()), *arguments], stdin=subprocess.DEVNULL,
                            capture_output=True, text=True, timeout=timeout)
    if result.returncode != 0:
        raise RuntimeError(f"rdkafka_performance exited {result.returncode}: {result.stderr.strip()[-500:]}")
    return result.stdout


def produce(bootstrap: str, topic: str, count: int, size: int, settings: dict[str, object],
            timeout: float = 600) -> Throughput:
    """Produce `count` records of `size` bytes to partition 0 of `topic`, with delivery reports; the summary's
    figures, checked to have every record delivered."""
    options = [arg for key, value in settings.items() for arg in ("-X", f"{key}={value}")]
    output = _run_benchmark(["-P", "-t", topic, "-p", "0", "-b", bootstrap, "-s", str(size), "-c", str(count),
                             "-q", *options], timeout)
    matches = _PRODUCED.findall(output)
    if not matches:
        raise RuntimeError(f"rdkafka_performance printed no producer summary: {output.strip()[-500:]}")
    produced, delivered, rate, mb = matches[-1]
    if int(delivered) != count:
        raise RuntimeError(f"rdkafka_performance delivered {delivered} of {count} ({produced} produced)")
    return Throughput(int(delivered), float(rate), float(mb))


def consume(bootstrap: str, topic: str, count: int, settings: dict[str, object], timeout: float = 600) -> Throughput:
    """Consume `count` records of partition 0 of `topic` from the beginning (no group: librdkafka's simple
    consumer, its queue callback mode); the summary's figures."""
    options = [arg for key, value in settings.items() for arg in ("-X", f"{key}={value}")]
    output = _run_benchmark(["-C", "-t", topic, "-p", "0", "-b", bootstrap, "-o", "beginning", "-c", str(count),
                             "-q", *options], timeout)
    matches = _CONSUMED.findall(output)
    if not matches:
        raise RuntimeError(f"rdkafka_performance printed no consumer summary: {output.strip()[-500:]}")
    consumed, rate, mb = matches[-1]
    if int(consumed) < count:
        raise RuntimeError(f"rdkafka_performance consumed {consumed} of {count}")
    return Throughput(int(consumed), float(rate), float(mb))


if __name__ == "__main__":
    try:
        print(rdkafka_performance_path())
    except RdkafkaPerformanceUnavailable as error:
        print(error, file=sys.stderr)
        sys.exit(1)
