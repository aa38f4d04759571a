"""Where the hints goatbeat prints point: pages of the documentation site.

The site is ``docs/`` built by ``mkdocs.yml`` and published at :data:`DOCS_URL` (the wheel's
``Documentation`` Project-URL; docs/releasing.md). A hint names a page as the sources link it,
``doc("deploying.md#shards")``, so one test can check that every page and anchor named here
exists (``tests/docs/test_hints.py``).
"""

from __future__ import annotations

#: The documentation site of this release line.
DOCS_URL = "https://celery-goatbeat.readthedocs.io/en/latest/"


def doc(page: str) -> str:
    """The site's address of ``page``: a file of ``docs/`` with an optional anchor, as the
    pages link each other (``"configuration.md"``, ``"cli.md#health"``)."""
    name, _, anchor = page.partition("#")
    path = "" if name == "index.md" else name.removesuffix(".md") + "/"
    return DOCS_URL + path + (f"#{anchor}" if anchor else "")
