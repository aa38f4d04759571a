"""PostgreSQL array literals: any number of values bound as one text parameter."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime


def array_literal(values: Sequence[str | int | bool | datetime | None]) -> str:
    """A PostgreSQL array literal (``{"a","b",NULL}``) of strings, integers, booleans or
    instants, bound as
    one text parameter and cast server-side: much cheaper than adapting a list element by
    element in the driver. All elements must be of one kind (or ``None``)."""
    if len(values) > 1 and all(v is values[0] for v in values):
        # The rows of one claim share most columns (its token, claim time, state): one item.
        return "{" + ",".join([array_literal(values[:1])[1:-1]] * len(values)) + "}"
    kind = next((type(v) for v in values if v is not None), str)
    if issubclass(kind, datetime):
        # ISO-8601 instants contain no character that needs quoting in an array literal.
        items = _instants(values)  # type: ignore[arg-type]
    elif kind is int:
        items = ["NULL" if v is None else str(int(v)) for v in values]  # type: ignore[arg-type]
    elif kind is bool:
        items = ["NULL" if v is None else "t" if v else "f" for v in values]
    elif kind is str:
        items = ["NULL" if v is None else _quote(v) for v in values]  # type: ignore[arg-type]
    else:
        raise TypeError(f"cannot put {kind.__name__} values in an array literal")
    return "{" + ",".join(items) + "}"


def _instants(values: Sequence[datetime | None]) -> list[str]:
    """Each instant as ISO-8601, a run of equal ones (in the same zone) written once: the
    schedules claimed together are mostly due at one instant."""
    items: list[str] = []
    last: datetime | None = None
    text = "NULL"
    for value in values:
        if value is not last and (value is None or last is None
                                  or value.tzinfo is not last.tzinfo or value != last):
            text = "NULL" if value is None else value.isoformat()
        last = value
        items.append(text)
    return items


def _quote(text: str) -> str:
    if "\\" in text or '"' in text:
        text = text.replace("\\", "\\\\").replace('"', '\\"')
    return '"' + text + '"'
