"""One version, written once (``goatbeat_celery.__version__``), and every place that shows it.

pyproject.toml reads it (setuptools' ``attr:``), the CHANGELOG's latest heading names it,
``celery goatbeat --version`` and the dashboard's footer print it. The built wheel's metadata
carries it too: ``tests/packaging/test_distributions.py``.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from celery import Celery
from celery.bin.celery import celery
from click.testing import CliRunner
from packaging.version import Version
from starlette.testclient import TestClient

import goatbeat_celery
from goatbeat_celery.api import Schedules
from goatbeat_celery.store import upgrade_schema
from goatbeat_celery.web import create_app
from tests.packaging.dist import DISTRIBUTION, ROOT

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the TOML reader pip carries
    from pip._vendor import tomli as tomllib

VERSION = goatbeat_celery.__version__


def test_the_version_is_a_release_version() -> None:
    assert str(Version(VERSION)) == VERSION


def test_pyproject_reads_the_version_from_the_package() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))

    assert project["project"]["name"] == DISTRIBUTION
    assert "version" not in project["project"]
    assert project["project"]["dynamic"] == ["version"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {
        "attr": "goatbeat_celery.__version__"}


def test_the_changelogs_latest_heading_is_this_version() -> None:
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    headings = re.findall(r"^## (\S+)", text, flags=re.MULTILINE)

    assert headings, "CHANGELOG.md has no release heading"
    assert headings[0] == VERSION, (
        f"CHANGELOG.md's latest heading is {headings[0]}, the package says {VERSION}")


def test_celery_goatbeat_version_prints_the_version() -> None:
    result = CliRunner().invoke(celery, ["goatbeat", "--version"])

    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == f"goatbeat_celery {VERSION}"


def test_the_dashboard_footer_shows_the_version(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'goatbeat.sqlite3'}"
    upgrade_schema(url)
    app = Celery("versionproj", broker="memory://", set_as_current=False)
    app.conf.goatbeat_database_url = url
    with Schedules.from_app(app) as schedules, \
            TestClient(create_app(schedules), base_url="http://127.0.0.1") as client:
        page = client.get("/")

    assert page.status_code == 200
    assert re.search(rf'<footer class="bottom">goatbeat_celery {re.escape(VERSION)}</footer>',
                     page.text)
