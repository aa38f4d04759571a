"""Where a chain of documented examples runs: a directory, a store, an app module, a namespace.

Every chain gets a fresh temporary directory holding ``proj.py`` (the app the pages call
``proj``) and, unless it runs on PostgreSQL, the SQLite file its store lives in. Python blocks
run in this process with that directory as the working directory; console commands run in a
subprocess there, through the real ``celery`` executable.
"""

from __future__ import annotations

import contextlib
import doctest
import io
import os
import re
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import URL, make_url

from tests.docs import output
from tests.docs.blocks import Block, Chain, console_commands

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "examples" / "quickstart" / "proj.py"
BIN = Path(sys.executable).parent
COMMAND_TIMEOUT = 120

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

DOCTEST_FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
ROLE_PASSWORD = "change-me"


@dataclass
class Docs:
    """What hidden blocks may use, as ``docs``: the chain's directory and database."""

    directory: Path
    database_url: str
    roles: dict[str, str] = field(default_factory=dict)

    def url(self, user: str | None = None) -> str:
        """The database URL, connecting as ``user`` (a role the chain created) if given."""
        if user is None:
            return self.database_url
        parsed: URL = make_url(self.database_url)
        # The password the pages' CREATE ROLE statements give.
        return parsed.set(username=self.roles.get(user, user),
                          password=ROLE_PASSWORD).render_as_string(hide_password=False)


class ChainRunner:
    """Runs one chain's blocks in order, failing the test at the first that does not hold."""

    def __init__(self, chain: Chain, request: pytest.FixtureRequest, tmp_path: Path,
                 monkeypatch: pytest.MonkeyPatch) -> None:
        self.chain = chain
        self.request = request
        self.directory = tmp_path
        self.monkeypatch = monkeypatch
        self.env = {"PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
        roles = (chain.value("roles") or "").split(",")
        suffix = uuid.uuid4().hex[:8]
        self.roles = {name: f"{name}_{suffix}" for name in roles if name}
        self.database_url = self._database()
        self.printed: str | None = None  # what the last Python block printed
        self.namespace: dict[str, Any] = {
            "__name__": "__docs__",
            "docs": Docs(directory=tmp_path, database_url=self.database_url, roles=self.roles),
        }

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
        self.monkeypatch.chdir(self.directory)
        self.monkeypatch.syspath_prepend(str(self.directory))
        sys.modules.pop("proj", None)
        try:
            yield
        finally:
            sys.modules.pop("proj", None)
            # proj's app made itself Celery's current app; give it back.
            _state.default_app = previous_app
            _state._set_current_app(previous_current)

    # -- running ---------------------------------------------------------------------------
    def run(self) -> None:
        self._write_app()
        with self._in_directory():
            for block in self.chain.blocks:
                code = self._rename_roles(block.code)
                if block.lang == "python":
                    self._python(block, code)
                elif block.lang == "console":
                    self._console(block, code)
                elif block.lang == "text":
                    self._printed(block, code)
                else:
                    self._sql(block, code)

    def _rename_roles(self, code: str) -> str:
        for name, unique in self.roles.items():
            code = re.sub(rf"\b{re.escape(name)}\b", unique, code)
        return code

    def _python(self, block: Block, code: str) -> None:
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

    def _printed(self, block: Block, code: str) -> None:
        if self.printed is None:
            pytest.fail(f"{block.where}: a text block shows what a Python block printed; "
                        "none ran before it", pytrace=False)
        if not output.matches(code.splitlines(), self.printed):
            pytest.fail(f"{block.where}: the printed output differs from the page.\n--- page\n"
                        f"{code}\n--- actual\n{self.printed}", pytrace=False)

    def _console(self, block: Block, code: str) -> None:
        commands = console_commands(Block(page=block.page, line=block.line, lang=block.lang,
                                          code=code))
        env = {**os.environ, **self.env}
        for command in commands:
            where = f"docs/{block.page}:{command.line}"
            result = subprocess.run(
                ["bash", "-c", command.text], cwd=self.directory, env=env,
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                timeout=COMMAND_TIMEOUT, check=False,
            )
            shown = f"$ {command.text}\n{result.stdout}"
            if "fails" in block.flags and result.returncode == 0:
                pytest.fail(f"{where}: the page shows this command failing, it succeeded:\n"
                            f"{shown}", pytrace=False)
            if "fails" not in block.flags and result.returncode != 0:
                pytest.fail(f"{where}: exit status {result.returncode}:\n{shown}", pytrace=False)
            if command.expected and not output.matches(command.expected, result.stdout):
                pytest.fail(f"{where}: the output differs from the page.\n--- page\n"
                            + "\n".join(command.expected) + f"\n--- actual\n{shown}",
                            pytrace=False)

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


def sql_statements(code: str) -> list[str]:
    """Statements of a SQL block: comments dropped, split at semicolons ending a line."""
    text = "\n".join(line.split("--", 1)[0] for line in code.splitlines())
    return [part.strip() for part in re.split(r";\s*(?:\n|$)", text) if part.strip()]
