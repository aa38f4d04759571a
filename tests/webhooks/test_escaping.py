"""What reaches a person stays inert: Slack's markup in a task's error or a name is shown as
written, and what a receiver answered is logged escaped and cut, never as forged log lines."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from datetime import datetime, timezone

import pytest

from goatbeat_celery.beat.webhook_post import ANSWER_KEPT, answer_text
from goatbeat_celery.beat.webhooks import (
    Webhook,
    WebhookDelivery,
    WebhookFormat,
    WebhookSettings,
    body_of,
    slack_text,
)
from goatbeat_celery.core.types.outbox import OutboxEntry, OutboxEvent
from goatbeat_celery.store.memory import MemoryStore

from .receiver import Receiver

SECRET = "whsec-escaping-0123456789"
SLACK = Webhook(url="https://hooks.slack.example/services/T0/B0/XXXX", secret=SECRET,
                format=WebhookFormat.SLACK)


def entry(payload: dict[str, object]) -> OutboxEntry:
    now = datetime(2026, 1, 1, tzinfo=timezone.utc)
    return OutboxEntry(event_id="alert:1:open", kind="alert.opened", payload=payload,
                       created_at=now, attempts=0, next_attempt_at=now, delivered_at=None,
                       delivered_to=(), last_error=None, claimed_by=None, claimed_until=None)


@pytest.mark.parametrize(("summary", "text"), [
    ("<!channel> report failed", "&lt;!channel&gt; report failed"),
    ("ValueError: see <https://evil.example/login|your dashboard>",
     "ValueError: see &lt;https://evil.example/login|your dashboard&gt;"),
    ("a & b <@U012AB3CD> <#C024BE7LR> <!here> <!subteam^S1>",
     "a &amp; b &lt;@U012AB3CD&gt; &lt;#C024BE7LR&gt; &lt;!here&gt; &lt;!subteam^S1&gt;"),
    ("already &lt; escaped", "already &amp;lt; escaped"),
])
def test_slack_text_escapes_markup_from_the_summary(summary: str, text: str) -> None:
    assert slack_text(entry({"summary": summary})) == f"goatbeat alert.opened: {text}"


def test_slack_text_escapes_markup_in_a_payload_without_a_summary() -> None:
    line = slack_text(entry({"schedule": "<!channel>", "reason": "x > y & <url|z>"}))
    assert "<" not in line and ">" not in line
    assert "&lt;!channel&gt;" in line and "x &gt; y &amp; &lt;url|z&gt;" in line


def test_the_slack_body_carries_the_escaped_text_and_no_other_markup() -> None:
    body = json.loads(body_of(entry({"summary": "<!everyone> <b|c>"}), SLACK))
    assert body == {"text": "goatbeat alert.opened: &lt;!everyone&gt; &lt;b|c&gt;"}


def test_the_generic_envelope_keeps_the_data_as_given() -> None:
    # JSON receivers get the data unchanged: escaping is Slack's markup's need only.
    hook = Webhook(url="https://ops.example/hook", secret=SECRET)
    body = json.loads(body_of(entry({"summary": "<!channel> & co"}), hook))
    assert body["data"] == {"summary": "<!channel> & co"}


# -- what a receiver answered ------------------------------------------------------------------
FORGED = (b"nope\n2026-01-01 00:00:00 CRITICAL goatbeat: lease lost\r\n"
          b"\x1b[2J\x1b[31mred\x1b[0m\x07\xe2\x80\xae" + b"y" * 5000)


def test_an_answer_is_escaped_and_cut() -> None:
    text = answer_text(FORGED)
    assert text.startswith("nope\\n2026-01-01 00:00:00 CRITICAL goatbeat: lease lost\\r\\n"
                           "\\x1b[2J\\x1b[31mred\\x1b[0m\\x07\\u202e")
    assert text.isprintable()
    assert len(text) <= ANSWER_KEPT and text.endswith("…")


@pytest.fixture
def refusing() -> Iterator[Receiver]:
    receiver = Receiver(secret=SECRET, mode="unavailable", answer=FORGED).start()
    yield receiver
    receiver.stop()


def test_a_receivers_answer_is_logged_and_kept_escaped_never_as_a_line_of_its_own(
        refusing: Receiver, caplog: pytest.LogCaptureFixture) -> None:
    store = MemoryStore()
    hook = Webhook(url=refusing.url, secret=SECRET)
    delivery = WebhookDelivery(store, WebhookSettings(hooks=(hook,)), holder="host:1:a")
    store.enqueue_events([OutboxEvent(event_id="e-1", kind="alert.opened")])
    with caplog.at_level(logging.WARNING, logger="goatbeat_celery.beat.webhooks"):
        assert delivery.deliver_due() == 1
    delivery.close()

    (record,) = [r for r in caplog.records if getattr(r, "action", None) == "webhook_failed"]
    line = record.getMessage()
    (event,) = store.list_events()
    for kept in (line, event.last_error or ""):
        assert "HTTP 503: nope\\n2026-01-01 00:00:00 CRITICAL" in kept
        assert kept.isprintable()  # no newline, carriage return, ESC, bell or U+202E
        assert "y" * (ANSWER_KEPT + 1) not in kept
        assert "s3cr3t-path" not in kept
