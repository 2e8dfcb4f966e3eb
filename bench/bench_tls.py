"""TLS beside plaintext on one broker: what encryption, and fetch responses read through memory instead of sendfile,
cost a producer and a consumer.

    python bench/bench_tls.py [--megabytes 200] [--repetitions 3]

One `kfk server start` subprocess with a PLAINTEXT and an SSL listener (certificates made fresh by
kfk.testing.certificates; no client certificate). Per repetition, interleaved, for each listener: confluent-kafka
produces `--megabytes` of 1 KiB records (acks=1, one partition) to a topic of its own, then a confluent-kafka
consumer and kcat read them back (bench_broker's helpers). Medians of MB/s of record values and the SSL/PLAINTEXT
ratio. The confluent-kafka consumer is bound by Python's per-record work; kcat is closer to the broker's limit, and
over TLS it also shows the reads that replace sendfile (and the encryption, on both sides of the loopback). Then the
connection setup time over each listener: kfk's BrokerConnection from connect to the ApiVersions answer (TCP, the TLS
handshake, ApiVersions), median and p90 of `--connections` connections one after the other.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_broker import BROKER_OVERRIDES, MIB, RECORD_SIZE, consume, consume_with_kcat, create_topic, produce  # noqa: E402

from kfk.client.config import ADMIN_CONFIG_DEF, ClientConfig  # noqa: E402
from kfk.client.connection import BrokerConnection  # noqa: E402
from kfk.security.tls import client_context  # noqa: E402
from kfk.testing.broker import start_broker  # noqa: E402
from kfk.testing.certificates import make_certificates  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--megabytes", type=int, default=200, help="MB of 1 KiB records per run")
    parser.add_argument("--repetitions", type=int, default=3)
    parser.add_argument("--connections", type=int, default=200, help="connections timed per listener")
    args = parser.parse_args()
    import confluent_kafka

    print(f"Python {sys.version.split()[0]}, {os.cpu_count()} CPUs, confluent-kafka {confluent_kafka.libversion()[0]}, "
          f"{args.megabytes} MB of 1 KiB records per run, {args.repetitions} repetitions (medians)\n")
    root = Path(tempfile.mkdtemp(prefix="kfk-bench-tls-"))
    certificates = make_certificates(root / "certificates")
    broker = start_broker(root / "broker", {**BROKER_OVERRIDES, **certificates.broker_overrides()},
                          extra_listeners=["SSL://127.0.0.1:0"])
    security = {"PLAINTEXT": {}, "SSL": {"security.protocol": "SSL", "ssl.ca.location": str(certificates.ca)}}
    count = args.megabytes * MIB // RECORD_SIZE
    volume = count * RECORD_SIZE / 1e6
    figures: dict[str, dict[str, list[float]]] = {name: {"produce": [], "consume": [], "kcat": []} for name in security}
    setup_ms: dict[str, list[float]] = {}
    try:
        for name in security:
            setup_ms[name] = asyncio.run(connection_setup(broker.ports[name], name == "SSL", certificates.ca,
                                                          args.connections))
        for repetition in range(args.repetitions):
            for name, settings in security.items():
                bootstrap = f"127.0.0.1:{broker.ports[name]}"
                topic = f"bench-tls-{name.lower()}-{repetition}"
                create_topic(bootstrap, topic, 1, settings)
                figures[name]["produce"].append(volume / produce(bootstrap, topic, count, "none", settings))
                figures[name]["consume"].append(volume / consume(bootstrap, topic, 1, count, settings))
                if shutil.which("kcat"):
                    figures[name]["kcat"].append(consume_with_kcat(bootstrap, topic, volume, settings))
                print(f"repetition {repetition + 1} {name:>9}: " + ", ".join(
                    f"{kind} {values[-1]:.1f} MB/s" for kind, values in figures[name].items() if values))
    finally:
        broker.stop()
        shutil.rmtree(root, ignore_errors=True)
    print(f"\n{'listener':>9} {'produce MB/s':>13} {'consume MB/s':>13} {'kcat consume MB/s':>18}")
    medians = {name: {kind: statistics.median(values) if values else float("nan") for kind, values in kinds.items()}
               for name, kinds in figures.items()}
    for name, values in medians.items():
        print(f"{name:>9} {values['produce']:>13.1f} {values['consume']:>13.1f} {values['kcat']:>18.1f}")
    ratio = {kind: medians["SSL"][kind] / medians["PLAINTEXT"][kind] for kind in ("produce", "consume", "kcat")}
    print(f"{'SSL/PT':>9} {ratio['produce']:>13.2f} {ratio['consume']:>13.2f} {ratio['kcat']:>18.2f}")
    print(f"\nconnection setup (kfk's BrokerConnection: connect, handshake, ApiVersions), {args.connections} each")
    for name, times in setup_ms.items():
        times.sort()
        print(f"{name:>9} median {statistics.median(times):6.2f} ms   p90 {times[int(len(times) * 0.9)]:6.2f} ms")
    return 0


async def connection_setup(port: int, tls: bool, ca: Path, count: int) -> list[float]:
    """Milliseconds from connect() to the ApiVersions answer, per connection."""
    settings = ClientConfig(ADMIN_CONFIG_DEF, "admin", {"security.protocol": "SSL", "ssl.truststore.type": "PEM",
                                                        "ssl.truststore.location": str(ca)})
    context = client_context(lambda key: settings[key]) if tls else None
    times = []
    for _ in range(count):
        connection = BrokerConnection("127.0.0.1", port, node_id=-1, client_id="bench-tls",
                                      client_software_name="kfk-bench", client_software_version="0",
                                      request_timeout_ms=30_000, connection_setup_timeout_ms=30_000,
                                      ssl_context=context)
        start = time.perf_counter()
        await connection.connect()
        times.append((time.perf_counter() - start) * 1000)
        connection.close()
    return times


if __name__ == "__main__":
    sys.exit(main())
