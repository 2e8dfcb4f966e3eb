"""TLS beside plaintext on one broker: what encryption, and fetch responses read through memory instead of sendfile,
cost a producer and a consumer.

    python bench/bench_tls.py [--megabytes 200] [--repetitions 3]

One `kfk server start` subprocess with a PLAINTEXT and an SSL listener (certificates made fresh by
kfk.testing.certificates; no client certificate). Per repetition, interleaved, for each listener: confluent-kafka
produces `--megabytes` of 1 KiB records (acks=1, one partition) to a topic of its own, then a confluent-kafka
consumer and kcat read them back (listener_runs.py, shared with bench_sasl.py). Medians of MB/s of record values and the SSL/PLAINTEXT
ratio. The confluent-kafka consumer is bound by Python's per-record work; kcat is closer to the broker's limit, and
over TLS it also shows the reads that replace sendfile (and the encryption, on both sides of the loopback). Then the
connection setup time over each listener: kfk's BrokerConnection from connect to the ApiVersions answer (TCP, the TLS
handshake, ApiVersions), median and p90 of `--connections` connections one after the other.
"""

from __future__ import annotations

import asyncio
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_broker import BROKER_OVERRIDES  # noqa: E402
from listener_runs import (  # noqa: E402
    connection_setup_ms,
    print_setup_times,
    print_throughput,
    run_arguments,
    throughput_runs,
)

from kfk.client.config import ADMIN_CONFIG_DEF, ClientConfig  # noqa: E402
from kfk.security.tls import client_context  # noqa: E402
from kfk.testing.broker import start_broker  # noqa: E402
from kfk.testing.certificates import make_certificates  # noqa: E402


def main() -> int:
    args = run_arguments(__doc__, megabytes=200, connections=200, timed="listener")
    root = Path(tempfile.mkdtemp(prefix="kfk-bench-tls-"))
    certificates = make_certificates(root / "certificates")
    broker = start_broker(root / "broker", {**BROKER_OVERRIDES, **certificates.broker_overrides()},
                          extra_listeners=["SSL://127.0.0.1:0"])
    security = {"PLAINTEXT": {}, "SSL": {"security.protocol": "SSL", "ssl.ca.location": str(certificates.ca)}}
    settings = ClientConfig(ADMIN_CONFIG_DEF, "admin", {"security.protocol": "SSL", "ssl.truststore.type": "PEM",
                                                        "ssl.truststore.location": str(certificates.ca)})
    contexts = {"PLAINTEXT": None, "SSL": client_context(lambda key: settings[key])}
    try:
        setup_ms = {name: asyncio.run(connection_setup_ms(broker.ports[name], args.connections, "bench-tls",
                                                          ssl_context=context))
                    for name, context in contexts.items()}
        figures = throughput_runs(broker.ports, security, args.megabytes, args.repetitions, "bench-tls")
    finally:
        broker.stop()
        shutil.rmtree(root, ignore_errors=True)
    medians = print_throughput(figures)
    ratio = {kind: medians["SSL"][kind] / medians["PLAINTEXT"][kind] for kind in ("produce", "consume", "kcat")}
    print(f"{'SSL/PT':>9} {ratio['produce']:>13.2f} {ratio['consume']:>13.2f} {ratio['kcat']:>18.2f}")
    print_setup_times(f"connection setup (kfk's BrokerConnection: connect, handshake, ApiVersions), "
                      f"{args.connections} each", setup_ms)
    return 0


if __name__ == "__main__":
    sys.exit(main())
