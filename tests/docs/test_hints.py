"""The documentation pages the package's hints name exist, with their anchors.

A hint names a page through ``goatbeat_celery.core.links.doc`` (the site's address), never as a
path of this repository, which neither the wheel nor a reader of a log has.
"""

from __future__ import annotations

import ast
import importlib.util
import re
from pathlib import Path

import pytest

from goatbeat_celery.core.links import DOCS_URL, doc

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "goatbeat_celery"
DOCS = ROOT / "docs"
_spec = importlib.util.spec_from_file_location("mkdocs_hooks", ROOT / "mkdocs_hooks.py")
assert _spec is not None and _spec.loader is not None
hooks = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(hooks)

#: ``doc("page.md#anchor")`` in Python code and templates alike.
DOC_CALL = re.compile(r"""\bdoc\(\s*["']([^"']+)["']\s*\)""")


def sources() -> list[Path]:
    return sorted(path for path in PACKAGE.rglob("*")
                  if path.suffix in {".py", ".html"} and "__pycache__" not in path.parts)


def named_pages() -> list[tuple[str, str]]:
    return [(path.relative_to(ROOT).as_posix(), page) for path in sources()
            for page in DOC_CALL.findall(path.read_text(encoding="utf-8"))]


def anchors_of(page: Path) -> set[str]:
    """The anchors the site gives ``page``'s headings (outside code blocks)."""
    found: set[str] = set()
    fenced = False
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (heading := re.match(r"#{1,6}\s+(.*?)\s*#*$", line)):
            found.add(hooks.github_slug(heading.group(1).replace("`", ""), "-"))
    return found


def test_the_package_names_pages_through_doc() -> None:
    assert len(named_pages()) >= 10


@pytest.mark.parametrize(("source", "page"), named_pages())
def test_each_page_a_hint_names_exists_with_its_anchor(source: str, page: str) -> None:
    name, _, anchor = page.partition("#")
    assert (DOCS / name).is_file(), f"{source} names {page}: no docs/{name}"
    if anchor:
        assert anchor in anchors_of(DOCS / name), f"{source} names {page}: no such heading"


def test_no_string_the_package_prints_names_a_path_of_this_repository() -> None:
    found = []
    for path in sources():
        if path.suffix == ".html":
            text = re.sub(r"\{\{.*?\}\}", "", path.read_text(encoding="utf-8"))
            found += [f"{path.name}: {hit}" for hit in re.findall(r"docs/[\w-]+\.md", text)]
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                      if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef
                                    | ast.AsyncFunctionDef)
                      and node.body and isinstance(node.body[0], ast.Expr)}
        found += [f"{path.relative_to(ROOT)}:{node.lineno}: {node.value!r}"
                  for node in ast.walk(tree)
                  if isinstance(node, ast.Constant) and isinstance(node.value, str)
                  and id(node) not in docstrings and re.search(r"docs/[\w-]+\.md", node.value)]
    assert found == []


def test_doc_gives_the_site_address_of_a_page_and_its_anchor() -> None:
    assert doc("index.md") == DOCS_URL
    assert doc("cli.md#health") == DOCS_URL + "cli/#health"
    assert hooks.github_slug("sync --plan", "-") == "sync---plan"
