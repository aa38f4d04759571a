"""How the pages write keys, reasons, changes and lateness: instants kept whole, breaks
only between a key's parts, unchanged fields left out, never negatively late."""

from __future__ import annotations

from datetime import timedelta

from goatbeat_celery.display import audit_changes_text
from goatbeat_celery.testing import ManualClock
from goatbeat_celery.web.pages.overview import pending_lateness
from goatbeat_celery.web.present import breakable, whole_instants

KEY = "billing.invoice-run:2026-12-06T15:00:00.123456+00:00:manual"


def test_a_key_breaks_between_its_parts_never_inside_its_instant() -> None:
    assert str(breakable(KEY)) == (
        'billing.<wbr>invoice-<wbr>run:<wbr>'
        '<span class="nw">2026-12-06T15:00:00.123456+00:00</span>:<wbr>manual')


def test_free_text_keeps_each_instant_on_one_line_and_is_escaped() -> None:
    text = f"run {KEY} had not finished <b>"
    assert str(whole_instants(text)) == (
        'run billing.invoice-run:<wbr><span class="nw">2026-12-06T15:00:00.123456+00:00</span>'
        ':manual had not finished &lt;b&gt;')
    assert str(whole_instants("on 2026-12-25 only")) == (
        'on <span class="nw">2026-12-25</span> only')


def test_a_field_whose_before_and_after_are_equal_is_not_a_change() -> None:
    assert audit_changes_text({"per_tick": (None, None), "mode": ("all", "missing")}) == (
        "mode: all \u2192 missing")


def test_a_pending_run_not_yet_due_is_on_time() -> None:
    now = ManualClock.DEFAULT_START

    class Pending:
        due_at = now + timedelta(milliseconds=26)

    assert pending_lateness(Pending(), now) == "on time"  # type: ignore[arg-type]
    Pending.due_at = now - timedelta(seconds=1.5)
    assert pending_lateness(Pending(), now) == "1.5s late"  # type: ignore[arg-type]
