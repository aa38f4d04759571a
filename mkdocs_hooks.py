"""Build hooks of the documentation site (mkdocs.yml).

The pages are written to be read on a code host as much as on the site, so the site follows
the code host's conventions: headings get GitHub's anchors (``## sync --plan`` is
``#sync---plan``), and the changelog at the top of the repository is the site's
``changelog.md``, its ``docs/`` links made relative to the site.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).parent


def github_slug(value: str, separator: str) -> str:
    """A heading's anchor as GitHub makes it: lower case, punctuation other than ``-`` and
    ``_`` dropped, each space a hyphen (so runs of hyphens stay)."""
    return re.sub(r"[^\w\- ]", "", value.strip().lower()).replace(" ", separator)


def on_config(config: Any) -> Any:
    config.mdx_configs.setdefault("toc", {})["slugify"] = github_slug
    if "toc" not in config.markdown_extensions:
        config.markdown_extensions.append("toc")
    return config


def on_files(files: Files, config: Any) -> Files:
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    files.append(File.generated(config, "changelog.md", content=text.replace("](docs/", "](")))
    # The example projects the pages link (``../examples/replicas/proj.py``) ship with the site.
    for path in sorted((ROOT / "examples").rglob("*.py")):
        if "__pycache__" not in path.parts:
            files.append(File.generated(config, path.relative_to(ROOT).as_posix(),
                                        content=path.read_text(encoding="utf-8")))
    return files


def on_page_markdown(markdown: str, **kwargs: Any) -> str:
    return markdown.replace("](../CHANGELOG.md)", "](changelog.md)").replace(
        "](../examples/", "](examples/")
