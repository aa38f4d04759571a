"""The Django admin's pages for schedules and runs, and reading them."""

from __future__ import annotations

from typing import Any

CHANGELIST = "/admin/goatbeat/schedule/"


ADD = "/admin/goatbeat/schedule/add/"


EXECUTIONS = "/admin/goatbeat/execution/"


def change_url(name: str) -> str:
    from django.contrib.admin.utils import quote

    return f"/admin/goatbeat/schedule/{quote(name)}/change/"


def form_data(**values: Any) -> dict[str, Any]:
    data = {"name": "poll", "task": "feeds.poll", "kind": "every", "every": "30",
            "args": "[]", "kwargs": "{}", "headers": "", "enabled": "on"}
    data.update(values)
    return {key: value for key, value in data.items() if value is not None}


def cells(text: str, name: str) -> dict[str, str]:
    """The changelist row of ``name``: each column's cell, by its field name, as shown."""
    import html
    import re

    [row] = [row for row in text.split("<tr")[1:] if f">{name}</a></th>" in row]
    found = re.findall(r'<t[dh] class="field-(\w+)[^"]*"[^>]*>(.*?)</t[dh]>', row, re.S)
    return {field: html.unescape(re.sub(r"<[^>]+>", "", value)).strip()
            for field, value in found}


def history_of(text: str) -> list[list[str]]:
    """The cells of each run the change page lists under History, newest first."""
    import html
    import re

    table = text.split('class="goatbeat-history"', 1)[1].split("</table>", 1)[0]
    body = table.split("<tbody>", 1)[1]
    return [[html.unescape(cell).strip() for cell in re.findall(r"<td>(.*?)</td>", row, re.S)]
            for row in body.split("<tr>")[1:]]
