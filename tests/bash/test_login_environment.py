"""The user's login environment, on request (SPEC §32.1), with real rc files.

Each test writes a user home of its own (outside ``/tmp``, which a confined shell does
not see) with the rc files a user of the shell under test might have — bash's
``~/.bash_profile`` and ``~/.bashrc``, zsh's ``~/.zprofile`` and ``~/.zshrc``, fish's
``~/.config/fish/config.fish`` — points ``HOME`` and ``SHELL`` at them, and opens
sessions of that shell's backend with ``environment = "login"`` in the default sandbox
(``workspace-write``, bubblewrap) unless a test says otherwise. A control run with the
default ``"clean"`` shows every assertion could fail.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import psutil
import pytest

from dsh_terminal_bash.config import BashConfig
from dsh_terminal_core.cli.main import main as cli_main
from dsh_terminal_core.kernel.agents import Agent
from dsh_terminal_core.kernel.harness import Harness
from dsh_terminal_core.sandbox.bwrap import BwrapConfig, BwrapSandbox

from ..helpers import own_descendants, until_true

needs_bwrap = pytest.mark.skipif(
    not BwrapSandbox(BwrapConfig()).available(), reason="bubblewrap is not usable here"
)

PROFILE = """\
export FROM_PROFILE=profile-ran
export LOGIN_PID_NS="$(readlink /proc/self/ns/pid)"
export GITHUB_TOKEN=ghp_not_for_the_model
echo ran >> "$LOGIN_COUNT"
[ -f ~/.bashrc ] && . ~/.bashrc
"""

BASHRC = """\
case $- in *i*) ;; *) return ;; esac
export PATH="$PATH:$MYTOOL_DIR"
alias dll='ls -l --time-style=+dsh-alias'
greet() { echo "hello, $1 (from a function)"; }
"""

ZPROFILE = PROFILE.replace("[ -f ~/.bashrc ] && . ~/.bashrc\n", "")  # zsh -l -i reads .zshrc

ZSHRC = """\
[[ -o interactive ]] || return
setopt ksh_arrays sh_word_split  # change how any later script reads (the report too)
export PATH="$PATH:$MYTOOL_DIR"
alias dll='ls -l --time-style=+dsh-alias'
greet() { echo "hello, $1 (from a function)"; }
precmd() { echo hook-ran; }
"""

FISH_CONFIG = """\
set -gx FROM_PROFILE profile-ran
set -gx LOGIN_PID_NS (readlink /proc/self/ns/pid)
set -gx GITHUB_TOKEN ghp_not_for_the_model
echo ran >> $LOGIN_COUNT
status is-interactive; or exit
set -gx PATH $PATH $MYTOOL_DIR
alias dll 'ls -l --time-style=+dsh-alias'
function greet
    echo "hello, $argv[1] (from a function)"
end
function hook --on-event fish_prompt
    echo hook-ran
end
"""


@attrs.frozen
class Shell:
    """One shell under test: its backend, its rc files, and the file a line is added to."""

    type: str
    section: str
    program: str
    files: dict[str, str]
    rc: str
    hang: str
    fail: str = "exit 3"


SHELLS = {
    "bash": Shell(
        "shell",
        "terminal-bash",
        "/bin/bash",
        {".bash_profile": PROFILE, ".bashrc": BASHRC},
        ".bashrc",
        "read -r answer",
    ),
    "zsh": Shell(
        "zsh",
        "terminal-zsh",
        shutil.which("zsh") or "/usr/bin/zsh",
        {".zprofile": ZPROFILE, ".zshrc": ZSHRC},
        ".zshrc",
        "read -r answer",
    ),
    "fish": Shell(
        "fish",
        "terminal-fish",
        shutil.which("fish") or "/usr/bin/fish",
        {".config/fish/config.fish": FISH_CONFIG},
        ".config/fish/config.fish",
        "read answer",
        # fish's exit in config.fish leaves that file only; a program in its place ends it.
        "exec sh -c 'exit 3'",
    ),
}


@pytest.fixture(params=sorted(SHELLS))
def shell(request: pytest.FixtureRequest) -> Shell:
    found = SHELLS[request.param]
    if not os.access(found.program, os.X_OK):
        pytest.skip(f"{request.param} is not installed")
    return found


bash_only = pytest.mark.parametrize("shell", ["bash"], indirect=True)
"""For a test of what every shell shares (the capture's life, the CLI): bash's run stands."""


@pytest.fixture
def user(monkeypatch: pytest.MonkeyPatch, shell: Shell) -> Iterator[dict[str, Path]]:
    """A user of ``shell``: a home with its rc files, a tool dir they add to ``PATH``, a
    workspace. Under /var/tmp: a confined shell has a /tmp of its own."""
    base = Path(tempfile.mkdtemp(prefix="dsh-login-test-", dir="/var/tmp"))
    home, tools, workspace = base / "home", base / "opt-mytool-bin", base / "ws"
    for path in (home, tools, workspace):
        path.mkdir()
    (tools / "mytool").write_text("#!/bin/sh\necho mytool found\n")
    (tools / "mytool").chmod(0o755)
    for name, text in shell.files.items():
        (home / name).parent.mkdir(parents=True, exist_ok=True)
        (home / name).write_text(text)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("SHELL", shell.program)
    # What the rc files find: where the tool is and where to count their runs (the
    # workspace, writable from the sandbox). Set in the harness's own environment.
    monkeypatch.setenv("MYTOOL_DIR", str(tools))
    monkeypatch.setenv("LOGIN_COUNT", str(workspace / "login-count"))
    try:
        yield {"base": base, "home": home, "tools": tools, "ws": workspace}
    finally:
        shutil.rmtree(base, ignore_errors=True)


def config(
    user: dict[str, Path],
    environment: str = "login",
    mode: str = "workspace-write",
    shell: Shell = SHELLS["bash"],
    **settings: Any,
) -> dict[str, Any]:
    return {
        "sandbox-policy": {"mode": mode, "workspace_root": str(user["ws"])},
        shell.section: {"environment": environment, **settings},
    }


def tree_hash(root: Path) -> str:
    digest = hashlib.sha256()
    for directory, dirs, files in sorted(os.walk(root)):
        dirs.sort()
        for name in sorted(files):
            path = Path(directory) / name
            digest.update(f"{path}|{path.lstat().st_mode:o}|".encode() + path.read_bytes())
        digest.update(f"{directory}|{sorted(dirs)}".encode())
    return digest.hexdigest()


async def opened(h: Harness, agent: Agent, kind: str = "shell") -> tuple[str, str]:
    result = await h.call_tool(agent, "terminal_open", {"type": kind})
    assert not result.is_error, result.text
    return result.value["sessionId"], result.value["motd"]


async def run(h: Harness, agent: Agent, sid: str, command: str) -> dict[str, Any]:
    result = await h.call_tool(agent, "terminal_send", {"sessionId": sid, "text": command})
    assert result.value["waitReason"] == "stdin_read", result.text
    return result.value  # type: ignore[no-any-return]


# Commands every shell under test reads alike (fish has no ${NAME-default}).
SHOW_PROFILE = "printenv FROM_PROFILE; printenv GITHUB_TOKEN; echo end"


@needs_bwrap
async def test_path_aliases_and_functions_from_the_rc_files_reach_every_session(
    user: dict[str, Path], shell: Shell
) -> None:
    before = tree_hash(user["home"])
    async with Harness(config=config(user, shell=shell)) as h:
        agent = h.create_agent("a")
        first, motd = await opened(h, agent, shell.type)
        assert "dsh:" not in motd
        second, _ = await opened(h, agent, shell.type)
        other = h.create_agent("b")
        third, _ = await opened(h, other, shell.type)
        for owner, sid in ((agent, first), (agent, second), (other, third)):
            assert (await run(h, owner, sid, "mytool"))["viewport"] == "mytool found\n"
            shown = await run(h, owner, sid, SHOW_PROFILE)
            assert shown["viewport"] == "profile-ran\nend\n"
            assert (await run(h, owner, sid, "greet you"))["viewport"] == (
                "hello, you (from a function)\n"
            )
            listed = await run(h, owner, sid, f"dll -d {user['ws']}")
            assert "dsh-alias" in listed["viewport"], listed
            # The replay leaves nothing behind, and the prompt protocol still holds.
            leftover = await run(h, owner, sid, "env | grep -c '^DSH_LOGIN' ; false")
            assert (leftover["viewport"], leftover["exitCode"]) == ("0\n", 1)
        # The shell's own dialect: functions and aliases (a prompt hook, which would print
        # before every prompt and so fail the exact viewports above, left out).
        captured = await h.ctx.terminals.backend(shell.type).login_environment(agent)
        assert captured.dialect == os.path.basename(shell.program), captured.dialect
        assert "greet" in captured.functions and "dll" in captured.aliases, captured
        assert "precmd" not in captured.functions and "hook" not in captured.functions
        # It ran under the owner's sandbox: a pid namespace of its own.
        shown = await run(h, agent, first, "printenv LOGIN_PID_NS")
        assert shown["viewport"].startswith("pid:[")
        assert shown["viewport"].strip() != os.readlink("/proc/self/ns/pid")
    # One login shell for the whole harness, however many sessions and owners.
    assert (user["ws"] / "login-count").read_text() == "ran\n"
    assert tree_hash(user["home"]) == before


@needs_bwrap
async def test_clean_stays_the_default_and_has_none_of_it(
    user: dict[str, Path], shell: Shell
) -> None:
    assert BashConfig().environment == "clean"
    async with Harness(config=config(user, environment="clean", shell=shell)) as h:
        agent = h.create_agent("a")
        sid, _ = await opened(h, agent, shell.type)
        assert (await run(h, agent, sid, SHOW_PROFILE))["viewport"] == "end\n"
        for missing in ("greet x", f"dll -d {user['ws']}", "mytool"):
            shown = await run(h, agent, sid, missing)
            assert shown["exitCode"] == 127, shown  # command not found, in every shell
        # The home stays writable for each shell's confined session (SPEC §32.3).
        write = "mkdir -p ~/.cache/pip/t ~/.cache/newtool; touch ~/.cache/pip/t/f ~/.newfile"
        assert (await run(h, agent, sid, write))["exitCode"] == 0
        assert (await run(h, agent, sid, "ls ~/.cache/pip/t"))["viewport"] == "f\n"
    # ... into the owner's store: the user's home has none of it.
    assert not (user["home"] / ".newfile").exists() and not (user["home"] / ".cache").exists()
    assert not (user["ws"] / "login-count").exists()


FAILURES = {
    # rc file line, the words the report must carry
    "hangs": ("read -r answer", "did not finish within 2 s"),
    "fails": ("exit 3", "exited with status 3"),
    "prints": ("echo 'Welcome back!'", "printed 1 line (15 bytes) on its terminal"),
}


@needs_bwrap
@pytest.mark.parametrize("failure", sorted(FAILURES))
async def test_a_login_shell_that_hangs_fails_or_prints_is_reported_once_and_sessions_start_clean(
    user: dict[str, Path], shell: Shell, failure: str
) -> None:
    line, words = FAILURES[failure]
    line = {"hangs": shell.hang, "fails": shell.fail}.get(failure, line)
    rc = user["home"] / shell.rc
    rc.write_text(rc.read_text() + line + "\n")
    before = set(p.pid for p in own_descendants())
    async with Harness(config=config(user, shell=shell, login_timeout_ms=2000)) as h:
        agent = h.create_agent("a")
        first, motd = await opened(h, agent, shell.type)
        assert motd.startswith(
            "[dsh: the login environment was not applied: the login shell "
            f"({shell.program} -l -i -c ...) "
        ), motd
        assert words in motd and "start with a clean environment" in motd
        assert "Welcome" not in motd  # what it printed is for the operator, not the model
        second, again = await opened(h, agent, shell.type)
        assert "dsh:" not in again  # reported once
        for sid in (first, second):
            assert (await run(h, agent, sid, SHOW_PROFILE))["viewport"] == "end\n"
            assert (await run(h, agent, sid, "greet x"))["exitCode"] == 127
            assert (await run(h, agent, sid, "echo ok"))["exitCode"] == 0
        # The login shell is gone, hung or not.
        left = {p.pid for p in own_descendants()} - before
        assert all("-l" not in _argv(pid) for pid in left), [_argv(pid) for pid in left]


def _argv(pid: int) -> list[str]:
    with contextlib.suppress(psutil.Error):
        return list(psutil.Process(pid).cmdline())
    return []


@bash_only
@needs_bwrap
async def test_an_owner_disposed_mid_capture_stops_it_and_the_next_open_captures_again(
    user: dict[str, Path],
) -> None:
    (user["home"] / ".bashrc").write_text(BASHRC + "read -r answer\n")
    before = {p.pid for p in own_descendants()}

    def login_shells() -> list[int]:
        left = {p.pid for p in own_descendants()} - before
        return [pid for pid in left if "-l" in _argv(pid) and "bash" in " ".join(_argv(pid))]

    async with Harness(config=config(user, login_timeout_ms=600000)) as h:
        first = h.create_agent("a")
        opening = asyncio.ensure_future(h.call_tool(first, "terminal_open", {"type": "shell"}))
        count = user["ws"] / "login-count"
        # The profile ran (and counted) and the shell now waits in .bashrc's read.
        assert await until_true(lambda: count.exists() and bool(login_shells()), timeout=20)
        await first.dispose()
        refused = await opening
        assert refused.is_error and "OWNER_NOT_LIVE" in refused.text
        assert login_shells() == []
        # The capture was stopped, not failed: the next owner's open captures afresh.
        (user["home"] / ".bashrc").write_text(BASHRC)
        other = h.create_agent("b")
        sid, motd = await opened(h, other)
        assert "dsh:" not in motd
        assert (await run(h, other, sid, "greet b"))["viewport"] == "hello, b (from a function)\n"
    assert (user["ws"] / "login-count").read_text() == "ran\nran\n"


@needs_bwrap
@pytest.mark.parametrize("shell", ["zsh", "fish"], indirect=True)
async def test_a_bash_login_shell_gives_a_zsh_or_fish_session_its_variables_only(
    user: dict[str, Path], shell: Shell
) -> None:
    (user["home"] / ".bash_profile").write_text(PROFILE)
    (user["home"] / ".bashrc").write_text(BASHRC)
    settings = config(user, shell=shell, login_shell="/bin/bash")
    async with Harness(config=settings) as h:
        agent = h.create_agent("a")
        sid, motd = await opened(h, agent, shell.type)
        assert "dsh:" not in motd
        assert (await run(h, agent, sid, SHOW_PROFILE))["viewport"] == "profile-ran\nend\n"
        assert (await run(h, agent, sid, "mytool"))["viewport"] == "mytool found\n"
        # bash's definitions are bash's language: not replayed, and not carried along.
        assert (await run(h, agent, sid, "greet x"))["exitCode"] == 127
        assert (await run(h, agent, sid, "env | grep -c DSH_LOGIN"))["viewport"] == "0\n"
        captured = await h.ctx.terminals.backend(shell.type).login_environment(agent)
        assert captured.dialect == "bash" and captured.functions == ("greet",)


@bash_only
async def test_another_login_shell_gives_its_variables_only(user: dict[str, Path]) -> None:
    (user["home"] / ".profile").write_text("export FROM_SH_PROFILE=sh-ran\nalias nope=true\n")
    sh = shutil.which("dash") or "/bin/sh"
    async with Harness(config=config(user, mode="danger-full-access", login_shell=sh)) as h:
        agent = h.create_agent("a")
        sid, motd = await opened(h, agent)
        assert "dsh:" not in motd
        shown = await run(h, agent, sid, 'echo "[$FROM_SH_PROFILE]"; alias nope 2>&1')
        assert shown["viewport"].startswith("[sh-ran]\n") and "not found" in shown["viewport"]
        captured = await h.ctx.terminals.backend("shell").login_environment(agent)
        assert captured.usable and captured.dialect == os.path.basename(sh)
        assert captured.functions == () and captured.aliases == () and not captured.definitions


@bash_only
@needs_bwrap
def test_dsh_terminal_env_shows_names_values_on_request_and_never_secrets(
    user: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    workspace = ["--workspace", str(user["ws"])]
    assert cli_main(["env", *workspace]) == 0
    out = capsys.readouterr().out
    assert "environment 'clean' (not applied" in out
    assert "FROM_PROFILE" in out and "profile-ran" not in out
    assert "functions (1): greet" in out and "aliases (1): dll" in out
    assert "removed as secret-shaped (never shown): GITHUB_TOKEN" in out
    assert "ghp_not_for_the_model" not in out
    assert cli_main(["env", "--values", *workspace]) == 0
    out = capsys.readouterr().out
    assert "  FROM_PROFILE=profile-ran" in out and "ghp_not_for_the_model" not in out
    assert "  PATH=" in out and str(user["tools"]) in out

    (user["home"] / ".bashrc").write_text(BASHRC + "echo 'Welcome back!'\n")
    assert cli_main(["env", *workspace]) == 1
    out = capsys.readouterr().out
    assert "NOT CAPTURED: the login shell (/bin/bash -l -i -c ...) printed 1 line (15 bytes)" in out
    assert "what it printed:\n  Welcome back!" in out
    assert cli_main(["env", "--type", "nope", *workspace]) == 2


def test_config_is_checked() -> None:
    with pytest.raises(ValueError, match="environment must be 'clean' or 'login'"):
        BashConfig(environment="inherit")
    with pytest.raises(ValueError, match="login_timeout_ms must be a positive integer"):
        BashConfig(login_timeout_ms=0)
    with pytest.raises(ValueError, match="login_shell must be a non-empty string or null"):
        BashConfig(login_shell="")
    assert BashConfig().login_timeout_ms == 10000 and BashConfig().login_shell is None
