"""Cross-site request forgery against the web console, attempted the way it happens: the operator has the console
open in the browser, and another page (here served by the test from another port of 127.0.0.1, which browsers treat
as the same site, so the console's cookie goes along) auto-submits a form or fetch()es a POST to it. Both must be
refused and the topic must survive, while the console's own form and its own fetch() with the token still work.
Without a browser: a POST without the token (no Origin, as curl sends it) is refused, with it accepted."""

from __future__ import annotations

import html
import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from tests.cluster.helpers import wait_until
from tests.ui.conftest import ConsoleSession


class _Pages:
    """A web server on another port serving fixed HTML pages: the other origin."""

    def __init__(self) -> None:
        self.pages: dict[str, str] = {}
        pages = self.pages

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                body = pages.get(self.path, "not found").encode()
                self.send_response(200 if self.path in pages else 404)
                self.send_header("content-type", "text/html; charset=utf-8")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def other_origin() -> Iterator[_Pages]:
    pages = _Pages()
    yield pages
    pages.close()


def _topics(bootstrap: str) -> set[str]:
    return set(AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10).topics)


def _create(bootstrap: str, name: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(30)
    wait_until(lambda: name in _topics(bootstrap), what=f"topic {name} created")


def test_cross_origin_form_and_fetch_are_refused(kfk_broker, console_factory, browser_page, other_origin) -> None:
    console = console_factory(kfk_broker)
    _create(kfk_broker, "victim")
    page = browser_page
    page.goto(console.url + "topics/victim")  # the operator's console tab: the browser now holds its session cookie
    assert page.locator("#delete-topic").count() == 1
    delete_url = console.url + "topics/victim/delete"

    other_origin.pages["/form.html"] = (
        f'<form method="post" action="{html.escape(delete_url)}"><input type="hidden" name="csrf_token" value="guess">'
        '</form><script>document.forms[0].submit()</script>')
    with page.expect_response(delete_url) as forged:
        page.goto(other_origin.url + "/form.html")
    assert forged.value.status == 403
    assert "cross-origin request" in forged.value.text()

    other_origin.pages["/fetch.html"] = (
        "<script>fetch(" + repr(delete_url) + ", {method: 'POST', mode: 'no-cors', credentials: 'include',"
        " body: new URLSearchParams({csrf_token: 'guess'})}).then(() => { document.title = 'sent'; },"
        " (error) => { document.title = 'failed ' + error; });</script>")
    page.goto(other_origin.url + "/fetch.html")
    wait_until(lambda: page.title() != "", timeout=30, what="the other page's fetch to finish")
    assert page.title() == "sent"  # the request reached the console (its answer is opaque to the other page)
    wait_until(lambda: console.stderr_path.read_text().count("refused POST /topics/victim/delete") == 2,
               timeout=30, what="both forged requests logged as refused")
    assert "victim" in _topics(kfk_broker)


def test_own_form_and_fetch_work_and_are_logged(kfk_broker, console_factory, browser_page) -> None:
    console = console_factory(kfk_broker)
    _create(kfk_broker, "doomed")
    page = browser_page
    page.goto(console.url + "topics/doomed")
    page.on("dialog", lambda dialog: dialog.accept())
    page.click("#delete-topic")
    page.wait_for_url(re.compile(r"/topics\?notice="))
    assert "deleted topic doomed" in page.locator(".notice").inner_text()
    wait_until(lambda: "doomed" not in _topics(kfk_broker), what="doomed deleted")

    # The page's own script may POST too, with the token from the page's meta tag in X-CSRF-Token.
    status = page.evaluate("""async () => {
        const token = document.querySelector('meta[name="csrf-token"]').content;
        const response = await fetch("/topics", {method: "POST", headers: {"X-CSRF-Token": token},
                                                  body: new URLSearchParams({name: "fetched", partitions: "1"})});
        return response.status;
    }""")
    assert status == 200  # the 303 to the new topic's page, followed
    wait_until(lambda: "fetched" in _topics(kfk_broker), what="fetched created")
    log = console.stderr_path.read_text()
    cluster = re.escape(f"on the cluster at {kfk_broker}")
    assert re.search(rf"POST /topics/doomed/delete {cluster} by 127\.0\.0\.1:\d+: 303 \(notice: deleted topic doomed\)",
                     log), log
    assert re.search(rf"POST /topics {cluster} by 127\.0\.0\.1:\d+: 303 \(notice: created topic fetched\)", log), log
    assert page.kfk_errors == []


def test_a_post_without_the_session_token_is_refused(kfk_broker, console_factory) -> None:
    session = ConsoleSession(console_factory(kfk_broker).url)
    status, _, body = session.post("topics", {"name": "forged"}, with_token=False)
    assert status == 403 and "no valid CSRF token" in body
    session.get("topics")
    status, _, body = session.post("topics", {"name": "forged", "csrf_token": "0" * 64}, with_token=False)
    assert status == 403
    other = ConsoleSession(session.url)
    other.get("topics")
    status, _, body = session.post("topics", {"name": "forged", "csrf_token": other.token}, with_token=False)
    assert status == 403  # another session's token is not this session's
    assert "forged" not in _topics(kfk_broker)
    status, location, _ = session.post("topics", {"name": "allowed", "partitions": "1"})
    assert status == 303 and "created+topic+allowed" in location
    status, _, body = session.post("topics", {"name": "forged"}, headers={"Origin": "http://evil.example"})
    assert status == 403 and "cross-origin request (Origin http://evil.example" in body
    assert "forged" not in _topics(kfk_broker)


def test_malformed_tokens_and_bodies_are_refused_not_errors(kfk_broker, console_factory) -> None:
    session = ConsoleSession(console_factory(kfk_broker).url)
    session.get("")
    status, _, _ = session.post("topics", {"name": "forged", "csrf_token": "\u00e9t\u00e9"}, with_token=False)
    assert status == 403
    status, _, _ = session.post("topics", {}, with_token=False,
                                headers={"Content-Type": "multipart/form-data; boundary=x"})
    assert status == 403
    assert "forged" not in _topics(kfk_broker)
