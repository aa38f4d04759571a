"""The refusal of an edit made over a definition changed since it was read names what changed."""

from __future__ import annotations

from goatbeat_celery.display import changed_since_read, field_changes


def test_the_fields_that_differ_are_named_with_what_was_read_and_what_is_now() -> None:
    read = {"cron": "*/5 * * * *", "queue": "a", "task": "proj.report"}
    now = {"task": "proj.report", "cron": "*/10 * * * *", "queue": "b"}

    assert field_changes(read, now) == ["cron '*/5 * * * *' \u2192 '*/10 * * * *'",
                                        "queue 'a' \u2192 'b'"]


def test_an_emptied_or_filled_field_reads_none_on_its_empty_side() -> None:
    assert field_changes({"queue": "", "every": "60"}, {"queue": "slow", "every": ""}) == [
        "queue none \u2192 'slow'", "every '60' \u2192 none"]


def test_a_field_the_reader_was_not_shown_is_not_compared() -> None:
    assert field_changes({"queue": "a"}, {"queue": "a", "priority": "9"}) == []


def test_the_message_names_the_schedule_and_what_changed() -> None:
    assert changed_since_read("tick", {"queue": "a"}, {"queue": "b"}) == (
        "schedule 'tick' changed since you read it: queue 'a' \u2192 'b'; read it again and "
        "redo your change")


def test_nothing_shown_changed_leaves_the_message_to_the_version() -> None:
    assert changed_since_read("tick", {"queue": "a"}, {"queue": "a"}) is None
    assert changed_since_read("tick", {}, {"queue": "a"}) is None


def test_a_value_with_control_characters_is_shown_escaped() -> None:
    [change] = field_changes({"queue": "a\nb"}, {"queue": "c"})

    assert "\n" not in change and "a\\nb" in change
