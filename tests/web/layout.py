"""A check run in the browser on a rendered page: which table cells' text (and the values of a
card's pairs) overflows the cell, and which wraps inside a word (``submi/tted``,
``Europe/P/aris``, an instant cut in two), and which table is wider than the page (it would
scroll sideways).

Evaluated with ``page.evaluate(LAYOUT_CHECK)``; it returns one line per problem (empty: none),
naming the table, the column's header and the cell's text. A word is a run of characters
without white space in one text node: each is measured with a Range, and one whose boxes lie on
more than one line was broken inside. Hidden cells (a column left out at this width) are not
looked at.
"""

from __future__ import annotations

import os
from pathlib import Path

from playwright.sync_api import Page

LAYOUT_CHECK = r"""
() => {
  const problems = [];
  for (const box of document.querySelectorAll('.scroll')) {
    if (box.offsetParent !== null && box.scrollWidth > box.clientWidth + 1) {
      const table = box.querySelector('table');
      const id = table ? table.id : '?';
      problems.push(`#${id}: wider than the page (${box.scrollWidth} > ${box.clientWidth} px)`);
    }
  }
  const cells = 'table.rows th, table.rows td, dl.pairs dd';
  for (const cell of document.querySelectorAll(cells)) {
    if (cell.offsetParent === null || cell.getClientRects().length === 0) continue;
    let where;
    if (cell.tagName === 'DD') {
      // A card's pair: named by its list and the term before it.
      const term = cell.previousElementSibling;
      where = `#${cell.closest('dl').id || '?'} ${term ? term.textContent.trim() : '?'}`;
    } else {
      const table = cell.closest('table');
      const header = table.querySelectorAll('thead th')[cell.cellIndex];
      where = `#${table.id || '?'} ${header ? header.textContent.trim() : cell.cellIndex}`;
    }
    const text = cell.textContent.trim().replace(/\s+/g, ' ').slice(0, 80);
    if (cell.scrollWidth > cell.clientWidth + 1) {
      const sizes = `${cell.scrollWidth} > ${cell.clientWidth} px`;
      problems.push(`${where}: overflows its cell (${sizes}): ${text}`);
    }
    const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      for (const match of node.data.matchAll(/\S+/g)) {
        const range = document.createRange();
        range.setStart(node, match.index);
        range.setEnd(node, match.index + match[0].length);
        const tops = new Set([...range.getClientRects()]
          .filter(r => r.width > 0).map(r => Math.round(r.top)));
        if (tops.size > 1) {
          problems.push(`${where}: wraps inside the word ${JSON.stringify(match[0])}`);
        }
      }
    }
  }
  return problems;
}
"""

ROOT = Path(__file__).resolve().parents[2]
#: Where the browser tests leave their screenshots, every run (git-ignored; CI keeps it as an
#: artefact): ``test-artifacts/web/<page>-<width>.png``.
ARTIFACTS = Path(os.environ.get("GOATBEAT_TEST_ARTIFACTS", ROOT / "test-artifacts")) / "web"
#: docs/images is written only when asked, once, deliberately: GOATBEAT_WEB_DOCS_IMAGES=1.
DOCS_IMAGES = ROOT / "docs" / "images"
WIDTHS = (1280, 800)


def photograph(page: Page, name: str, *, docs: bool = False) -> Path:
    """A full-page screenshot of ``page`` into :data:`ARTIFACTS` as ``<name>-<width>.png``;
    with ``docs`` and GOATBEAT_WEB_DOCS_IMAGES=1, at 1280 px into docs/images as well."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    viewport = page.viewport_size
    width = viewport["width"] if viewport else 0
    path = ARTIFACTS / f"{name}-{width}.png"
    page.screenshot(path=str(path), full_page=True)
    if docs and width == WIDTHS[0] and os.environ.get("GOATBEAT_WEB_DOCS_IMAGES") == "1":
        page.screenshot(path=str(DOCS_IMAGES / f"web-{name}.png"), full_page=True)
    return path


def layout_problems(page: Page) -> list[str]:
    """What :data:`LAYOUT_CHECK` finds on the page as rendered now."""
    return list(page.evaluate(LAYOUT_CHECK))
