"""The console's own security against a real kfk broker: `kfk ui --auth basic --users-file FILE` over HTTPS
(--certfile/--keyfile with a certificate made at run time): no page without a login, a wrong password refused, the
logged-in user on the page and in the action log beside the client's address; bad flags are one line each."""

from __future__ import annotations

import re
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

from kfk.testing.certificates import make_certificates
from tests.ui.conftest import ConsoleSession


@pytest.fixture
def secured(kfk_broker, console_factory, tmp_path):
    certificates = make_certificates(tmp_path / "certs")
    users = tmp_path / "console-users.properties"
    users.write_text("# the console's operators\nalice: wonderland\nbob: builder,admin\n")
    console = console_factory(kfk_broker, "--auth", "basic", "--users-file", str(users),
                              "--certfile", str(certificates.broker.certificate),
                              "--keyfile", str(certificates.broker.key))
    return console, ssl.create_default_context(cafile=str(certificates.ca))


def test_login_over_https_and_actions_logged_with_the_user(secured, kfk_broker) -> None:
    console, context = secured
    assert console.url.startswith("https://127.0.0.1:")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(console.url, context=context, timeout=30)
    assert refused.value.code == 401
    assert refused.value.headers["WWW-Authenticate"] == 'Basic realm="kfk console", charset="UTF-8"'
    status, _ = ConsoleSession(console.url, ssl_context=context, login=("alice", "wrong")).get("")
    assert status == 401
    status, _ = ConsoleSession(console.url, ssl_context=context, login=("mallory", "wonderland")).get("")
    assert status == 401

    alice = ConsoleSession(console.url, ssl_context=context, login=("alice", "wonderland"))
    status, body = alice.get("topics")
    assert status == 200 and '<span class="user" id="user">alice</span>' in body
    status, location, _ = alice.post("topics", {"name": "by-alice", "partitions": "1"})
    assert status == 303 and "created+topic+by-alice" in location
    bob = ConsoleSession(console.url, ssl_context=context, login=("bob", "builder"))
    status, location, _ = bob.post("topics/by-alice/delete", {})
    assert status == 303 and "deleted+topic+by-alice" in location
    cluster = re.escape(f"on the cluster at {kfk_broker}")
    created = rf"POST /topics {cluster} by alice at 127\.0\.0\.1:\d+: 303 \(notice: created topic by-alice\)"
    deleted = (rf"POST /topics/by-alice/delete {cluster} by bob at 127\.0\.0\.1:\d+: 303 "
               r"\(notice: deleted topic by-alice\)")
    # The action is logged as its answer goes out: the line may land a moment after the client has the answer.
    deadline = time.monotonic() + 10
    while not re.search(deleted, log := console.stderr_path.read_text()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert re.search(created, log) and re.search(deleted, log), log


@pytest.mark.parametrize(("flags", "message"), [
    (["--auth", "basic"], "kfk: --auth basic needs --users-file FILE (one 'name: password' per line)"),
    (["--auth", "digest", "--users-file", "x"], "kfk: --auth takes 'basic' or 'sasl', not 'digest'"),
    (["--auth", "sasl"], "kfk: --auth sasl needs --command-config with security.protocol=SASL_PLAINTEXT or SASL_SSL"),
    (["--keyfile", "key.pem"], "kfk: --keyfile needs --certfile"),
    (["--cluster", "prod"], "kfk: --cluster is NAME=BOOTSTRAP (as prod=kafka1:9092,kafka2:9092), not 'prod'"),
    (["--auth", "basic", "--users-file", "/nonexistent/users.properties"],
     "kfk: cannot read --users-file /nonexistent/users.properties: No such file or directory"),
])
def test_bad_security_flags_are_one_line(flags, message) -> None:
    result = subprocess.run([sys.executable, "-m", "kfk", "ui", "--port", "0", *flags], capture_output=True,
                            text=True, timeout=60)
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines()[-1] == message
