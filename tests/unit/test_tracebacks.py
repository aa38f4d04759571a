"""A run's traceback as tracking records it: whole when short, cut in the middle with a marker
when long, hidden characters escaped as in the error line, line breaks kept."""

from __future__ import annotations

from goatbeat_celery.core.rules.tracebacks import MAX_TRACEBACK_LENGTH, traceback_text


def raised(exc: BaseException) -> BaseException:
    try:
        raise exc
    except BaseException as caught:
        return caught


def test_a_raised_exception_gives_its_whole_traceback() -> None:
    text = traceback_text(raised(ValueError("bad input")))
    assert text is not None
    assert text.startswith("Traceback (most recent call last):\n")
    assert text.endswith("ValueError: bad input") and "in raised" in text


def test_nothing_raised_nothing_recorded() -> None:
    assert traceback_text(None) is None
    assert traceback_text(ValueError("never raised")) is None


def test_hidden_characters_are_escaped_and_line_breaks_kept() -> None:
    text = traceback_text(raised(ValueError("evil\u202eeman\x1b[31m")))
    assert text is not None
    assert "evil\\u202eeman\\u001b[31m" in text and "\u202e" not in text
    assert "\n" in text


def test_a_long_traceback_keeps_its_head_and_tail_around_a_marker() -> None:
    text = traceback_text(raised(ValueError("x" * 40_000 + " the end")))
    assert text is not None
    assert len(text) < MAX_TRACEBACK_LENGTH + 100
    assert text.startswith("Traceback") and text.endswith(" the end")
    assert "characters cut ...]" in text
