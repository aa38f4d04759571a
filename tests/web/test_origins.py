"""The dashboard answers only to its own names and its own pages: a web page whose name an
attacker re-points at 127.0.0.1 (DNS rebinding) gets nothing from a real server, and a form
posted from another origin changes nothing."""

from __future__ import annotations

from collections.abc import Iterator

import httpx2
import pytest

from goatbeat_celery.api import Schedules
from goatbeat_celery.tokens import Tokens
from goatbeat_celery.web import WebSettings, create_app
from goatbeat_celery.web.security import (
    CSRF_COOKIE,
    CSRF_FIELD,
    SECURITY_HEADERS,
    host_name,
    host_refusal,
)
from tests.web.conftest import TOKEN, form_token, serve

REBOUND = "rebind.attacker.example"


@pytest.fixture
def open_server(schedules: Schedules) -> Iterator[str]:
    """The dashboard with no token (the default), served on a loopback port."""
    yield from serve(create_app(schedules))


def test_a_rebound_name_gets_nothing_from_the_real_server(open_server: str,
                                                          schedules: Schedules) -> None:
    schedules.create("tick", "proj.tasks.tick", every=60, args=("secret-arg",))
    port = open_server.rsplit(":", 1)[1]
    foreign = {"Host": f"{REBOUND}:{port}"}
    with httpx2.Client(base_url=open_server, headers=foreign) as attacker:
        for path in ("/", "/schedules", "/schedule?name=tick", "/new", "/login"):
            page = attacker.get(path)
            assert page.status_code == 400, path
            assert "secret-arg" not in page.text and "tick" not in page.text
            assert "set-cookie" not in page.headers  # not even a CSRF cookie to replay
            assert "--allowed-host" in page.text
        # Even with a token pair lifted from a loopback page, a post under the rebound name
        # is refused before its form is read.
        with httpx2.Client(base_url=open_server) as own:
            token = form_token(own.get("/new").text)
            cookie = own.cookies[CSRF_COOKIE]
        origin = {"Origin": f"http://{REBOUND}:{port}", "Cookie": f"{CSRF_COOKIE}={cookie}"}
        created = attacker.post("/new", headers=origin, data={
            CSRF_FIELD: token, "name": "evil", "task": "proj.tasks.evil", "kind": "every",
            "every": "1"})
        queued = attacker.post("/schedule/run", headers=origin,
                               data={CSRF_FIELD: token, "name": "tick"})
        assert (created.status_code, queued.status_code) == (400, 400)
    assert [s.name for s in schedules.list()] == ["tick"]
    assert schedules.history("tick") == []


def test_a_post_from_another_origin_to_the_real_server_is_refused(
        open_server: str, schedules: Schedules) -> None:
    schedules.create("tick", "proj.tasks.tick", every=60)
    port = open_server.rsplit(":", 1)[1]
    with httpx2.Client(base_url=open_server) as browser:
        token = form_token(browser.get("/schedule", params={"name": "tick"}).text)
        for headers in ({"Origin": f"http://{REBOUND}:{port}"}, {"Origin": "null"},
                        {"Sec-Fetch-Site": "cross-site"}, {"Sec-Fetch-Site": "same-site"}):
            refused = browser.post("/schedule/run", headers=headers,
                                   data={CSRF_FIELD: token, "name": "tick"})
            assert refused.status_code == 403, headers
            assert "another site" in refused.text or "not this dashboard" in refused.text
        assert schedules.history("tick") == []
        # The dashboard's own page posts with its own origin and the browser's own fetch site.
        own = {"Origin": open_server, "Sec-Fetch-Site": "same-origin"}
        accepted = browser.post("/schedule/run", headers=own,
                                data={CSRF_FIELD: token, "name": "tick"})
        assert accepted.status_code == 303
        assert accepted.headers["location"].startswith("/schedule?")


def test_with_a_token_a_post_from_another_origin_is_refused_too(make_client: object,
                                                                 schedules: Schedules) -> None:
    schedules.create("tick", "proj.tasks.tick", every=60)
    client = make_client(WebSettings(token=TOKEN))  # type: ignore[operator]
    client.headers["Authorization"] = f"Bearer {TOKEN}"
    response = client.post("/schedule/pause", headers={"Origin": "http://evil.example"},
                           data={CSRF_FIELD: client.csrf(), "name": "tick"},
                           follow_redirects=False)
    assert response.status_code == 403
    assert schedules.get("tick").spec.enabled


def test_links_and_redirects_never_name_the_requests_host(make_client: object,
                                                          schedules: Schedules) -> None:
    # With a token and no allowed names, any Host is answered (a rebound page holds no
    # session); what is sent back still never names it.
    schedules.create("tick", "proj.tasks.tick", every=60)
    client = make_client(WebSettings(token=TOKEN))  # type: ignore[operator]
    evil = {"Host": f"{REBOUND}:8765"}
    to_login = client.get("/schedules", headers=evil, follow_redirects=False)
    assert to_login.status_code == 303
    assert to_login.headers["location"].startswith("/login?")
    client.headers["Authorization"] = f"Bearer {TOKEN}"
    html = client.get("/schedules", headers=evil).text
    assert REBOUND not in html and 'href="/schedule?name=tick"' in html
    paused = client.post("/schedule/pause", headers=evil,
                         data={CSRF_FIELD: client.csrf(), "name": "tick"},
                         follow_redirects=False)
    assert paused.status_code == 303 and REBOUND not in paused.headers["location"]


def test_allowed_hosts_are_answered_and_only_they(make_client: object) -> None:
    plain = make_client(WebSettings())  # type: ignore[operator]
    named = make_client(WebSettings(allowed_hosts=("beat.example.com",)))  # type: ignore[operator]
    guarded = make_client(  # type: ignore[operator]
        WebSettings(token=TOKEN, allowed_hosts=("beat.example.com",)))
    guarded.headers["Authorization"] = f"Bearer {TOKEN}"
    for host, answers in (("beat.example.com", (False, True, True)),
                          ("BEAT.example.com:8443", (False, True, True)),
                          ("127.0.0.1:8765", (True, True, True)),
                          ("localhost", (True, True, True)),
                          ("[::1]:8765", (True, True, True)),
                          ("127.0.0.1.nip.io", (False, False, False)),
                          ("evil.example", (False, False, False))):
        codes = tuple(client.get("/", headers={"Host": host}).status_code == 200
                      for client in (plain, named, guarded))
        assert codes == answers, host


def test_a_missing_or_odd_host_is_refused() -> None:
    settings = WebSettings()
    assert host_refusal(None, settings) is not None
    assert host_refusal("", settings) is not None
    assert host_refusal("127.0.0.1:80", settings) is None
    assert host_refusal("127.9.9.9", settings) is None
    assert host_refusal("0.0.0.0", settings) is not None
    assert host_refusal("localhost.attacker.example", settings) is not None
    assert host_name("[::1]:8765") == "::1" and host_name("Example.COM:80") == "example.com"


def test_allowed_hosts_must_be_plain_names(schedules: Schedules) -> None:
    settings = WebSettings(allowed_hosts=("http://beat.example.com", "*.example.com",
                                          "beat.example.com:80", "ok.example.com", "::1"))
    problems = settings.problems()
    assert len(problems) == 3
    assert all(problem.field == "allowed_hosts" and "no scheme, port, path" in problem.hint
               for problem in problems)


def test_the_stylesheet_is_guarded_as_a_page_is(make_client: object) -> None:
    plain = make_client(WebSettings())  # type: ignore[operator]
    guarded = make_client(  # type: ignore[operator]
        WebSettings(token=TOKEN, allowed_hosts=("beat.example.com",)))
    for client in (plain, guarded):
        sheet = client.get("/static/style.css")  # no sign-in: the sign-in page uses it
        assert sheet.status_code == 200 and sheet.headers["content-type"].startswith("text/css")
        for header, value in SECURITY_HEADERS.items():
            assert sheet.headers[header] == value, header
        rebound = client.get("/static/style.css", headers={"Host": REBOUND})
        assert rebound.status_code == 400 and "--allowed-host" in rebound.text
        assert "{" not in rebound.text  # not a line of the stylesheet
        for missing in ("/static/none.css", "/static/..%2Fapp.py", "/static/a%00.css"):
            refused = client.get(missing)
            assert refused.status_code in (400, 404), missing
            assert refused.headers["X-Content-Type-Options"] == "nosniff"
            assert "import" not in refused.text


def test_with_a_token_and_allowed_hosts_the_loopback_names_are_answered_too(
        make_client: object, schedules: Schedules) -> None:
    # An operator on the beat host (a health check, an SSH tunnel) reaches it by loopback
    # names; a rebound page is addressed by its own name, never by these.
    client = make_client(  # type: ignore[operator]
        WebSettings(token=TOKEN, allowed_hosts=("beat.internal",)))
    client.headers["Authorization"] = f"Bearer {TOKEN}"
    _, secret = Tokens(schedules.store).create("ci", scopes="read")
    api = {"Authorization": f"Bearer {secret}"}
    for host in ("127.0.0.1:8765", "localhost", "[::1]:8765", "beat.internal"):
        assert client.get("/", headers={"Host": host}).status_code == 200, host
        assert client.get("/api/v1/schedules", headers={"Host": host, **api}).status_code == 200
    refused = client.get("/", headers={"Host": REBOUND})
    assert refused.status_code == 400
    assert "127.0.0.1, [::1], localhost, beat.internal" in refused.text
    assert client.get("/api/v1/schedules",
                      headers={"Host": REBOUND, **api}).status_code == 400
