"""Two clusters in one console (`kfk ui --cluster east=... --cluster west=...`, two real kfk brokers shared by the
module), in headless Chromium: / leads to the first cluster, every link and form stays within the cluster its page
shows, the switcher moves to the other, a topic created from west's page exists in west only (and the action log says
west), and an unknown cluster's URL is 404."""

from __future__ import annotations

import re
import urllib.error
import urllib.request

import pytest

from kfk.client import Admin, NewTopic
from kfk.testing.broker import start_broker
from tests.ui.conftest import screenshot

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def two_brokers(tmp_path_factory: pytest.TempPathFactory):
    started = []
    try:
        for name in ("east", "west"):
            process = start_broker(tmp_path_factory.mktemp(f"ui-{name}-broker"), {})
            started.append(process)
            with Admin({"bootstrap.servers": process.bootstrap_servers}) as admin:
                assert admin.create_topics([NewTopic(f"only-{name}", 1, 1)])[f"only-{name}"] is None
        yield {"east": started[0].bootstrap_servers, "west": started[1].bootstrap_servers}
    finally:
        for process in started:
            process.stop()


def _topics(bootstrap: str) -> list[str]:
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        return admin.list_topics()


def test_two_clusters_side_by_side(two_brokers, console_factory, browser_page) -> None:
    console = console_factory(two_brokers["east"], "--cluster", f"east={two_brokers['east']}",
                              "--cluster", f"west={two_brokers['west']}")
    page = browser_page
    page.goto(console.url)
    assert page.url == console.url + "clusters/east/"
    assert page.locator("#clusters a.current").inner_text() == "east"
    page.wait_for_function("document.getElementById('throughput').textContent !== '–'")  # the live chart answers

    page.click("nav a[href='/clusters/east/topics']")
    assert "only-east" in page.content() and "only-west" not in page.content()
    page.click("#clusters >> text=west")
    assert page.url == console.url + "clusters/west/"
    page.click("nav >> text=Topics")
    assert page.url == console.url + "clusters/west/topics"
    assert "only-west" in page.content() and "only-east" not in page.content()

    page.click("summary:has-text('Create a topic')")
    page.fill("#create-topic input[name=name]", "made-in-west")
    page.fill("#create-topic input[name=partitions]", "1")
    page.click("#create-topic button[type=submit]")
    page.wait_for_url(re.compile(r"/clusters/west/topics/made-in-west\?"))
    assert "created topic made-in-west" in page.locator(".notice").inner_text()
    assert "made-in-west" in _topics(two_brokers["west"]) and "made-in-west" not in _topics(two_brokers["east"])
    # The action log names the cluster acted on (the path it logs is the one within that cluster).
    assert re.search(re.escape(f"POST /topics on cluster west ({two_brokers['west']}) by 127.0.0.1:") +
                     r"\d+: 303 \(notice: created topic made-in-west\)", console.stderr_path.read_text())
    page.click("#browse-messages")
    assert page.url == console.url + "clusters/west/topics/made-in-west/messages"
    screenshot(page, "two-clusters")
    assert page.kfk_errors == []

    with pytest.raises(urllib.error.HTTPError) as missing:
        urllib.request.urlopen(console.url + "clusters/north/topics", timeout=30)
    assert missing.value.code == 404 and "clusters: east, west" in missing.value.read().decode()
