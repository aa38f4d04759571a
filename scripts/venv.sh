#!/usr/bin/env bash
# Create .venv and install goatbeat_celery with the given extras (default: dev). Idempotent.
# `dev` and `bench` are dependency groups of pyproject.toml (not published extras): each is
# installed beside the extras of the package that it needs.
set -euo pipefail
cd "$(dirname "$0")/.."
extras=${1:-dev}
if [ ! -x .venv/bin/python ]; then
  if ! python3 -m venv .venv 2>/dev/null; then
    rm -rf .venv
    if [ "$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq python3-venv >/dev/null
    else sudo apt-get update -qq && sudo apt-get install -y -qq python3-venv >/dev/null; fi
    python3 -m venv .venv
  fi
fi
stamp=".venv/.installed-$extras"
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  .venv/bin/python -m pip install -q --upgrade pip >/dev/null
  # The distribution was called goatbeat_celery before 0.2: an environment made then holds
  # both, each with the celery command's entry point, and so does the checkout's old
  # metadata directory, which Python finds on the path of an editable install.
  .venv/bin/python -m pip uninstall -q -y goatbeat_celery >/dev/null 2>&1 || true
  rm -rf goatbeat_celery.egg-info
  case "$extras" in
    dev) install=(-e ".[postgres,mysql,redis,metrics,web,opentelemetry]" --group dev) ;;
    bench) install=(-e ".[postgres,redis]" --group bench) ;;
    *) install=(-e ".[$extras]") ;;
  esac
  .venv/bin/python -m pip install -q "${install[@]}"
  touch "$stamp"
fi
