"""goatbeat_webhooks and its companions: read, validated all at once, secrets never shown."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from goatbeat_celery.beat.webhooks import WebhookFormat, shown_url
from goatbeat_celery.config import read_settings
from goatbeat_celery.core.types.problems import Problem

SECRET = "whsec-never-shown-42"
SLACK = "https://hooks.slack.example/services/T000/B000/XXXXsecretXXXX"


def read(**conf: Any) -> tuple[Any, list[str]]:
    problems: list[Problem] = []
    config = read_settings({f"goatbeat_{key}": value for key, value in conf.items()}, problems)
    return config.webhooks, [str(problem) for problem in problems]


def test_webhooks_are_off_unless_set() -> None:
    hooks, problems = read()
    assert (hooks, problems) == (None, [])


def test_urls_and_dicts_with_their_format_and_secret() -> None:
    hooks, problems = read(webhooks=["https://receiver.example/goatbeat",
                                     {"url": SLACK, "format": "slack", "secret": "own"}],
                           webhook_secret=SECRET, webhook_timeout="2s",
                           webhook_retry_backoff=0.5, webhook_retry_backoff_max=timedelta(
                               minutes=1))
    assert problems == []
    generic, slack = hooks.hooks
    assert (generic.url, generic.secret, generic.format) == (
        "https://receiver.example/goatbeat", SECRET, WebhookFormat.GENERIC)
    assert (slack.secret, slack.format) == ("own", WebhookFormat.SLACK)
    assert (hooks.timeout, hooks.retry_backoff, hooks.retry_backoff_max) == (
        timedelta(seconds=2), timedelta(seconds=0.5), timedelta(minutes=1))
    # Neither the secret nor the URL's secret path shows in a repr (logs, debuggers).
    assert SECRET not in repr(hooks) and "XXXXsecretXXXX" not in repr(hooks)
    assert repr(slack) == "Webhook('https://hooks.slack.example/…', format='slack')"


def test_a_single_url_may_be_given_as_a_string() -> None:
    hooks, problems = read(webhooks="http://127.0.0.1:8080/hook", webhook_secret=SECRET)
    assert problems == [] and [h.url for h in hooks.hooks] == ["http://127.0.0.1:8080/hook"]


def test_every_problem_is_reported_at_once_naming_its_setting_and_never_a_secret() -> None:
    hooks, problems = read(
        webhooks=["", "ftp://files.example/XXXXsecretXXXX", {"url": SLACK, "format": "teams",
                                                             "colour": "red"},
                  "https:///no-host", 42],
        webhook_secret=" ", webhook_timeout=0, webhook_retry_backoff="soon",
        webhook_retry_backoff_max=-1)
    assert hooks is None
    text = "\n".join(problems)
    assert "XXXXsecretXXXX" not in text
    fields = [problem.partition(":")[0] for problem in problems]
    assert fields == [
        "goatbeat_webhook_timeout", "goatbeat_webhook_retry_backoff",
        "goatbeat_webhook_retry_backoff_max", "goatbeat_webhook_secret",
        "goatbeat_webhooks[0]", "goatbeat_webhooks[0]",
        "goatbeat_webhooks[1]", "goatbeat_webhooks[1]",
        "goatbeat_webhooks[2].colour", "goatbeat_webhooks[2].format", "goatbeat_webhooks[2]",
        "goatbeat_webhooks[3]", "goatbeat_webhooks[3]",
        "goatbeat_webhooks[4]",
    ]
    assert "goatbeat_webhooks[0]: is empty; give the receiver's http:// or https:// URL" \
        in problems
    assert "goatbeat_webhooks[1]: must be an http:// or https:// URL, got a ftp one" in problems


def test_an_empty_list_is_refused_rather_than_delivering_nowhere() -> None:
    hooks, problems = read(webhooks=[], webhook_secret=SECRET)
    assert hooks is None
    assert problems == ["goatbeat_webhooks: is empty, which would deliver nowhere; list the "
                        "webhook URLs, or leave the setting out"]


def test_a_webhook_without_a_secret_is_refused() -> None:
    _, problems = read(webhooks=["https://receiver.example/x"])
    assert problems == ["goatbeat_webhooks[0]: has no secret to sign with; set "
                        "goatbeat_webhook_secret (or the webhook's own secret)"]


def test_a_misspelt_webhook_setting_is_named() -> None:
    _, problems = read(webhook_url="https://receiver.example/x")
    assert problems == ["goatbeat_webhook_url: unknown setting; did you mean goatbeat_webhooks?"]


def test_a_shown_url_keeps_only_scheme_host_and_port() -> None:
    assert shown_url(SLACK) == "https://hooks.slack.example/…"
    assert shown_url("http://user:pw@127.0.0.1:8080/x?token=y") == "http://127.0.0.1:8080/…"


# -- URLs checked whole ------------------------------------------------------------------------
BAD_URLS = {
    "http://receiver.example:99999/XXXXsecretXXXX": "has an invalid port; give a port from 1 "
    "to 65535 after the host, or none for the scheme's default",
    "http://receiver.example:http/XXXXsecretXXXX": "has an invalid port",
    "https://receiver.example:0/XXXXsecretXXXX": "has an invalid port",
    "http://[::1/XXXXsecretXXXX": "is not a valid URL (its host cannot be read); write an IPv6 "
    "host in brackets, as http://[::1]:8080/path",
    "http://:8080/XXXXsecretXXXX": "has no host",
    "https:XXXXsecretXXXX": "has no host",
    "mailto:ops@example.com?XXXXsecretXXXX": "must be an http:// or https:// URL, got a mailto "
    "one",
    "//receiver.example/XXXXsecretXXXX": "must be an http:// or https:// URL, got a relative one",
    "http://user:XXXXsecretXXXX@receiver.example/": "has credentials before the host, which are "
    "never sent",
    "http://receiver.example/a b/XXXXsecretXXXX": "contains spaces or control characters",
    "http://receiver.example/\x1b[2J/XXXXsecretXXXX": "contains spaces or control characters",
    "http://recéiver.example/XXXXsecretXXXX": "contains characters outside ASCII",
}


def test_every_bad_url_is_a_problem_naming_its_entry_and_never_quoting_the_url() -> None:
    urls = list(BAD_URLS)
    hooks, problems = read(webhooks=[*urls[:6], *({"url": url} for url in urls[6:])],
                           webhook_secret=SECRET)
    assert hooks is None
    assert not any("XXXXsecretXXXX" in problem for problem in problems)
    for index, (url, message) in enumerate(BAD_URLS.items()):
        where = f"goatbeat_webhooks[{index}]" + (".url" if index >= 6 else "")
        mine = [p for p in problems if p.startswith(f"{where}: ")]
        assert any(message in p for p in mine), (url, mine)


def test_sound_urls_of_every_shape_are_accepted() -> None:
    urls = ["http://127.0.0.1:8080/hook", "https://[::1]:8443/h?x=1&y=%20", "http://h.example",
            "https://xn--rceiver-dya.example/p#ignored", "http://h.example:/p"]
    hooks, problems = read(webhooks=urls, webhook_secret=SECRET)
    assert problems == []
    assert [h.shown for h in hooks.hooks] == [
        "http://127.0.0.1:8080/…", "https://[::1]:8443/…", "http://h.example/…",
        "https://xn--rceiver-dya.example/…", "http://h.example/…"]


def test_a_shown_url_never_raises_whatever_it_is_given() -> None:
    # A log line names a webhook by it: an invalid URL is shown as one, never a traceback.
    for url in ("http://h:99999/x", "http://[::1/x", "", "::", "http://h\x1b/x", "ftp://h/x"):
        assert shown_url(url) == "(an invalid URL)", url


def test_a_url_that_is_not_a_string_is_named_as_such() -> None:
    _, problems = read(webhooks=[{"url": 8080}, {"url": None}], webhook_secret=SECRET)
    assert problems == [
        "goatbeat_webhooks[0].url: expected a URL, got int; give the receiver's http:// or "
        "https:// URL as a string",
        "goatbeat_webhooks[1].url: is empty; give the receiver's http:// or https:// URL"]
