"""A problem with given input, as data: the field it names, what is wrong, and the fix.

A check makes a :class:`Problem` where it finds it, and the problem stays data until a face
shows it: a form shows it under the field it names, the HTTP API answers its parts, the CLI
names the option that gave the field. ``str()`` gives the text written in messages and logs,
``"<field>: <what is wrong>; <fix>"``, after ``"<subject>: "`` when it has one.

A message or hint that names other fields holds each as ``{name}``, the name listed in
``mentions``: each face fills in its own label for it (``str()`` the field's name), so that no
face reads a sentence to find the names in it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace


@dataclass(frozen=True)
class Problem:
    """One problem: ``field`` (``""`` when it names none), ``message`` and the ``hint`` that
    fixes it (``""`` when the message says it), about ``subject`` (``"schedule 'x'"``, or
    ``""``); ``mentions``: the other fields the message and hint name as ``{name}``."""

    field: str
    message: str
    hint: str = ""
    subject: str = ""
    mentions: tuple[str, ...] = ()

    def message_as(self, labels: Mapping[str, str] | None = None) -> str:
        """The message, each field it mentions named by ``labels`` (by default, or when
        ``labels`` has none for it, by its name)."""
        return self._filled(self.message, labels)

    def hint_as(self, labels: Mapping[str, str] | None = None) -> str:
        """The hint, each field it mentions named as in :meth:`message_as`."""
        return self._filled(self.hint, labels)

    def said(self, labels: Mapping[str, str] | None = None) -> str:
        """The message and its hint, as one sentence follows the field."""
        message, hint = self.message_as(labels), self.hint_as(labels)
        return f"{message}; {hint}" if hint else message

    def _filled(self, text: str, labels: Mapping[str, str] | None) -> str:
        for name in self.mentions:
            text = text.replace("{" + name + "}", (labels or {}).get(name, name))
        return text

    @property
    def text(self) -> str:
        """The problem without its subject, as a form shows it beside the field."""
        return f"{self.field}: {self.said()}" if self.field else self.said()

    @property
    def root(self) -> str:
        """The top-level field (``options`` of ``options.queue``, ``tags`` of ``tags[0]``)."""
        return _head(self.field)

    @property
    def detail(self) -> str:
        """The part of the field below :attr:`root` (``queue`` of ``options.queue``)."""
        return _head(self.field[len(self.root):].lstrip("."))

    def about(self, subject: str) -> Problem:
        """This problem about ``subject``."""
        return replace(self, subject=subject)

    def __str__(self) -> str:
        return f"{self.subject}: {self.text}" if self.subject else self.text


def _head(path: str) -> str:
    """The first name of a dotted path with ``[index]`` parts (``options`` of
    ``options.queue``, ``tags`` of ``tags[0]``)."""
    for index, char in enumerate(path):
        if char in ".[":
            return path[:index]
    return path


def listed(problem: Problem | None) -> list[Problem]:
    """``problem`` as a list: empty when there is none."""
    return [] if problem is None else [problem]
