#!/usr/bin/env bash
# Make sure Debian's chromium is at /usr/bin/chromium for the browser tests (tests/web), which
# drive it through Playwright for Python with `executable_path`: Playwright cannot download a
# browser of its own here. Idempotent.
set -euo pipefail

log() { printf '[browser] %s\n' "$*" >&2; }
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

if [ ! -x /usr/bin/chromium ]; then
  log "installing chromium"
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi
/usr/bin/chromium --version >&2
