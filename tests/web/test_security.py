"""Authentication, CSRF, read-only mode and where the server may listen."""

from __future__ import annotations

import base64
from datetime import timedelta

import pytest
from starlette.applications import Starlette
from starlette.routing import Route

from goatbeat_celery.api import Schedules
from goatbeat_celery.core.types.errors import ConfigurationError
from goatbeat_celery.web import WebSettings, create_app
from goatbeat_celery.web.api import API_PREFIX
from goatbeat_celery.web.app import SAFE_METHODS
from goatbeat_celery.web.security import (
    CSRF_COOKIE,
    CSRF_FIELD,
    SESSION_COOKIE,
    Signer,
    authenticated,
    bind_problem,
    is_loopback,
    parse_bind,
)
from tests.web.conftest import TOKEN, Browser, form_token


def test_a_post_without_the_csrf_field_is_refused_and_changes_nothing(
        client: Browser, schedules: Schedules) -> None:
    schedules.create("tick", "proj.tasks.tick", every=60)
    client.get("/")  # the browser has its CSRF cookie

    response = client.post("/schedule/pause", data={"name": "tick"}, follow_redirects=False)

    assert response.status_code == 403
    assert schedules.get("tick").spec.enabled


def test_a_post_whose_field_does_not_match_its_cookie_is_refused(
        client: Browser, schedules: Schedules) -> None:
    schedules.create("tick", "proj.tasks.tick", every=60)
    client.get("/")

    response = client.post("/schedule/pause", data={"name": "tick", CSRF_FIELD: "forged"},
                           follow_redirects=False)

    assert response.status_code == 403
    assert schedules.get("tick").spec.enabled


def test_a_post_from_a_browser_without_the_cookie_is_refused(
        client: Browser, schedules: Schedules) -> None:
    schedules.create("tick", "proj.tasks.tick", every=60)
    token = form_token(client.get("/schedule", params={"name": "tick"}).text)
    client.cookies.clear()  # another site's form: it cannot send our cookie

    response = client.post("/schedule/run", data={"name": "tick", CSRF_FIELD: token},
                           follow_redirects=False)

    assert response.status_code == 403
    assert schedules.history("tick") == []


def test_every_form_carries_the_csrf_token_of_its_cookie(client: Browser,
                                                         schedules: Schedules) -> None:
    schedules.create("tick", "proj.tasks.tick", every=60)
    posted = 0
    for path in ("/schedule", "/schedule/delete", "/backfill/new"):
        html = client.get(path, params={"name": "tick"}).text
        cookie = client.cookies[CSRF_COOKIE]
        assert html.count('method="post"') == html.count(
            f'name="{CSRF_FIELD}" value="{cookie}"'), path
        posted += html.count('method="post"')
    assert posted >= 5  # pause, run now, edit; remove; backfill preview


def test_csrf_cookie_is_strict_and_http_only(client: Browser) -> None:
    header = client.get("/").headers["set-cookie"]
    assert "HttpOnly" in header and "SameSite=strict" in header.replace("Strict", "strict")


def test_with_a_token_pages_redirect_to_sign_in(make_client: object,
                                                schedules: Schedules) -> None:
    client = make_client(WebSettings(token=TOKEN))  # type: ignore[operator]
    response = client.get("/schedules?q=a", follow_redirects=False)
    assert response.status_code == 303
    assert "/login?next=%2Fschedules%3Fq%3Da" in response.headers["location"]


def test_with_a_token_an_unauthenticated_post_is_refused(make_client: object,
                                                         schedules: Schedules) -> None:
    schedules.create("tick", "proj.tasks.tick", every=60)
    client = make_client(WebSettings(token=TOKEN))  # type: ignore[operator]
    response = client.submit("/schedule/pause", name="tick")
    assert response.status_code == 401
    assert schedules.get("tick").spec.enabled


def test_bearer_and_basic_auth_with_the_token_are_accepted(make_client: object) -> None:
    client = make_client(WebSettings(token=TOKEN))  # type: ignore[operator]
    bearer = client.get("/", headers={"Authorization": f"Bearer {TOKEN}"})
    assert bearer.status_code == 200
    basic = base64.b64encode(f"ops:{TOKEN}".encode()).decode()
    assert client.get("/", headers={"Authorization": f"Basic {basic}"}).status_code == 200
    wrong = client.get("/", headers={"Authorization": "Bearer nope"}, follow_redirects=False)
    assert wrong.status_code == 303


def test_signing_in_sets_a_session_cookie_that_is_not_the_token(make_client: object) -> None:
    client = make_client(WebSettings(token=TOKEN))  # type: ignore[operator]
    refused = client.submit("/login", token="wrong-token-wrong-token")
    assert refused.status_code == 401
    assert "not the token" in refused.text

    accepted = client.post("/login?next=/schedules",
                           data={CSRF_FIELD: client.csrf(), "token": TOKEN},
                           follow_redirects=False)
    assert accepted.status_code == 303
    assert accepted.headers["location"] == "/schedules"
    assert TOKEN not in accepted.headers["set-cookie"]
    assert client.get("/", follow_redirects=False).status_code == 200

    client.submit("/logout")
    assert client.get("/", follow_redirects=False).status_code == 303


def test_sign_in_never_redirects_to_another_site(make_client: object) -> None:
    client = make_client(WebSettings(token=TOKEN))  # type: ignore[operator]
    response = client.post("/login?next=//evil.example/x",
                           data={CSRF_FIELD: client.csrf(), "token": TOKEN},
                           follow_redirects=False)
    assert response.headers["location"].endswith("/")
    assert "evil" not in response.headers["location"]


def test_read_only_shows_no_forms_and_refuses_posts(make_client: object,
                                                    schedules: Schedules) -> None:
    schedules.create("tick", "proj.tasks.tick", every=60)
    client = make_client(WebSettings(read_only=True))  # type: ignore[operator]
    html = client.get("/schedule", params={"name": "tick"}).text
    assert "read-only" in html
    assert 'id="pause"' not in html and 'id="edit-form"' not in html

    response = client.submit("/schedule/pause", name="tick")
    assert response.status_code == 403
    assert schedules.get("tick").spec.enabled


def test_a_short_token_is_refused(schedules: Schedules) -> None:
    with pytest.raises(ConfigurationError, match="at least 16"):
        create_app(schedules, WebSettings(token="short"))


def test_only_loopback_may_be_bound_without_a_token() -> None:
    open_settings = WebSettings()
    assert bind_problem("127.0.0.1", open_settings) is None
    assert bind_problem("::1", open_settings) is None
    assert bind_problem("localhost", open_settings) is None
    assert "refusing" in (bind_problem("0.0.0.0", open_settings) or "")
    assert "refusing" in (bind_problem("192.0.2.10", open_settings) or "")
    assert bind_problem("0.0.0.0", WebSettings(token=TOKEN)) is None
    assert not is_loopback("203.0.113.7")


def test_bind_addresses_are_read_with_their_port() -> None:
    assert parse_bind("0.0.0.0:9000", 8765) == ("0.0.0.0", 9000)
    assert parse_bind("127.0.0.1", 8765) == ("127.0.0.1", 8765)
    assert parse_bind("[::1]:9001", 8765) == ("::1", 9001)
    assert parse_bind(":9002", 8765) == ("127.0.0.1", 9002)
    with pytest.raises(ValueError, match="port"):
        parse_bind("127.0.0.1:http", 8765)


def test_credentials_are_compared_whole() -> None:
    assert authenticated(None, authorization=None, session_valid=False)
    assert not authenticated(TOKEN, authorization=None, session_valid=False)
    assert not authenticated(TOKEN, authorization=f"Bearer {TOKEN[:-1]}", session_valid=False)
    assert not authenticated(TOKEN, authorization="Basic !!!", session_valid=False)
    assert not Signer(token=TOKEN, lifetime=timedelta(hours=1)).session_valid(TOKEN)


def test_an_equal_cookie_and_field_the_server_did_not_sign_are_refused(
        client: Browser, schedules: Schedules) -> None:
    # Another service on the same host can set this host's cookies: a pair it made up must
    # be worth nothing.
    schedules.create("tick", "proj.tasks.tick", every=60)
    for forged in ("aaaa", "aaaa.bbbb", client.csrf().split(".")[0] + ".0000"):
        client.cookies.set(CSRF_COOKIE, forged)
        response = client.post("/schedule/pause", data={CSRF_FIELD: forged, "name": "tick"},
                               follow_redirects=False)
        assert response.status_code == 403, forged
    assert schedules.get("tick").spec.enabled


def test_a_csrf_token_from_another_server_is_refused(schedules: Schedules) -> None:
    schedules.create("tick", "proj.tasks.tick", every=60)
    with Browser(create_app(schedules), base_url="http://127.0.0.1") as elsewhere:
        lifted = elsewhere.csrf()
    with Browser(create_app(schedules), base_url="http://127.0.0.1") as client:
        client.cookies.set(CSRF_COOKIE, lifted)
        response = client.post("/schedule/pause", data={CSRF_FIELD: lifted, "name": "tick"},
                               follow_redirects=False)
        assert response.status_code == 403
        # The refusal sets a token of this server's in the cookie, which works.
        issued = response.cookies[CSRF_COOKIE]
        client.cookies.clear()
        client.cookies.set(CSRF_COOKIE, issued)
        assert client.submit("/schedule/pause", name="tick").status_code == 303
    assert not schedules.get("tick").spec.enabled


def test_signing_out_revokes_the_session_on_the_server(make_client: object) -> None:
    client = make_client(WebSettings(token=TOKEN))  # type: ignore[operator]
    assert client.submit("/login", token=TOKEN).status_code == 303
    kept = client.cookies[SESSION_COOKIE]
    assert client.get("/", follow_redirects=False).status_code == 200
    assert client.submit("/logout").status_code == 303
    # A copy of the cookie (a stolen one, or another tab's) no longer signs anyone in.
    client.cookies.set(SESSION_COOKIE, kept)
    assert client.get("/", follow_redirects=False).status_code == 303


def test_the_session_cookie_expires_with_its_lifetime(make_client: object) -> None:
    client = make_client(  # type: ignore[operator]
        WebSettings(token=TOKEN, session_lifetime=timedelta(minutes=30)))
    response = client.submit("/login", token=TOKEN)
    assert "Max-Age=1800" in response.headers["set-cookie"]
    assert client.cookies[SESSION_COOKIE] != client.submit("/login", token=TOKEN).cookies.get(
        SESSION_COOKIE)  # each sign-in is a session of its own


def test_a_session_is_valid_for_its_lifetime_only() -> None:
    now = [1_000_000.0]
    signer = Signer(token=TOKEN, lifetime=timedelta(hours=1), clock=lambda: now[0])
    session = signer.new_session()
    assert signer.session_valid(session)
    now[0] += 3599
    assert signer.session_valid(session)
    now[0] += 1
    assert not signer.session_valid(session)
    # Signed for another token (a restart with a new one): worth nothing.
    assert not Signer(token=TOKEN + "x", lifetime=timedelta(hours=1),
                      clock=lambda: now[0]).session_valid(signer.new_session())
    for unreadable in (None, "", "x.y.z", "1.2", "9" * 40 + ".a.b", session + ".x"):
        assert not signer.session_valid(unreadable)


def test_over_https_cookies_are_host_prefixed_and_secure(make_client: object) -> None:
    client = make_client(WebSettings(token=TOKEN, secure_cookies=True),  # type: ignore[operator]
                         base_url="https://127.0.0.1")
    client.get("/login")
    assert "__Host-" + CSRF_COOKIE in client.cookies
    page = client.get("/login")
    token = form_token(page.text)
    response = client.post("/login", data={CSRF_FIELD: token, "token": TOKEN},
                           follow_redirects=False)
    cookie = response.headers["set-cookie"]
    assert cookie.startswith("__Host-" + SESSION_COOKIE + "=")
    assert "Secure" in cookie and "Path=/;" in cookie and "Domain" not in cookie
    assert client.get("/", follow_redirects=False).status_code == 200


def test_read_only_shows_no_create_form(make_client: object) -> None:
    client = make_client(WebSettings(read_only=True))  # type: ignore[operator]
    page = client.get("/new")
    assert page.status_code == 403
    assert 'id="new-form"' not in page.text and "read-only" in page.text


def state_changing_routes(app: Starlette) -> list[str]:
    """The pages' routes that change state; the JSON API's take no cookie and no CSRF token
    (bearer tokens only: tests/web/test_api.py)."""
    return sorted({route.path for route in app.routes
                   if isinstance(route, Route) and (route.methods or set()) - SAFE_METHODS
                   and not route.path.startswith(API_PREFIX)})


def test_every_state_changing_route_checks_the_csrf_token(schedules: Schedules) -> None:
    schedules.create("tick", "proj.tasks.tick", every=60)
    before = schedules.get("tick")
    for settings in (WebSettings(), WebSettings(token=TOKEN), WebSettings(read_only=True)):
        app = create_app(schedules, settings)
        paths = state_changing_routes(app)
        assert {"/login", "/logout", "/new", "/schedule/edit", "/schedule/pause"} <= set(paths)
        with Browser(app, base_url="http://127.0.0.1") as client:
            client.get("/login")  # the browser has its CSRF cookie, and signs in if need be
            client.headers["Authorization"] = f"Bearer {TOKEN}"
            for path in paths:
                fields = {"name": "tick", "task": "proj.tasks.other", "kind": "every",
                          "every": "5", "token": TOKEN}
                for sent in (fields, {**fields, CSRF_FIELD: "forged"}):
                    response = client.post(path, data=sent, follow_redirects=False)
                    assert response.status_code == 403, (settings, path)
                    assert "Form expired" in response.text
                    assert SESSION_COOKIE not in response.headers.get("set-cookie", "")
    assert schedules.list() == [before]
    assert schedules.history("tick") == []


def test_the_csrf_check_comes_before_reading_or_writing(client: Browser,
                                                        schedules: Schedules) -> None:
    # A forged delete of a schedule that does not exist is refused as forged, not as missing:
    # nothing is looked up for a request that fails the check.
    client.get("/")
    response = client.post("/schedule/delete", data={"name": "ghost"}, follow_redirects=False)
    assert response.status_code == 403


def test_in_read_only_mode_signing_in_still_works(make_client: object,
                                                  schedules: Schedules) -> None:
    client = make_client(WebSettings(token=TOKEN, read_only=True))  # type: ignore[operator]
    response = client.submit("/login", token=TOKEN)
    assert response.status_code == 303
    assert client.get("/", follow_redirects=False).status_code == 200
    assert client.submit("/new", name="x", task="proj.tasks.x", kind="every",
                         every="60").status_code == 403
    assert schedules.list() == []
