"""The sdist and wheel a release uploads, built once per run, and fresh environments holding them.

``python -m build`` makes both from a copy of the files a release is built from (the checkout
is left alone). Several pytest-xdist workers ask for them at once: the first builds them under
a file lock in the directory the workers share, the others wait and reuse what it built. The
dependencies of every extra are gathered once into a wheelhouse beside them, from the package
index (through pip's cache), so that each fresh environment installs with ``--no-index``: an
install then takes seconds and cannot pick up anything but the wheel and its dependencies.

Nothing is skipped: a package index that cannot be reached, a build that fails or a wheel that
lacks a file fails the test.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: What the sdist is built from: the files pyproject.toml packages, and the ones it names.
SOURCES = ("pyproject.toml", "README.md", "LICENSE", "MANIFEST.in", "CHANGELOG.md", "mkdocs.yml",
           "mkdocs_hooks.py", "docs", "goatbeat_celery")
#: The distribution's name on the package index (the import name is goatbeat_celery).
DISTRIBUTION = "celery-goatbeat"
#: Its extras, each installed alone in a fresh environment by tests/packaging.
EXTRAS = ("postgres", "redis", "web", "django", "metrics", "all")
BUILD_TIMEOUT = 600
INSTALL_TIMEOUT = 300


@dataclass(frozen=True)
class Built:
    """The release files and the dependencies of every extra, as wheels."""

    wheel: Path
    sdist: Path
    #: Wheels of every dependency of every extra: ``pip install --no-index --find-links``.
    wheelhouse: Path
    #: Seconds spent building them in this process (0 when another worker had).
    seconds: float


def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    """The sdist, the wheel and the wheelhouse, built by the first worker that asks."""
    # The parent of a worker's base directory is shared by every xdist worker of the run (and
    # by later runs without xdist): the files are named by what they are built from.
    shared = tmp_path_factory.getbasetemp().parent
    directory = shared / f"goatbeat-dist-{_sources_digest()}"
    started = time.monotonic()
    with (shared / f"{directory.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if not (directory / "done").exists():
                shutil.rmtree(directory, ignore_errors=True)
                _build(directory)
                (directory / "done").touch()
                seconds = time.monotonic() - started
            else:
                seconds = 0.0
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    (wheel,) = (directory / "dist").glob("celery_goatbeat-*.whl")
    (sdist,) = (directory / "dist").glob("celery_goatbeat-*.tar.gz")
    return Built(wheel=wheel, sdist=sdist, wheelhouse=directory / "wheelhouse", seconds=seconds)


def _sources() -> list[Path]:
    found: list[Path] = []
    for name in SOURCES:
        path = ROOT / name
        if path.is_dir():
            found += [file for file in sorted(path.rglob("*"))
                      if file.is_file() and "__pycache__" not in file.parts]
        elif path.exists():
            found.append(path)
    return found


def _sources_digest() -> str:
    digest = hashlib.sha256()
    for path in _sources():
        digest.update(path.relative_to(ROOT).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def _build(directory: Path) -> None:
    source = directory / "source"
    source.mkdir(parents=True)
    for path in _sources():
        target = source / path.relative_to(ROOT)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, target)
    dist = directory / "dist"
    # In an isolated environment with the build-system requirements, as scripts/release builds.
    run([sys.executable, "-m", "build", "--sdist", "--wheel",
         "--outdir", str(dist), str(source)], "building the sdist and wheel",
        timeout=BUILD_TIMEOUT)
    (wheel,) = dist.glob("celery_goatbeat-*.whl")
    run([sys.executable, "-m", "pip", "wheel", "--quiet", "--wheel-dir",
         str(directory / "wheelhouse"), f"{wheel}[all]"],
        "gathering the dependencies of every extra", timeout=BUILD_TIMEOUT)


def run(command: list[str], what: str, *, timeout: float = INSTALL_TIMEOUT,
        cwd: Path | None = None, env: dict[str, str] | None = None) -> str:
    """``command``'s output; the test fails, showing it, when the command does."""
    result = subprocess.run(command, cwd=cwd, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, timeout=timeout, check=False)
    if result.returncode != 0:
        pytest.fail(f"{what} failed ({result.returncode}):\n$ {' '.join(command)}\n"
                    f"{result.stdout}", pytrace=False)
    return result.stdout


def clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without anything that would import this checkout, and
    writing bytecode: a fresh environment is installed without it (:func:`fresh_environment`),
    so with PYTHONDONTWRITEBYTECODE set (as some CI images do) every command run there would
    compile Celery, SQLAlchemy and the rest from source again (3-4 s each instead of one)."""
    env = {**os.environ, **extra}
    for name in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME", "PYTHONDONTWRITEBYTECODE"):
        env.pop(name, None)
    return env


def fresh_environment(directory: Path, requirement: str, wheelhouse: Path) -> Path:
    """A new virtual environment in ``directory`` holding ``requirement`` (the wheel, with
    extras) and its dependencies, from the wheelhouse only; the directory of its
    executables."""
    venv = directory / "venv"
    # Without pip of its own: this environment's pip installs into it (pip --python), which
    # saves seeding each environment with pip.
    run([sys.executable, "-m", "venv", "--without-pip", str(venv)], "creating a venv")
    python = venv / "bin" / "python"
    # --no-compile: byte-compiling every file of every dependency took a third of an install;
    # what the environment imports is compiled when first imported (clean_env lets it be
    # written).
    run([sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet",
         "--no-compile", "--no-index", "--find-links", str(wheelhouse), requirement],
        f"installing {requirement}", env=clean_env())
    run([sys.executable, "-m", "pip", "--python", str(python), "check"],
        f"checking the dependencies of {requirement}", env=clean_env())
    return venv / "bin"
