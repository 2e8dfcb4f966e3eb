"""`kfk ui --auth basic`'s login form against a real kfk broker: in headless Chromium a page asked for without a login
leads to /login, a wrong password is refused there, the right one leads back to the page asked for with the user
shown, and logging out ends the session on the server too (its cookie, replayed, is refused). Over HTTP: the form
needs the CSRF token like every form, failed logins lock a user out after five in a row (the right password
included) while others log in as before, every name not in the file shares one count, a login never leads off-site,
and scripts still log in with HTTP Basic. A login cookie signed for one user, time or process is no other's."""

from __future__ import annotations

import base64
import re
import urllib.error
import urllib.request

import pytest

from kfk.ui.auth import PasswordLogins
from tests.ui.conftest import ConsoleSession, screenshot


@pytest.fixture
def console(kfk_broker, console_factory, tmp_path):
    users = tmp_path / "console-users.properties"
    users.write_text("alice: wonderland\nbob: builder\n")
    return console_factory(kfk_broker, "--auth", "basic", "--users-file", str(users))


def test_log_in_see_the_overview_and_log_out_in_the_browser(console, browser_page) -> None:
    page = browser_page
    response = page.goto(console.url + "topics")
    assert response is not None and response.status == 200
    assert page.url == console.url + "login?next=%2Ftopics"

    page.fill("#login input[name=name]", "alice")
    page.fill("#login input[name=password]", "looking-glass")
    page.click("#login button[type=submit]")
    page.wait_for_selector(".error")
    screenshot(page, "login-refused")
    assert page.locator(".error").inner_text() == "wrong user name or password"
    assert page.input_value("#login input[name=name]") == "alice"
    assert not [cookie for cookie in page.context.cookies() if cookie["name"] == "kfk_console_login"]

    page.fill("#login input[name=password]", "wonderland")
    page.click("#login button[type=submit]")
    page.wait_for_url(console.url + "topics")
    assert page.locator("#user").inner_text() == "alice"
    page.click("nav >> text=Cluster")
    assert page.locator("#broker-count").inner_text() == "1"
    screenshot(page, "logged-in")
    [login_cookie] = [cookie for cookie in page.context.cookies() if cookie["name"] == "kfk_console_login"]
    assert login_cookie["httpOnly"] and login_cookie["sameSite"] == "Lax"

    page.click("#logout")
    page.wait_for_url(re.compile(r"/login\?notice="))
    assert page.locator(".notice").inner_text() == "logged out alice"
    page.goto(console.url)
    assert page.url == console.url + "login?next=%2F"
    # The cookie of the ended session is refused by the server, not only dropped by the browser.
    replayed = urllib.request.Request(console.url + "topics", headers={
        "Cookie": f"kfk_console_login={login_cookie['value']}"})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(replayed, timeout=30)
    assert refused.value.code == 401
    # The one browser error: the refused password's page (401).
    assert [error for error in page.kfk_errors if "401" not in error] == []


def test_failed_logins_are_bounded_and_basic_still_works(console) -> None:
    form = ConsoleSession(console.url)
    status, body = form.get("login")
    assert status == 200 and 'id="login"' in body
    status, _, _ = form.post("login", {"name": "alice", "password": "wonderland"}, with_token=False)
    assert status == 403  # a page of another site cannot log the operator in as its own user

    for _ in range(5):
        status, _, body = form.post("login", {"name": "bob", "password": "wrong"})
        assert status == 401 and "wrong user name or password" in body and 'value="bob"' in body
    status, _, body = form.post("login", {"name": "bob", "password": "builder"})
    assert status == 429 and re.search(r"too many failed logins as bob: try again in \d+ s", body), body
    assert ConsoleSession(console.url, login=("bob", "builder")).get("topics")[0] == 429

    # Names not in the file share one count: five of them lock out a sixth, not the file's users.
    for name in ("mallory", "eve", "trudy", "oscar", "victor"):
        assert form.post("login", {"name": name, "password": "guess"})[0] == 401
    assert form.post("login", {"name": "peggy", "password": "guess"})[0] == 429

    status, body = ConsoleSession(console.url, login=("alice", "wonderland")).get("topics")
    assert status == 200 and '<span class="user" id="user">alice</span>' in body
    status, location, _ = form.post("login", {"name": "alice", "password": "wonderland", "next": "//evil.example/"})
    assert status == 303 and location == "/"
    status, body = form.get("topics")  # the session cookie alone
    assert status == 200 and '<span class="user" id="user">alice</span>' in body

    log = console.stderr_path.read_text()
    assert re.search(r"failed login as 'bob' from 127\.0\.0\.1:\d+ \(5 in a row; locked out for 60 s\)", log), log
    assert re.search(r"POST /login on the cluster at \S+ by alice at 127\.0\.0\.1:\d+: 303", log), log


def test_login_cookies_cannot_be_forged_and_expire() -> None:
    logins = PasswordLogins({"alice": "wonderland", "bob": "builder"})
    cookie = logins.session_cookie("alice")
    assert logins.user_of(cookie) == "alice"
    encoded, generation, issued, signature = cookie.split(".")
    bob = base64.urlsafe_b64encode(b"bob").decode()
    assert logins.user_of(f"{bob}.{generation}.{issued}.{signature}") is None  # another user, same signature
    assert logins.user_of(f"{encoded}.{generation}.{int(issued) + 3600}.{signature}") is None  # a later time
    assert logins.user_of(cookie[:-1] + ("0" if cookie[-1] != "0" else "1")) is None
    assert PasswordLogins({"alice": "wonderland"}).user_of(cookie) is None  # another process's key
    expired = PasswordLogins({"alice": "wonderland"}, session_max_age_s=-1)
    assert expired.user_of(expired.session_cookie("alice")) is None
    logins.log_out("alice")
    assert logins.user_of(cookie) is None and logins.user_of(logins.session_cookie("alice")) == "alice"
