"""Where a chain of documented examples runs: a directory, a store, an app module, a namespace.

Every chain gets a fresh temporary directory holding ``proj.py`` (the app the pages call
``proj``) and, unless it runs on PostgreSQL, the SQLite file its store lives in. Python blocks
run in this process with that directory as the working directory. A console command that is
plain ``celery … goatbeat …`` words runs in this process too, through Celery's own top-level
``celery`` command (the one its executable calls, with the ``goatbeat`` plugin found the same
way); one that needs a shell (pipes, redirections, ``||``, variables), Celery's own commands
(beat, worker) and background commands run in a subprocess.

Pages write the chain's directory as :data:`SHOWN_DIRECTORY`: what commands print is compared
with that directory's path written so.

The same chains can run on another environment, such as a virtual environment where a built
wheel was installed: ``bin`` names its executables, and ``isolated`` runs Python blocks with its
interpreter in a subprocess instead of in this process.
"""

from __future__ import annotations

import contextlib
import doctest
import functools
import io
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import URL, make_url

from tests.conftest import stop_process_groups
from tests.docs import output
from tests.docs.blocks import Block, Chain, console_commands

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "examples" / "quickstart" / "proj.py"
BIN = Path(sys.executable).parent
COMMAND_TIMEOUT = 120
#: How long the commands of a background block have to print what the page shows.
BACKGROUND_TIMEOUT = 60
#: How long a background command has to exit after SIGTERM before it is killed.
STOP_TIMEOUT = 20

#: The app the pages call ``proj`` when no example app is named.
APP_MODULE = '''\
"""The app the documentation's examples call proj."""
from celery import Celery

app = Celery("proj", broker="memory://")
app.conf.update(
    timezone="Europe/Paris",
    goatbeat_database_url={url!r},
)
'''

#: How pages write the directory a chain runs in (the reader's project directory).
SHOWN_DIRECTORY = "/home/you/proj"

DOCTEST_FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
ROLE_PASSWORD = "change-me"


@dataclass
class Docs:
    """What hidden blocks may use, as ``docs``: the chain's directory and database."""

    directory: Path
    database_url: str
    roles: dict[str, str] = field(default_factory=dict)
    #: Environment variables given to the chain's commands (a hidden block may add some).
    env: dict[str, str] = field(default_factory=dict)

    def url(self, user: str | None = None) -> str:
        """The database URL, connecting as ``user`` (a role the chain created) if given."""
        if user is None:
            return self.database_url
        parsed: URL = make_url(self.database_url)
        # The password the pages' CREATE ROLE statements give.
        return parsed.set(username=self.roles.get(user, user),
                          password=ROLE_PASSWORD).render_as_string(hide_password=False)


#: Installs goatbeat for an ``install`` block; returns the directory of the executables of the
#: environment it installed into, where the chain's commands run from then on.
Installer = Callable[[Block, Path, dict[str, str]], Path]


class ChainRunner:
    """Runs one chain's blocks in order, failing the test at the first that does not hold.

    ``bin`` is the directory of the ``celery`` and ``python`` executables the commands use (this
    process's environment by default). With ``isolated``, Python blocks run in a subprocess of
    that ``python`` rather than in this process, and hidden blocks and doctests, which need
    this process, are refused. ``installer`` runs ``install`` blocks; without one they are
    skipped. With ``in_process=False`` every console command runs in a subprocess.
    """

    def __init__(self, chain: Chain, request: pytest.FixtureRequest, tmp_path: Path,
                 monkeypatch: pytest.MonkeyPatch, *, bin: Path = BIN, isolated: bool = False,
                 installer: Installer | None = None,
                 in_process: bool = True) -> None:
        self.chain = chain
        self.request = request
        self.directory = tmp_path
        self.monkeypatch = monkeypatch
        self.isolated = isolated
        self.installer = installer
        self.in_process = in_process
        #: Each console command run: its text, exit status and what it printed.
        self.ran: list[tuple[str, int, str]] = []
        self.env: dict[str, str] = {}
        self._use_bin(bin)
        roles = (chain.value("roles") or "").split(",")
        suffix = uuid.uuid4().hex[:8]
        self.roles = {name: f"{name}_{suffix}" for name in roles if name}
        self.database_url = self._database()
        self.printed: str | None = None  # what the last Python block printed
        self.background: list[subprocess.Popen[bytes]] = []
        #: Celery's shared tasks as the chain found them (see :func:`_shared_tasks`).
        self.shared_tasks: set[Any] = set()
        self.namespace: dict[str, Any] = {
            "__name__": "__docs__",
            "docs": Docs(directory=tmp_path, database_url=self.database_url, roles=self.roles,
                         env=self.env),
        }

    def _use_bin(self, bin: Path) -> None:
        self.bin = bin
        self.env["PATH"] = f"{bin}{os.pathsep}{os.environ.get('PATH', '')}"

    # -- setting up ------------------------------------------------------------------------
    def _database(self) -> str:
        if self.chain.flag("postgres"):
            url: str = self.request.getfixturevalue("pg_empty_url")
            return url
        if self.chain.flag("postgres-fresh"):
            return self._fresh_database()
        return "sqlite:///goatbeat.sqlite3"

    def _fresh_database(self) -> str:
        server: URL = self.request.getfixturevalue("pg_server_url")
        name = f"goatbeat_docs_{uuid.uuid4().hex[:10]}"
        admin = sa.create_engine(server, isolation_level="AUTOCOMMIT", poolclass=sa.NullPool)
        with admin.connect() as connection:
            connection.execute(sa.text(f'CREATE DATABASE "{name}"'))

        def drop() -> None:
            with admin.connect() as connection:
                connection.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
                for role in self.roles.values():
                    connection.execute(sa.text(f'DROP ROLE IF EXISTS "{role}"'))
            admin.dispose()

        self.request.addfinalizer(drop)
        return server.set(database=name).render_as_string(hide_password=False)

    def _write_app(self) -> None:
        target = self.directory / "proj.py"
        if self.chain.value("app") == "none":
            return
        if self.chain.value("app") == "quickstart":
            shutil.copy(QUICKSTART, target)
            state = str(self.directory / "var")
            self.env["QUICKSTART_DIR"] = state
            self.monkeypatch.setenv("QUICKSTART_DIR", state)
        else:
            target.write_text(APP_MODULE.format(url=self.database_url))

    @contextmanager
    def _in_directory(self) -> Iterator[None]:
        from celery import _state

        previous_app = _state.default_app
        previous_current = _state.get_current_app()
        self.shared_tasks = set(_state._on_app_finalizers)
        self.monkeypatch.chdir(self.directory)
        self.monkeypatch.syspath_prepend(str(self.directory))
        _forget_proj()
        try:
            yield
        finally:
            _forget_proj()
            # proj's app made itself Celery's current app; give it back.
            _state.default_app = previous_app
            _state._set_current_app(previous_current)

    # -- running ---------------------------------------------------------------------------
    def run(self) -> None:
        self._write_app()
        with self._in_directory():
            try:
                for block in self.chain.blocks:
                    code = self._rename_roles(block.code)
                    if "install" in block.flags:
                        self._install(block)
                    elif "file" in block.values:
                        self._file(block, code, append="append" in block.flags)
                    elif block.lang == "python":
                        self._python(block, code)
                    elif "background" in block.flags:
                        self._background(block, code)
                    elif block.lang == "console":
                        self._console(block, code)
                    elif block.lang == "text":
                        self._printed(block, code)
                    else:
                        self._sql(block, code)
            finally:
                self._stop_background()

    def _rename_roles(self, code: str) -> str:
        for name, unique in self.roles.items():
            code = re.sub(rf"\b{re.escape(name)}\b", unique, code)
        return code

    def _install(self, block: Block) -> None:
        if self.installer is not None:
            self._use_bin(self.installer(block, self.directory, dict(self.env)))

    def _file(self, block: Block, code: str, *, append: bool = False) -> None:
        target = self.directory / block.values["file"]
        target.parent.mkdir(parents=True, exist_ok=True)
        with target.open("a" if append else "w", encoding="utf-8") as file:
            file.write(("\n" if append else "") + code + "\n")
        _forget_proj()

    def _python(self, block: Block, code: str) -> None:
        if self.isolated:
            self._python_elsewhere(block, code)
            return
        if "append" in block.flags:
            with (self.directory / "proj.py").open("a", encoding="utf-8") as module:
                module.write(f"\n# docs/{block.page}:{block.line}\n{code}\n")
            sys.modules.pop("proj", None)
            return
        if code.lstrip().startswith(">>>"):
            test = doctest.DocTestParser().get_doctest(
                code, self.namespace, block.where, block.where, block.line - 1)
            runner = doctest.DocTestRunner(optionflags=DOCTEST_FLAGS)
            report: list[str] = []
            runner.run(test, out=report.append, clear_globs=False)
            self.namespace.update(test.globs)  # DocTest ran on a copy; later blocks see its names
            if runner.failures:
                pytest.fail(f"{block.where}: doctest failed\n{''.join(report)}", pytrace=False)
            return
        compiled = compile("\n" * (block.line - 1) + code, str(ROOT / "docs" / block.page),
                           "exec")
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            exec(compiled, self.namespace)
        self.printed = printed.getvalue()

    def _python_elsewhere(self, block: Block, code: str) -> None:
        """A Python block run by the chain's own interpreter, as a reader would run it."""
        if "append" in block.flags:
            with (self.directory / "proj.py").open("a", encoding="utf-8") as module:
                module.write(f"\n{code}\n")
            return
        if block.hidden or code.lstrip().startswith(">>>"):
            pytest.fail(f"{block.where}: a chain run on another environment takes visible "
                        "scripts only, not hidden blocks or doctests", pytrace=False)
        result = subprocess.run(
            [str(self.bin / "python"), "-"], input=code, cwd=self.directory,
            env=self._command_env(), capture_output=True, text=True,
            timeout=COMMAND_TIMEOUT, check=False,
        )
        if result.returncode != 0:
            pytest.fail(f"{block.where}: exit status {result.returncode}:\n{result.stdout}"
                        f"{result.stderr}", pytrace=False)
        self.printed = result.stdout

    def _as_shown(self, text: str) -> str:
        """``text`` with the chain's directory written as the pages write it."""
        return text.replace(str(self.directory), SHOWN_DIRECTORY)

    def _command_env(self) -> dict[str, str]:
        env = {**os.environ, **self.env}
        # The pages show tables at the width a pipe gets, whatever the shell running the tests.
        env.pop("COLUMNS", None)
        if self.isolated:
            # Only what the environment itself installed: nothing of this checkout.
            env.pop("PYTHONPATH", None)
            env["VIRTUAL_ENV"] = str(self.bin.parent)
        return env

    def _printed(self, block: Block, code: str) -> None:
        if self.printed is None:
            pytest.fail(f"{block.where}: a text block shows what a Python block printed; "
                        "none ran before it", pytrace=False)
        if not output.matches(code.splitlines(), self._as_shown(self.printed)):
            pytest.fail(f"{block.where}: the printed output differs from the page.\n--- page\n"
                        f"{code}\n--- actual\n{self.printed}", pytrace=False)

    def _console(self, block: Block, code: str) -> None:
        commands = console_commands(Block(page=block.page, line=block.line, lang=block.lang,
                                          code=code))
        for command in commands:
            where = f"docs/{block.page}:{command.line}"
            status, printed = self._command(command.text)
            self.ran.append((command.text, status, printed))
            shown = f"$ {command.text}\n{printed}"
            if "fails" in block.flags and status == 0:
                pytest.fail(f"{where}: the page shows this command failing, it succeeded:\n"
                            f"{shown}", pytrace=False)
            if "fails" not in block.flags and status != 0:
                pytest.fail(f"{where}: exit status {status}:\n{shown}", pytrace=False)
            if command.expected and not output.matches(command.expected,
                                                       self._as_shown(printed)):
                pytest.fail(f"{where}: the output differs from the page.\n--- page\n"
                            + "\n".join(command.expected) + f"\n--- actual\n{shown}",
                            pytrace=False)

    def _in_process(self) -> bool:
        """Whether this process can stand in for a ``celery`` executable: the chain uses this
        environment, and its app is not a Django project (Django is set up once a process)."""
        return (self.in_process and self.bin == BIN and not self.isolated
                and not (self.directory / "proj").is_dir())

    def _command(self, text: str) -> tuple[int, str]:
        """Run one command; its exit status and what it printed (stdout and stderr, in order)."""
        argv = celery_words(text) if self._in_process() else None
        if argv is None:
            result = subprocess.run(
                ["bash", "-c", text], cwd=self.directory, env=self._command_env(),
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                timeout=COMMAND_TIMEOUT, check=False,
            )
            return result.returncode, result.stdout
        from celery.bin.celery import celery
        from click.testing import CliRunner

        _forget_proj()  # the command reads the chain's files as they are now
        # The environment a subprocess would get: the chain's variables, no COLUMNS.
        env: dict[str, str | None] = {**self.env, "COLUMNS": None}
        environ = dict(os.environ)  # what the app's import sets (setdefault) ends with it
        try:
            with _shared_tasks(self.shared_tasks):
                ran = CliRunner().invoke(celery, argv, env=env, prog_name="celery")
        finally:
            os.environ.clear()
            os.environ.update(environ)
        printed = ran.output
        if ran.exception is not None and not isinstance(ran.exception, SystemExit):
            # What the executable would print: the traceback of what escaped.
            printed += "".join(traceback.format_exception(ran.exception))
        return ran.exit_code, printed

    def _background(self, block: Block, code: str) -> None:
        """Start every command of the block, wait until each has printed what the page shows
        after it, then stop them all with SIGTERM."""
        commands = console_commands(Block(page=block.page, line=block.line, lang=block.lang,
                                          code=code))
        started: list[tuple[Any, subprocess.Popen[bytes], Path]] = []
        for command in commands:
            log = Path(tempfile.mkstemp(prefix="docs-background-", suffix=".log")[1])
            self.request.addfinalizer(functools.partial(log.unlink, missing_ok=True))
            with log.open("wb") as sink:
                process = subprocess.Popen(
                    ["bash", "-c", f"exec {command.text}"], cwd=self.directory,
                    env=self._command_env(), stdout=sink, stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            self.background.append(process)
            started.append((command, process, log))
        deadline = time.monotonic() + BACKGROUND_TIMEOUT
        waiting = list(started)
        while waiting and time.monotonic() < deadline:
            time.sleep(0.25)
            for entry in list(waiting):
                command, process, log = entry
                printed = log.read_text(encoding="utf-8", errors="replace")
                if output.contains(command.expected, self._as_shown(printed)):
                    waiting.remove(entry)
                elif process.poll() is not None:
                    pytest.fail(f"docs/{block.page}:{command.line}: exited with status "
                                f"{process.returncode} before printing what the page shows:\n"
                                f"$ {command.text}\n{printed}", pytrace=False)
        self._stop_background()
        if waiting:
            shown = "\n".join(
                f"--- docs/{block.page}:{command.line}, page\n" + "\n".join(command.expected)
                + f"\n--- printed in {BACKGROUND_TIMEOUT}s\n$ {command.text}\n"
                + log.read_text(encoding="utf-8", errors="replace")
                for command, _, log in waiting)
            pytest.fail(f"background commands did not print what the page shows:\n{shown}",
                        pytrace=False)

    def _stop_background(self) -> None:
        """SIGTERM to each background command, as Ctrl-C in its terminal would."""
        running, self.background = self.background, []
        stop_process_groups(running, STOP_TIMEOUT)

    def _sql(self, block: Block, code: str) -> None:
        if not self.database_url.startswith("postgresql"):
            pytest.fail(f"{block.where}: SQL blocks run on PostgreSQL: mark the chain postgres",
                        pytrace=False)
        engine = sa.create_engine(self.database_url, isolation_level="AUTOCOMMIT",
                                  poolclass=sa.NullPool)
        try:
            with engine.connect() as connection:
                for statement in sql_statements(code):
                    connection.exec_driver_sql(statement)
        finally:
            engine.dispose()


@contextmanager
def _shared_tasks(kept: set[Any]) -> Iterator[None]:
    """Celery's registry of shared tasks holding only ``kept`` meanwhile.

    Every import of ``proj`` leaves its tasks there, to be added to each app created later;
    a command run in this process must not find those of earlier imports, which a new process
    would not have (each would collide with the task of the same name its own import defines).
    """
    from celery import _state

    finalizers = _state._on_app_finalizers
    before = set(finalizers)
    finalizers.clear()
    finalizers.update(kept)
    try:
        yield
    finally:
        finalizers.clear()
        finalizers.update(before)


def _forget_proj() -> None:
    """Drop the ``proj`` module (or package and its modules) this process imported, so the
    next import reads the chain's files."""
    for name in [name for name in sys.modules if name == "proj" or name.startswith("proj.")]:
        del sys.modules[name]


#: What makes a command need a shell, outside quotes: operators, expansions, globs.
_SHELL_SYNTAX = re.compile(r"[|&;<>()$`*?\[\]{}~\\]")
_QUOTED = re.compile(r"'[^']*'|\"[^\"$`\\]*\"")


def celery_words(text: str) -> list[str] | None:
    """The arguments after ``celery`` of a command that is plain words; None for one that
    needs a shell (or is not ``celery``)."""
    if _SHELL_SYNTAX.search(_QUOTED.sub("", text)):
        return None
    words = shlex.split(text)
    # goatbeat's own commands; Celery's (beat, worker) configure logging and signals for a
    # process of their own.
    if words[:1] != ["celery"] or "goatbeat" not in words:
        return None
    return words[1:]


def sql_statements(code: str) -> list[str]:
    """Statements of a SQL block: comments dropped, split at semicolons ending a line."""
    text = "\n".join(line.split("--", 1)[0] for line in code.splitlines())
    return [part.strip() for part in re.split(r";\s*(?:\n|$)", text) if part.strip()]
