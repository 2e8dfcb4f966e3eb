"""SASL on one broker: the cost of authentication per connection, per mechanism, and of SASL_SSL beside PLAINTEXT and
SSL for a producer and a consumer.

    python bench/bench_sasl.py [--megabytes 100] [--repetitions 3] [--connections 100]

One `kfk server start` subprocess with three listeners, PLAINTEXT, SSL and SASL_SSL (certificates made fresh by
kfk.testing.certificates), and a fourth, SASL_PLAINTEXT, for the setup times. First the connection setup time with
kfk's BrokerConnection from connect to the end of the SASL exchange (TCP, ApiVersions, SaslHandshake,
SaslAuthenticate) for PLAINTEXT (no SASL, the baseline), PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 (4096 and 8192
iterations: PBKDF2 runs on both sides) and OAUTHBEARER (an unsecured token), median and p90 of `--connections`
connections one after the other. Then per repetition, interleaved, for each of PLAINTEXT, SSL and SASL_SSL (SCRAM-
SHA-256): confluent-kafka produces `--megabytes` of 1 KiB records (acks=1, one partition) and a confluent-kafka
consumer and kcat read them back (bench_broker's helpers); medians of MB/s of record values.
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

from kfk.client import Admin  # noqa: E402
from kfk.client.config import ADMIN_CONFIG_DEF, ClientConfig, sasl_client_factory  # noqa: E402
from kfk.client.connection import BrokerConnection  # noqa: E402
from kfk.client.structs import UserScramCredentialUpsertion  # noqa: E402
from kfk.testing.broker import BrokerProcess  # noqa: E402
from kfk.testing.certificates import make_certificates  # noqa: E402

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret" '
        'user_admin="admin-secret" user_bench="bench-secret";')
#: name -> (SASL mechanism or None for no SASL, the user, and its SCRAM iterations)
SETUPS = {"PLAINTEXT": (None, "", 0), "PLAIN": ("PLAIN", "bench", 0), "SCRAM-SHA-256": ("SCRAM-SHA-256", "bench", 4096),
          "SCRAM-SHA-512": ("SCRAM-SHA-512", "bench", 4096), "SCRAM-SHA-256 i=8192": ("SCRAM-SHA-256", "bench8k", 8192),
          "OAUTHBEARER": ("OAUTHBEARER", "", 0)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--megabytes", type=int, default=100, help="MB of 1 KiB records per run")
    parser.add_argument("--repetitions", type=int, default=3)
    parser.add_argument("--connections", type=int, default=100, help="connections timed per mechanism")
    args = parser.parse_args()
    import confluent_kafka

    print(f"Python {sys.version.split()[0]}, {os.cpu_count()} CPUs, confluent-kafka {confluent_kafka.libversion()[0]}, "
          f"{args.megabytes} MB of 1 KiB records per run, {args.repetitions} repetitions (medians)\n")
    root = Path(tempfile.mkdtemp(prefix="kfk-bench-sasl-"))
    certificates = make_certificates(root / "certificates")
    broker = BrokerProcess(log_dir=root / "broker" / "data", log_path=root / "broker.log", overrides={
        **BROKER_OVERRIDES, **certificates.broker_overrides(), "inter.broker.listener.name": "PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER", "sasl.jaas.config": JAAS},
        extra_listeners=["SSL://127.0.0.1:0", "SASL_SSL://127.0.0.1:0", "SASL_PLAINTEXT://127.0.0.1:0"])
    broker.start()
    scram = {"security.protocol": "SASL_SSL", "ssl.ca.location": str(certificates.ca), "sasl.mechanism": "SCRAM-SHA-256",
             "sasl.username": "bench", "sasl.password": "bench-secret"}
    security = {"PLAINTEXT": {}, "SSL": {"security.protocol": "SSL", "ssl.ca.location": str(certificates.ca)},
                "SASL_SSL": scram}
    count = args.megabytes * MIB // RECORD_SIZE
    volume = count * RECORD_SIZE / 1e6
    figures: dict[str, dict[str, list[float]]] = {name: {"produce": [], "consume": [], "kcat": []} for name in security}
    setup_ms: dict[str, list[float]] = {}
    try:
        with Admin({"bootstrap.servers": broker.bootstrap_servers}) as admin:
            admin.alter_user_scram_credentials([
                UserScramCredentialUpsertion("bench", "SCRAM-SHA-256", 4096, "bench-secret"),
                UserScramCredentialUpsertion("bench", "SCRAM-SHA-512", 4096, "bench-secret"),
                UserScramCredentialUpsertion("bench8k", "SCRAM-SHA-256", 8192, "bench-secret")])
        for name, (mechanism, user, _) in SETUPS.items():
            port = broker.ports["PLAINTEXT" if mechanism is None else "SASL_PLAINTEXT"]
            setup_ms[name] = asyncio.run(connection_setup(port, mechanism, user, args.connections))
        for repetition in range(args.repetitions):
            for name, settings in security.items():
                bootstrap = f"127.0.0.1:{broker.ports[name]}"
                topic = f"bench-sasl-{name.lower()}-{repetition}"
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
    print(f"\nconnection setup (kfk's BrokerConnection: connect, ApiVersions, SASL), {args.connections} each")
    for name, times in setup_ms.items():
        times.sort()
        print(f"{name:>21} median {statistics.median(times):6.2f} ms   p90 {times[int(len(times) * 0.9)]:6.2f} ms")
    print(f"\n{'listener':>9} {'produce MB/s':>13} {'consume MB/s':>13} {'kcat consume MB/s':>18}")
    for name, kinds in figures.items():
        values = {kind: statistics.median(v) if v else float("nan") for kind, v in kinds.items()}
        print(f"{name:>9} {values['produce']:>13.1f} {values['consume']:>13.1f} {values['kcat']:>18.1f}")
    return 0


async def connection_setup(port: int, mechanism: str | None, user: str, count: int) -> list[float]:
    """Milliseconds from connect() to the end of the SASL exchange (or of ApiVersions without SASL)."""
    sasl = None
    if mechanism is not None:
        settings = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mechanism}
        if mechanism == "OAUTHBEARER":
            settings["sasl.jaas.config"] = ("org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule "
                                            'required unsecuredLoginStringClaim_sub="bench";')
        else:
            settings.update({"sasl.username": user, "sasl.password": "bench-secret"})
        sasl = sasl_client_factory(ClientConfig(ADMIN_CONFIG_DEF, "admin", settings))
    times = []
    for _ in range(count):
        connection = BrokerConnection("127.0.0.1", port, node_id=-1, client_id="bench-sasl",
                                      client_software_name="kfk-bench", client_software_version="0",
                                      request_timeout_ms=30_000, connection_setup_timeout_ms=30_000, sasl=sasl)
        start = time.perf_counter()
        await connection.connect()
        times.append((time.perf_counter() - start) * 1000)
        connection.close()
    return times


if __name__ == "__main__":
    sys.exit(main())
