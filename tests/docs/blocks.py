"""Runnable examples in ``docs/*.md``: how they are marked, found and grouped.

A fenced block runs when the line before it (blank lines allowed) is a marker::

    <!-- test -->
    ```python
    ...
    ```

A marker with a body and no fence is a hidden Python block, for setting a scene or checking what
a visible example did without showing scaffolding to readers::

    <!-- test: continue
    assert ...
    -->

Options follow ``test:``, separated by spaces:

``continue``
    Run in the context of the previous runnable block of the page (same directory, database,
    app module and Python namespace) instead of a fresh one.
``postgres`` / ``postgres-fresh``
    The context's store is the session's PostgreSQL database, emptied (``postgres``), or a new
    database without goatbeat's tables (``postgres-fresh``); SQLite in a temporary directory
    otherwise.
``app=quickstart`` / ``app=none``
    The app module is ``examples/quickstart/proj.py`` (its files in the temporary directory)
    instead of a minimal ``proj`` module; or there is none, for a page that writes its own
    files (``file=``).
``file=PATH``
    This Python block is not run: it is written to ``PATH`` in the chain's directory (a file
    the page tells readers to create, such as ``proj.py`` or ``proj/settings.py``), replacing
    any file there, for the commands and blocks after it. With ``append``, it is added to the
    end of that file instead.
``background``
    This console block's commands are started together and left running (a worker, beat);
    the output shown after each must appear in what it prints, in order, within
    :data:`~tests.docs.context.BACKGROUND_TIMEOUT`. Then they are stopped with SIGTERM, as
    Ctrl-C would, and the chain goes on.
``install``
    This console block installs goatbeat (``pip install /path/to/goatbeat_celery…``): it is run
    only by the test that installs a built wheel (``tests/docs/test_installed_wheel.py``), with
    the wheel in place of the clone's path, and skipped by the others, which run on the
    repository's own environment.
``fails``
    Every command of this console block must exit non-zero.
``append``
    This Python block is not run: it is added to the end of the app module ``proj.py``, as the
    page tells readers to do, for the commands and blocks after it.
``roles=a,b``
    PostgreSQL roles the chain creates: each name is made unique to the run wherever it appears
    in the chain's code, and the roles are dropped afterwards.

Block languages: ``python`` (a script; a doctest when it starts with ``>>>``), ``console``
(``$ command`` lines, each followed by its expected output), ``sql`` (run as the database's
superuser), ``text`` (in a continued chain: what the previous Python block printed).

A chain may run on another environment than this process's: see
:class:`~tests.docs.context.ChainRunner`'s ``bin`` and ``isolated``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

DOCS = Path(__file__).resolve().parents[2] / "docs"

LANGUAGES = frozenset({"python", "console", "sql", "text"})
FLAGS = frozenset({"continue", "postgres", "postgres-fresh", "fails", "append", "background",
                   "install"})
VALUED = frozenset({"app", "roles", "file"})
APPS = frozenset({"quickstart", "none"})
#: What a continued block may carry: everything that concerns the block alone.
BLOCK_FLAGS = frozenset({"continue", "fails", "append", "background", "install"})
BLOCK_VALUES = frozenset({"file"})

_MARKER = re.compile(r"^<!--\s*test(?::(?P<options>.*?))?\s*(?P<end>-->)?\s*$")
_FENCE = re.compile(r"^(?P<fence>```+)\s*(?P<lang>[\w-]*)")


class DocsSyntaxError(ValueError):
    """A marker or block the runner cannot understand; reported as a failing test."""


@dataclass(frozen=True)
class Block:
    """One runnable block: where it is, its language, its code and its options."""

    page: str
    line: int
    lang: str
    code: str
    flags: frozenset[str] = frozenset()
    values: dict[str, str] = field(default_factory=dict)
    hidden: bool = False

    @property
    def where(self) -> str:
        return f"docs/{self.page}:{self.line}"


@dataclass
class Chain:
    """Blocks run one after the other in one context."""

    blocks: list[Block]

    @property
    def first(self) -> Block:
        return self.blocks[0]

    @property
    def id(self) -> str:
        return f"{self.first.page.removesuffix('.md')}:{self.first.line}"

    def flag(self, name: str) -> bool:
        return name in self.first.flags

    def value(self, name: str) -> str | None:
        return self.first.values.get(name)

    def has(self, flag: str) -> bool:
        """Whether any block of the chain carries ``flag``."""
        return any(flag in block.flags for block in self.blocks)


def parse_options(text: str, where: str) -> tuple[frozenset[str], dict[str, str]]:
    flags: set[str] = set()
    values: dict[str, str] = {}
    for token in text.split():
        name, sep, value = token.partition("=")
        if sep and name in VALUED:
            values[name] = value
        elif not sep and name in FLAGS:
            flags.add(name)
        else:
            raise DocsSyntaxError(f"{where}: unknown test option {token!r}")
    if values.get("app", "quickstart") not in APPS:
        raise DocsSyntaxError(f"{where}: unknown app {values['app']!r}")
    if "postgres" in flags and "postgres-fresh" in flags:
        raise DocsSyntaxError(f"{where}: give postgres or postgres-fresh, not both")
    if "roles" in values and "postgres-fresh" not in flags:
        raise DocsSyntaxError(f"{where}: roles are created in a postgres-fresh database only")
    return frozenset(flags), values


def page_blocks(path: Path) -> list[Block]:
    """The runnable blocks of one page, in order."""
    lines = path.read_text(encoding="utf-8").splitlines()
    page = path.name
    blocks: list[Block] = []
    index = 0
    while index < len(lines):
        match = _MARKER.match(lines[index].strip())
        if match is None:
            index += 1
            continue
        where = f"docs/{page}:{index + 1}"
        flags, values = parse_options(match.group("options") or "", where)
        if match.group("end") is None:  # a hidden block: code up to the closing -->
            end = next((i for i in range(index + 1, len(lines)) if lines[i].strip() == "-->"),
                       None)
            if end is None:
                raise DocsSyntaxError(f"{where}: hidden block without a closing -->")
            code = "\n".join(lines[index + 1:end])
            blocks.append(Block(page=page, line=index + 2, lang="python", code=code,
                                flags=flags, values=values, hidden=True))
            index = end + 1
            continue
        start = index + 1
        while start < len(lines) and not lines[start].strip():
            start += 1
        fence = _FENCE.match(lines[start]) if start < len(lines) else None
        if fence is None:
            raise DocsSyntaxError(f"{where}: a test marker must precede a fenced block")
        lang = fence.group("lang")
        if lang not in LANGUAGES:
            raise DocsSyntaxError(f"{where}: cannot run a {lang or 'plain'!r} block; "
                                  f"use one of {sorted(LANGUAGES)}")
        if "append" in flags and lang != "python":
            raise DocsSyntaxError(f"{where}: only Python can be appended to proj.py")
        if "file" in values and lang != "python":
            raise DocsSyntaxError(f"{where}: file= writes a Python block")
        if {"background", "install"} & flags and lang != "console":
            raise DocsSyntaxError(f"{where}: background and install are for console blocks")
        if "file" in values and (values["file"].startswith("/") or ".." in values["file"]):
            raise DocsSyntaxError(f"{where}: file= takes a path inside the chain's directory")
        close = next((i for i in range(start + 1, len(lines))
                      if lines[i].strip() == fence.group("fence")), None)
        if close is None:
            raise DocsSyntaxError(f"{where}: unclosed fence")
        blocks.append(Block(page=page, line=start + 2, lang=lang,
                            code="\n".join(lines[start + 1:close]), flags=flags,
                            values=values))
        index = close + 1
    return blocks


def chains(directory: Path = DOCS) -> list[Chain]:
    """Every page's runnable blocks, grouped into chains by ``continue``."""
    found: list[Chain] = []
    for path in sorted(directory.glob("*.md")):
        page_chains: list[Chain] = []
        for block in page_blocks(path):
            if "continue" in block.flags:
                if not page_chains:
                    raise DocsSyntaxError(f"{block.where}: continue with nothing before it")
                if block.flags - BLOCK_FLAGS or set(block.values) - BLOCK_VALUES:
                    raise DocsSyntaxError(f"{block.where}: a continued block takes its "
                                          "context from the first block of its chain")
                page_chains[-1].blocks.append(block)
            else:
                page_chains.append(Chain([block]))
        found.extend(page_chains)
    return found


@dataclass(frozen=True)
class Command:
    """One ``$ command`` of a console block and the output shown after it."""

    line: int
    text: str
    expected: tuple[str, ...]


def console_commands(block: Block) -> list[Command]:
    commands: list[Command] = []
    current: tuple[int, str] | None = None
    expected: list[str] = []
    for offset, line in enumerate(block.code.splitlines()):
        if line.startswith("$ "):
            if current is not None:
                commands.append(Command(current[0], current[1], tuple(expected)))
            current, expected = (block.line + offset, line[2:].strip()), []
        elif current is None:
            if line.strip():
                raise DocsSyntaxError(f"{block.where}: output before any $ command")
        else:
            expected.append(line)
    if current is not None:
        commands.append(Command(current[0], current[1], tuple(expected)))
    if not commands:
        raise DocsSyntaxError(f"{block.where}: a console block needs $ commands")
    return commands
