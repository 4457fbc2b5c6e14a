#!/usr/bin/env bash
# Install dsh-terminal on this machine: bubblewrap (the sandbox) when missing, then the
# Python distributions. `--test` also installs what the test suite needs.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v bwrap >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    apt-get update -qq >/dev/null && apt-get install -y -qq bubblewrap >/dev/null \
      || echo "install.sh: could not install bubblewrap; confined sandbox modes will refuse to open sessions" >&2
  else
    echo "install.sh: bwrap not found; install bubblewrap for the confined sandbox modes" >&2
  fi
fi

python3 -m pip install -q --upgrade pip >/dev/null 2>&1 || true
if [ "${1:-}" = "--test" ]; then
  python3 -m pip install -q -r requirements-dev.txt
else
  python3 -m pip install -q -e ./dsh_terminal_core -e ./dsh_terminal_bash -e ./dsh_tool_terminal -e ./dsh_pty_session
fi
