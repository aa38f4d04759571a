"""The sdist and wheel a release uploads: what they hold, their metadata, and each extra
installed alone from the wheel in a fresh virtual environment running the quickstart.

The quickstart is ``examples/quickstart/proj.py`` (what ``scripts/demo`` runs), with what the
extra is for switched on: a Redis broker, a PostgreSQL store, Prometheus metrics; the dashboard
is served and the Django app checked and migrated. Nothing of this checkout is importable in
those environments.
"""

from __future__ import annotations

import contextlib
import email
import os
import socket
import subprocess
import sys
import tarfile
import time
import urllib.request
import uuid
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.engine import URL

import goatbeat_celery
from tests.conftest import empty_database, stop_process_groups
from tests.packaging.dist import (
    DISTRIBUTION,
    EXTRAS,
    ROOT,
    Built,
    built,
    clean_env,
    fresh_environment,
    run,
)
from tests.support.waiting import wait_for

PACKAGE = ROOT / "goatbeat_celery"
QUICKSTART = ROOT / "examples" / "quickstart" / "proj.py"
#: How long the quickstart's worker has to print a run sent by beat (beat's start, the lease,
#: a 2 s schedule and a solo worker's start take under 15 s on a busy 2-core machine).
RUN_TIMEOUT = 90
STOP_TIMEOUT = 20


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Built:
    return built(tmp_path_factory)


def package_files() -> set[str]:
    """The package's files in this checkout, as a wheel names them."""
    return {path.relative_to(ROOT).as_posix() for path in PACKAGE.rglob("*")
            if path.is_file() and "__pycache__" not in path.parts}


def test_twine_finds_nothing_wrong_with_the_sdist_and_the_wheel(dist: Built) -> None:
    printed = run([sys.executable, "-m", "twine", "check", "--strict", str(dist.sdist),
                   str(dist.wheel)], "twine check")

    assert printed.count("PASSED") == 2, printed


def test_the_wheel_holds_every_file_of_the_package_and_nothing_else(dist: Built) -> None:
    with zipfile.ZipFile(dist.wheel) as wheel:
        names = set(wheel.namelist())
    info = f"celery_goatbeat-{goatbeat_celery.__version__}.dist-info/"

    assert package_files() <= names, sorted(package_files() - names)
    assert {name for name in names if not name.startswith(info)} == package_files()
    for needed in ("goatbeat_celery/py.typed", "goatbeat_celery/migrations/env.py",
                   "goatbeat_celery/migrations/versions/0001_initial.py",
                   "goatbeat_celery/contrib/django/migrations/0001_initial.py",
                   "goatbeat_celery/web/templates/base.html",
                   "goatbeat_celery/web/static/style.css"):
        assert needed in names
    assert not [name for name in names if name.startswith("tests/") or "/tests/" in name]


def test_the_sdist_holds_the_package_and_no_tests(dist: Built) -> None:
    with tarfile.open(dist.sdist) as sdist:
        names = {name.split("/", 1)[1] for name in sdist.getnames() if "/" in name}

    assert {"pyproject.toml", "README.md", "PKG-INFO"} <= names
    assert package_files() <= names, sorted(package_files() - names)
    assert not [name for name in names if name.startswith("tests/")]
    # The documentation, and what builds it as a site.
    docs = {path.relative_to(ROOT).as_posix() for path in (ROOT / "docs").rglob("*")
            if path.is_file()}
    assert docs <= names, sorted(docs - names)
    assert {"CHANGELOG.md", "mkdocs.yml", "mkdocs_hooks.py"} <= names


def test_the_metadata_names_the_distribution_its_version_and_its_extras(dist: Built) -> None:
    with zipfile.ZipFile(dist.wheel) as wheel:
        info = f"celery_goatbeat-{goatbeat_celery.__version__}.dist-info/"
        metadata = email.message_from_bytes(wheel.read(info + "METADATA"))
        entry_points = wheel.read(info + "entry_points.txt").decode()

    assert metadata["Name"] == DISTRIBUTION
    assert metadata["Version"] == goatbeat_celery.__version__
    assert metadata["Requires-Python"] == ">=3.10"
    assert set(EXTRAS) <= set(metadata.get_all("Provides-Extra") or [])
    # The suite's and the benchmarks' tools are dependency groups, offered to no user.
    assert not {"dev", "bench"} & set(metadata.get_all("Provides-Extra") or [])
    urls = dict(url.split(", ", 1) for url in metadata.get_all("Project-URL") or [])
    assert urls["Documentation"].startswith("https://")
    requires = metadata.get_all("Requires-Dist") or []
    # The redis extra is Celery's own: the client and what kombu's transport imports.
    assert 'celery[redis]>=5.5; extra == "redis"' in requires
    assert "goatbeat = goatbeat_celery.cli:goatbeat" in entry_points


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class Project:
    """The quickstart's directory, run by one fresh environment's executables."""

    def __init__(self, directory: Path, bin: Path) -> None:
        self.directory = directory
        self.bin = bin
        self.env = clean_env(QUICKSTART_DIR=str(directory / "var"))
        self.env.pop("COLUMNS", None)
        self.processes: list[tuple[str, subprocess.Popen[bytes], Path]] = []

    def celery(self, *args: str) -> str:
        return run([str(self.bin / "celery"), *args], f"celery {' '.join(args)}",
                   cwd=self.directory, env=self.env)

    def python(self, code: str) -> str:
        return run([str(self.bin / "python"), "-c", code], "a Python check",
                   cwd=self.directory, env=self.env)

    def start(self, name: str, *args: str) -> None:
        log = self.directory / f"{name}.log"
        with log.open("wb") as sink:
            process = subprocess.Popen([str(self.bin / "celery"), *args], cwd=self.directory,
                                       env=self.env, stdout=sink, stderr=subprocess.STDOUT,
                                       start_new_session=True)
        self.processes.append((name, process, log))

    def wait_for(self, name: str, text: str, timeout: float = RUN_TIMEOUT) -> None:
        (process, log), = [(p, log) for n, p, log in self.processes if n == name]
        try:
            wait_for(lambda: text in log.read_text(errors="replace") or process.poll() is not None,
                     f"{name} to print {text!r}", timeout=timeout, interval=0.25)
        except AssertionError:
            pass  # failed below, with every process's log
        if text not in log.read_text(errors="replace"):
            pytest.fail(f"{name} did not print {text!r} within {timeout}s:\n"
                        + "\n".join(f"--- {n}\n{log.read_text(errors='replace')}"
                                    for n, _, log in self.processes), pytrace=False)

    def stop(self) -> None:
        stop_process_groups([process for _, process, _ in self.processes], STOP_TIMEOUT)


def fetch(url: str, timeout: float = 30) -> str:
    """The body at ``url``, asked again until the server answers (it is starting)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                body: str = response.read().decode()
                return body
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.25)


@contextlib.contextmanager
def store_for(extra: str, request: pytest.FixtureRequest) -> Iterator[str | None]:
    """A new PostgreSQL database for the extras that bring psycopg; SQLite for the others."""
    if extra not in ("postgres", "all"):
        yield None
        return
    server: URL = request.getfixturevalue("pg_server_url")
    with empty_database(server, f"goatbeat_wheel_{uuid.uuid4().hex[:10]}") as url:
        yield url


DJANGO_CHECK = """
import django
from django.conf import settings
from django.core.management import call_command

urlpatterns = []
settings.configure(
    INSTALLED_APPS=["django.contrib.contenttypes", "django.contrib.auth",
                    "django.contrib.admin", "django.contrib.sessions",
                    "django.contrib.messages", "goatbeat_celery.contrib.django"],
    DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": "django.sqlite3"}},
    USE_TZ=True, SECRET_KEY="quickstart", ROOT_URLCONF="__main__",
    TEMPLATES=[{"BACKEND": "django.template.backends.django.DjangoTemplates",
                "APP_DIRS": True, "OPTIONS": {"context_processors": [
                    "django.contrib.auth.context_processors.auth",
                    "django.contrib.messages.context_processors.messages",
                    "django.template.context_processors.request"]}}],
    MIDDLEWARE=["django.contrib.sessions.middleware.SessionMiddleware",
                "django.contrib.auth.middleware.AuthenticationMiddleware",
                "django.contrib.messages.middleware.MessageMiddleware"],
)
django.setup()
call_command("check")
call_command("migrate", verbosity=0)
# goatbeat's admin pages are registered.
from django.contrib import admin
registered = [model._meta.label for model in admin.site._registry]
assert any(label.startswith("goatbeat.") for label in registered), registered
print("django ok")
"""


@pytest.mark.slow
@pytest.mark.parametrize("extra", EXTRAS)
def test_the_wheel_with_an_extra_runs_the_quickstart_in_a_fresh_environment(
        extra: str, dist: Built, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    started = time.monotonic()
    bin = fresh_environment(tmp_path, f"{dist.wheel}[{extra}]", dist.wheelhouse)
    installed = time.monotonic() - started
    project = Project(tmp_path / "proj", bin)
    project.directory.mkdir()
    app = QUICKSTART.read_text(encoding="utf-8")
    with store_for(extra, request) as database_url:
        if extra in ("redis", "all"):
            redis = os.environ.get("GOATBEAT_TEST_REDIS_URL", "redis://127.0.0.1:6379")
            # A queue of its own on the shared server.
            app += (f"\napp.conf.broker_url = {redis + '/0'!r}\n"
                    f"app.conf.task_default_queue = 'wheel-{uuid.uuid4().hex[:10]}'\n")
        if database_url is not None:
            app += f"\napp.conf.goatbeat_database_url = {database_url!r}\n"
        metrics_port = free_port()
        if extra in ("metrics", "all"):
            app += f"\napp.conf.goatbeat_metrics_port = {metrics_port}\n"
        (project.directory / "proj.py").write_text(app, encoding="utf-8")

        project.celery("-A", "proj", "goatbeat", "migrate")
        assert "all checks passed" in project.celery("-A", "proj", "goatbeat", "check")
        try:
            # Started first: the commands below run while they start and beat takes the lease.
            project.start("worker", "-A", "proj", "worker", "--pool", "solo", "--loglevel",
                          "WARNING", "--without-heartbeat", "--without-gossip",
                          "--without-mingle")
            project.start("beat", "-A", "proj", "beat", "-S", "goatbeat_celery.Scheduler",
                          "--loglevel", "INFO")
            port = free_port()
            if extra in ("web", "all"):
                project.start("web", "-A", "proj", "goatbeat", "web", "--bind",
                              f"127.0.0.1:{port}")
            where = project.python("import goatbeat_celery; print(goatbeat_celery.__file__)")
            assert Path(where.strip()).is_relative_to(tmp_path / "venv"), where
            version = project.celery("goatbeat", "--version").strip()
            assert version == f"goatbeat_celery {goatbeat_celery.__version__}"
            if extra in ("django", "all"):
                assert "django ok" in project.python(DJANGO_CHECK)
            # A database schedule, as getting started adds one.
            project.celery("-A", "proj", "goatbeat", "add", "tick", "proj.report", "--every",
                           "5s", "--args", '["tick"]')
            if extra in ("web", "all"):
                page = fetch(f"http://127.0.0.1:{port}/")
                assert f"goatbeat_celery {goatbeat_celery.__version__}</footer>" in page
            project.wait_for("worker", "ran 'heartbeat' occurrence=")
            if extra in ("metrics", "all"):
                assert "goatbeat" in fetch(f"http://127.0.0.1:{metrics_port}/metrics")
        finally:
            project.stop()
        # What beat did, as getting started looks at it.
        assert "submitted" in project.celery("-A", "proj", "goatbeat", "history", "heartbeat")
        assert "tick" in project.celery("-A", "proj", "goatbeat", "list", "--source", "api")
    # Shown with -rP or -s.
    print(f"{extra}: installed in {installed:.1f}s, "
          f"{time.monotonic() - started:.1f}s in all (build {dist.seconds:.1f}s)")
