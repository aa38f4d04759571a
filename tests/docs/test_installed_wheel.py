"""The getting-started page works for someone who installs the package, not for this checkout.

The release's wheel is built (``tests/packaging/dist.py``: once per run, shared with the
packaging tests), the page's ``install`` block runs in an empty directory with that wheel in
place of the clone's path it shows (so ``python -m venv .venv`` and ``pip install
/path/to/goatbeat_celery`` make a fresh virtual environment holding the wheel and its
dependencies, which pip takes from the wheelhouse built beside it), and every runnable block of
the page then runs there as the page shows it: the app file written as printed, the ``celery``
commands of that environment, a worker and beat started and stopped, Python scripts run by that
environment's interpreter. Nothing of this checkout is importable there.

Nothing here is skipped: a missing ``venv`` module, a package index that cannot be reached or a
wheel that lacks a file fails the test.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from pathlib import Path

import pytest

from tests.docs.blocks import DOCS, Block, chains, console_commands
from tests.docs.context import ChainRunner
from tests.packaging.dist import built

pytestmark = pytest.mark.slow

PAGE = "getting-started.md"
#: Where the page has the reader's clone of the repository, in a ``pip install`` line, with
#: its extras and quotes.
_REQUIREMENT = re.compile(
    r"""(?P<quote>["']?)/path/to/goatbeat_celery(?P<extras>\[[^\]\s]*\])?(?P=quote)""")
BUILD_TIMEOUT = 300


def pip_lines_with(wheel: Path, command: str) -> str:
    """``command`` with the clone's path in a ``pip install`` replaced by the wheel."""
    if not re.match(r"^(python -m )?pip install\b", command):
        return command
    return _REQUIREMENT.sub(lambda m: f'"{wheel}{m.group("extras") or ""}"', command)


class WheelInstaller:
    """Runs the page's install block in the chain's directory, the wheel in place of the
    package's name, and gives the environment it made."""

    def __init__(self, wheel: Path, wheelhouse: Path) -> None:
        self.wheel = wheel
        self.wheelhouse = wheelhouse
        self.seconds = 0.0

    def __call__(self, block: Block, directory: Path, env: dict[str, str]) -> Path:
        commands = [pip_lines_with(self.wheel, c.text) for c in console_commands(block)]
        assert any(str(self.wheel) in command for command in commands), (
            f"{block.where}: no `pip install /path/to/goatbeat_celery` in the install block")
        # One shell, so that `. .venv/bin/activate` holds for the commands after it.
        script = "\n".join(["set -euo pipefail", *commands,
                            'echo "BIN=$(dirname "$(command -v python)")"'])
        started = time.monotonic()
        # pip as the page runs it, taking the dependencies from the wheelhouse only.
        wheels = {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(self.wheelhouse)}
        if not os.environ.get("PYTHONDONTWRITEBYTECODE"):
            # Compiling every dependency is a third of an install: what the page imports is
            # compiled as it is first imported, and kept (as in tests/packaging).
            wheels["PIP_NO_COMPILE"] = "1"
        result = subprocess.run(["bash", "-c", script], cwd=directory,
                                env=_clean({**env, **wheels}), stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, timeout=BUILD_TIMEOUT,
                                check=False)
        self.seconds = time.monotonic() - started
        if result.returncode != 0:
            pytest.fail(f"{block.where}: the install block failed ({result.returncode}):\n"
                        + "\n".join(commands) + f"\n---\n{result.stdout}", pytrace=False)
        bin_line = [line for line in result.stdout.splitlines() if line.startswith("BIN=")][-1]
        bin = Path(bin_line.removeprefix("BIN="))
        if not bin.is_relative_to(directory):
            pytest.fail(f"{block.where}: the install block made no environment in the "
                        f"project's directory (python is {bin}/python)", pytrace=False)
        return bin


def _clean(env: dict[str, str]) -> dict[str, str]:
    merged = {**os.environ, **env}
    for name in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME"):
        merged.pop(name, None)
    return merged


def test_getting_started_runs_as_written_from_an_installed_wheel(
        request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
        monkeypatch: pytest.MonkeyPatch) -> None:
    # The page's PostgreSQL project needs a server the docs chains set up in this checkout's
    # environment (hidden blocks), so tests/docs/test_docs_examples.py runs it; here, the
    # projects a reader runs with nothing but the wheel.
    page_chains = [chain for chain in chains(DOCS)
                   if chain.first.page == PAGE and not chain.flag("postgres-fresh")]
    assert page_chains, f"no runnable blocks in docs/{PAGE}"
    assert page_chains[0].first.flags >= {"install"}, (
        f"docs/{PAGE} must start its first chain with the install block")
    assert all(chain.has("install") for chain in page_chains), (
        f"every chain of docs/{PAGE} must install the package first")

    started = time.monotonic()
    dist = built(tmp_path_factory)
    installer = WheelInstaller(dist.wheel, dist.wheelhouse)
    for chain in page_chains:
        directory = tmp_path_factory.mktemp("project")
        runner = ChainRunner(chain, request, directory, monkeypatch, isolated=True,
                             installer=installer)
        runner.run()
        where = subprocess.run(
            [str(runner.bin / "python"), "-c",
             "import goatbeat_celery, sys; print(goatbeat_celery.__file__)"],
            cwd=directory, env=_clean({}), stdout=subprocess.PIPE, text=True, check=True,
        ).stdout.strip()
        assert Path(where).is_relative_to(runner.bin.parent), (
            f"goatbeat_celery was imported from {where}, not the installed wheel")
    total = time.monotonic() - started
    # Shown with -rP or -s: how long each part took.
    print(f"wheel built in {dist.seconds:.1f}s; installed in {installer.seconds:.1f}s; "
          f"page run in {total - dist.seconds - installer.seconds:.1f}s; {total:.1f}s in all")
