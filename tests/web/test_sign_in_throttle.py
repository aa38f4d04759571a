"""Failed sign-ins are counted per client address: after a few, the address waits, right
token or not, and is told how long."""

from __future__ import annotations

import logging

import pytest

from goatbeat_celery.api import Schedules
from goatbeat_celery.web import WebSettings, create_app
from goatbeat_celery.web.security import SESSION_COOKIE
from goatbeat_celery.web.throttle import ATTEMPTS, WINDOW, SignInThrottle, client_key
from tests.web.conftest import TOKEN, Browser


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_an_address_that_failed_too_often_waits_even_with_the_right_token(
        schedules: Schedules, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="goatbeat_celery.web.throttle")
    app = create_app(schedules, WebSettings(token=TOKEN))
    with Browser(app, base_url="http://127.0.0.1", client=("203.0.113.7", 50000)) as guesser, \
            Browser(app, base_url="http://127.0.0.1", client=("198.51.100.2", 50000)) as other:
        for _ in range(ATTEMPTS):
            assert guesser.submit("/login", token="wrong-" + TOKEN).status_code == 401
        for token in ("wrong-" + TOKEN, TOKEN):
            refused = guesser.submit("/login", token=token)
            assert refused.status_code == 429
            assert 0 < int(refused.headers["retry-after"]) <= WINDOW
            assert "Too many" in refused.text
            assert SESSION_COOKIE not in refused.headers.get("set-cookie", "")
        assert guesser.get("/", follow_redirects=False).status_code == 303  # not signed in
        throttled = [r for r in caplog.records
                     if getattr(r, "action", None) == "sign_in_throttled"]
        assert len(throttled) == 1 and "'203.0.113.7'" in throttled[0].getMessage()
        # Another address of the same server is not held up by it.
        assert other.submit("/login", token="wrong-" + TOKEN).status_code == 401
        assert other.submit("/login", token=TOKEN).status_code == 303


def test_the_wait_ends_with_the_window_and_a_success_clears_the_count() -> None:
    clock = Clock()
    throttle = SignInThrottle(clock=clock)
    for _ in range(ATTEMPTS):
        assert throttle.wait("a") is None
        throttle.failed("a")
        clock.now += 1
    assert throttle.wait("a") == WINDOW - ATTEMPTS
    clock.now += WINDOW - ATTEMPTS
    assert throttle.wait("a") is None  # the oldest failure left the window
    throttle.failed("a")
    assert throttle.wait("a") is not None
    throttle.succeeded("a")
    assert throttle.wait("a") is None


def test_an_ipv6_client_is_counted_by_its_64_and_memory_is_bounded() -> None:
    assert client_key("2001:db8:1:2:aaaa::1") == client_key("2001:db8:1:2:bbbb::9")
    assert client_key("2001:db8:1:3::1") != client_key("2001:db8:1:2::1")
    assert client_key("192.0.2.1") != client_key("192.0.2.2")
    throttle = SignInThrottle(clock=Clock(), addresses=100)
    for k in range(1000):
        throttle.failed(f"192.0.2.{k}")
    assert len(throttle._failures) == 100
