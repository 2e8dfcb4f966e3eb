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
consumer and kcat read them back (listener_runs.py, shared with bench_tls.py); medians of MB/s of record values.
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

from kfk.client import Admin  # noqa: E402
from kfk.client.config import ADMIN_CONFIG_DEF, ClientConfig, sasl_client_factory  # noqa: E402
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
    args = run_arguments(__doc__, megabytes=100, connections=100, timed="mechanism")
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
    try:
        with Admin({"bootstrap.servers": broker.bootstrap_servers}) as admin:
            admin.alter_user_scram_credentials([
                UserScramCredentialUpsertion("bench", "SCRAM-SHA-256", 4096, "bench-secret"),
                UserScramCredentialUpsertion("bench", "SCRAM-SHA-512", 4096, "bench-secret"),
                UserScramCredentialUpsertion("bench8k", "SCRAM-SHA-256", 8192, "bench-secret")])
        setup_ms = {}
        for name, (mechanism, user, _) in SETUPS.items():
            port = broker.ports["PLAINTEXT" if mechanism is None else "SASL_PLAINTEXT"]
            setup_ms[name] = asyncio.run(connection_setup_ms(port, args.connections, "bench-sasl",
                                                             sasl=sasl_factory(mechanism, user)))
        figures = throughput_runs(broker.ports, security, args.megabytes, args.repetitions, "bench-sasl")
    finally:
        broker.stop()
        shutil.rmtree(root, ignore_errors=True)
    print_setup_times(f"connection setup (kfk's BrokerConnection: connect, ApiVersions, SASL), "
                      f"{args.connections} each", setup_ms)
    print_throughput(figures)
    return 0


def sasl_factory(mechanism: str | None, user: str):
    """The client side of `mechanism` for `user` (None without SASL: the PLAINTEXT baseline)."""
    if mechanism is None:
        return None
    settings = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mechanism}
    if mechanism == "OAUTHBEARER":
        settings["sasl.jaas.config"] = ("org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule "
                                        'required unsecuredLoginStringClaim_sub="bench";')
    else:
        settings.update({"sasl.username": user, "sasl.password": "bench-secret"})
    return sasl_client_factory(ClientConfig(ADMIN_CONFIG_DEF, "admin", settings))


if __name__ == "__main__":
    sys.exit(main())
