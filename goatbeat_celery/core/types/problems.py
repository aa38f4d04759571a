"""A problem with given input, as data: the field it names, what is wrong, and the fix.

Every check of :mod:`~goatbeat_celery.core.types.validation` words a problem ``"<field>: <what is
wrong>"`` (the fix after a ``"; "`` when it is not already said), and a schedule's problems are
prefixed with ``"schedule '<name>': "``. :class:`Problem` holds those parts apart, so that a
form shows a problem under the field it names without reading the text back, while ``str()``
gives the text exactly as it is written in messages and logs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# The subject a problem may start with: a schedule or a calendar, by its quoted name (a long
# name is cut: its quote is not closed, it ends in "...").
_SUBJECT = re.compile(r"^((?:schedule|calendar) (?:'(?:[^'\\]|\\.)*(?:'|\.\.\.)"
                      r"|\"(?:[^\"\\]|\\.)*(?:\"|\.\.\.)|\S+)(?:\.\.\.)?): ")
# A field as checks name it: a dotted path with optional [index] parts (``options.queue``,
# ``beat_schedule['x'].options``), or the two words of ``cron expression``.
_FIELD = re.compile(r"cron expression|[A-Za-z_][\w.]*(?:\[[^\]]*\][\w.]*)*")


@dataclass(frozen=True)
class Problem:
    """One problem: ``field`` (``""`` when it names none), ``message`` and the ``hint`` that
    fixes it (``""`` when the message says it), about ``subject`` (``"schedule 'x'"``, or
    ``""``)."""

    field: str
    message: str
    hint: str = ""
    subject: str = ""

    @classmethod
    def read(cls, text: str) -> Problem:
        """The problem a check wrote as ``text``; ``str()`` of it gives ``text`` back."""
        subject = ""
        found = _SUBJECT.match(text)
        if found is not None:
            subject, text = found.group(1), text[found.end():]
        head, sep, rest = text.partition(": ")
        field = head if sep and _FIELD.fullmatch(head) else ""
        said = rest if field else text
        message, _, hint = said.partition("; ")
        return cls(field=field, message=message if hint else said, hint=hint, subject=subject)

    @property
    def text(self) -> str:
        """The problem without its subject, as a form shows it beside the field."""
        said = f"{self.message}; {self.hint}" if self.hint else self.message
        return f"{self.field}: {said}" if self.field else said

    @property
    def root(self) -> str:
        """The top-level field (``options`` of ``options.queue``, ``tags`` of ``tags[0]``)."""
        return re.split(r"[.\[]", self.field, maxsplit=1)[0]

    @property
    def detail(self) -> str:
        """The part of the field below :attr:`root` (``queue`` of ``options.queue``)."""
        rest = self.field[len(self.root):].lstrip(".")
        return re.split(r"[.\[]", rest, maxsplit=1)[0]

    def about(self, subject: str) -> Problem:
        """This problem about ``subject``."""
        return Problem(self.field, self.message, self.hint, subject)

    def __str__(self) -> str:
        return f"{self.subject}: {self.text}" if self.subject else self.text



def listed(problem: Problem | None) -> list[Problem]:
    """``problem`` as a list: empty when there is none."""
    return [] if problem is None else [problem]
