"""The broker's memory while it answers huge fetches, over TLS and over plaintext.

    python bench/bench_fetch_memory.py [--megabytes 120] [--fetches 4] [--fetch-max-bytes N] [--rounds 2]

One `kfk server start` subprocess with a PLAINTEXT and an SSL listener (certificates made fresh by
kfk.testing.certificates). `--megabytes` of 1 KiB records are produced to one partition; then, per listener and per
round, `--fetches` clients at once each send one raw Fetch v12 from offset 0 (kfk's codec, a connection each) asking
for everything (max_bytes and partition_max_bytes 2**31-1) and read the response whole, as fast as they can. The
broker caps each response at its fetch.max.bytes (55 MiB by default; `--fetch-max-bytes` sets it, e.g. above the
partition's size to have the whole partition sent). Printed per listener: the bytes each fetch got, the broker's
RSS before, its peak while answering (VmHWM, reset before each listener's rounds through /proc/PID/clear_refs) and
after. Plaintext sends records with sendfile, so its peak barely moves; over TLS the records pass through the
broker's memory to be encrypted, and what they may hold there at once is the figure to watch.
"""

from __future__ import annotations

import argparse
import shutil
import socket
import ssl
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_broker import BROKER_OVERRIDES, MIB, RECORD_SIZE, create_topic, produce  # noqa: E402

from kfk.protocol.headers import RequestHeader, encode_request  # noqa: E402
from kfk.protocol.messages.fetch import FetchRequest  # noqa: E402
from kfk.testing.broker import BrokerProcess, start_broker  # noqa: E402
from kfk.testing.certificates import make_certificates  # noqa: E402

TOPIC = "fetch-memory"
EVERYTHING = 2**31 - 1


def fetch_frame(correlation_id: int) -> bytes:
    request = FetchRequest(max_wait_ms=0, min_bytes=1, max_bytes=EVERYTHING, isolation_level=0, topics=[
        FetchRequest.FetchTopic(topic=TOPIC, partitions=[FetchRequest.FetchPartition(
            partition=0, fetch_offset=0, partition_max_bytes=EVERYTHING)])])
    header = RequestHeader(request_api_key=request.API_KEY, request_api_version=12, correlation_id=correlation_id,
                           client_id="bench-fetch-memory")
    return encode_request(header, request)


def fetch_once(port: int, context: ssl.SSLContext | None, sizes: list[int]) -> None:
    """Send one Fetch and read its response whole (not decoded); its size goes to `sizes`."""
    with socket.create_connection(("127.0.0.1", port), timeout=120) as raw:
        sock = context.wrap_socket(raw, server_hostname="localhost") if context is not None else raw
        sock.sendall(fetch_frame(1))
        header = b""
        while len(header) < 4:
            header += sock.recv(4 - len(header))
        remaining = int.from_bytes(header, "big")
        sizes.append(remaining)
        buffer = bytearray(1 << 20)
        while remaining:
            received = sock.recv_into(buffer, min(remaining, len(buffer)))
            if not received:
                raise ConnectionError("the broker closed the connection mid-response")
            remaining -= received


def status_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def reset_peak(pid: int) -> bool:
    """Set VmHWM back to the current RSS (Linux 4.0+; needs the right to write the broker's clear_refs)."""
    try:
        Path(f"/proc/{pid}/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def measure(broker: BrokerProcess, listener: str, context: ssl.SSLContext | None, fetches: int,
            rounds: int) -> None:
    pid = broker.process.pid
    before = status_kib(pid, "VmRSS")
    exact_peak = reset_peak(pid)
    sizes: list[int] = []
    started = time.monotonic()
    for _ in range(rounds):
        threads = [threading.Thread(target=fetch_once, args=(broker.ports[listener], context, sizes))
                   for _ in range(fetches)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    elapsed = time.monotonic() - started
    peak = status_kib(pid, "VmHWM")
    after = status_kib(pid, "VmRSS")
    print(f"{listener:>9}: {rounds} x {fetches} fetches of {max(sizes) / MIB:6.1f} MiB in {elapsed:5.1f} s; "
          f"broker RSS {before / 1024:6.0f} MiB before, peak {peak / 1024:6.0f}"
          f"{'' if exact_peak else ' (since start)'}, {after / 1024:6.0f} after "
          f"(peak growth {(peak - before) / 1024:+.0f} MiB)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--megabytes", type=int, default=120, help="MiB of 1 KiB records in the partition")
    parser.add_argument("--fetches", type=int, default=4, help="fetches in flight at once")
    parser.add_argument("--rounds", type=int, default=2, help="rounds of --fetches fetches per listener")
    parser.add_argument("--fetch-max-bytes", type=int, default=None, help="the broker's fetch.max.bytes")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="kfk-bench-fetch-memory-"))
    certificates = make_certificates(root / "certificates")
    overrides = {**BROKER_OVERRIDES, **certificates.broker_overrides()}
    if args.fetch_max_bytes is not None:
        overrides["fetch.max.bytes"] = str(args.fetch_max_bytes)
    broker = start_broker(root / "broker", overrides, extra_listeners=["SSL://127.0.0.1:0"])
    context = ssl.create_default_context(cafile=str(certificates.ca))
    context.check_hostname = False
    try:
        bootstrap = f"127.0.0.1:{broker.ports['PLAINTEXT']}"
        create_topic(bootstrap, TOPIC, 1)
        produce(bootstrap, TOPIC, args.megabytes * MIB // RECORD_SIZE, "none")
        print(f"Python {sys.version.split()[0]}; {args.megabytes} MiB in one partition; fetch.max.bytes "
              f"{args.fetch_max_bytes if args.fetch_max_bytes is not None else 'default'}")
        measure(broker, "PLAINTEXT", None, args.fetches, args.rounds)
        measure(broker, "SSL", context, args.fetches, args.rounds)
    finally:
        broker.stop()
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
