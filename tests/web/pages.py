"""Reading the dashboard's HTML pages."""

from __future__ import annotations

import html as html_module
import re


def error_of(html: str, field: str) -> str:
    found = re.search(rf'<p class="field-error" id="{field}-error">([^<]*)</p>', html)
    assert found, f"no error under {field}"
    return html_module.unescape(found.group(1))


def pills_in(html: str) -> list[str]:
    return re.findall(r'<span class="pill \w+">([^<]*)</span>', html)
