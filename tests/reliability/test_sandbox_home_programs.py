"""nvim, nano and ``npm install`` in the default sandbox, with the user's HOME untouched
(SPEC §32.3).

Measured before the home store: in ``workspace-write`` nvim opened with ``E303: Unable to
create directory ".../.local/share/nvim" for swap file`` (and E739, E886 for its ShaDa
file), nano with ``[ Problems with history file ]`` and "Unable to create directory
.../.local/share/nano/: Read-only file system", and ``npm install`` failed on its cache
(``npm error syscall mkdir ... ~/.npm/_cacache``, status 254). Each program here runs
through the tools in a session of the default sandbox (``workspace-write``, bubblewrap;
``network = "host"`` for npm, which installs a local tarball with ``--no-audit`` so no
registry is needed), against a user home of the test's own that already holds
an nvim config and an old npm cache; the home is hashed before and after. The control
runs the same programs with ``home = "read-only"`` and must meet the old failures, so
the assertions could fail.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import tarfile
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dsh_terminal_core.kernel.agents import Agent
from dsh_terminal_core.kernel.harness import Harness

from ..helpers import call_value, needs
from ._support import BWRAP_USABLE

pytestmark = [
    pytest.mark.bwrap,
    pytest.mark.skipif(not BWRAP_USABLE, reason="bubblewrap is not usable here"),
]

COMPLAINTS = ("E303", "E739", "E886", "Problems with history file", "Unable to create")


@pytest.fixture
def user(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Path]]:
    """A user home (HOME points at it) and a workspace, under /var/tmp (a confined shell
    has a /tmp of its own), and a local npm package tarball: no registry needed."""
    base = Path(tempfile.mkdtemp(prefix="dsh-home-programs-", dir="/var/tmp"))
    home, workspace = base / "home", base / "ws"
    (home / ".config" / "nvim").mkdir(parents=True)
    (home / ".config" / "nvim" / "init.vim").write_text("set number\n")
    (home / ".local" / "share" / "nvim" / "site").mkdir(parents=True)
    (home / ".npm" / "_cacache").mkdir(parents=True)
    (home / ".npm" / "_cacache" / "stale").write_text("an old cache entry\n")
    (home / ".bashrc").write_text("# the user's own\n")
    workspace.mkdir()
    (workspace / "package.json").write_text(json.dumps({"name": "app", "version": "1.0.0"}))
    _npm_tarball(base / "dsh-local-pkg-1.0.0.tgz")
    monkeypatch.setenv("HOME", str(home))
    try:
        yield {"base": base, "home": home, "ws": workspace}
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _npm_tarball(path: Path) -> None:
    """What ``npm pack`` makes of a one-file package: ``package/`` and its files."""
    files = {
        "package/package.json": json.dumps(
            {"name": "dsh-local-pkg", "version": "1.0.0", "main": "index.js"}
        ),
        "package/index.js": "module.exports = 'dsh-local-pkg loaded';\n",
    }
    with tarfile.open(path, "w:gz") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))


def tree_hash(root: Path) -> str:
    digest = hashlib.sha256()
    for directory, dirs, files in sorted(os.walk(root)):
        dirs.sort()
        for name in sorted(files):
            path = Path(directory) / name
            digest.update(f"{path}|{path.lstat().st_mode:o}|".encode() + path.read_bytes())
        digest.update(f"{directory}|{sorted(dirs)}|{os.lstat(directory).st_mode:o}".encode())
    return digest.hexdigest()


def config(user: dict[str, Path], home: str = "private") -> dict[str, Any]:
    policy = {"workspace_root": str(user["ws"]), "network": "host", "home": home}
    return {"sandbox-policy": policy}  # mode: the default, workspace-write


async def send(h: Harness, agent: Agent, sid: str, **args: Any) -> dict[str, Any]:
    value = await call_value(h, agent, "terminal_send", {"sessionId": sid, **args})
    assert value["waitReason"] == "stdin_read", value
    return value


async def run_long(h: Harness, agent: Agent, sid: str, command: str) -> str:
    """Run a command that may be silent for longer than the silence tier (npm talks to
    its registry): keep waiting with empty sends until the prompt; all of its output."""
    value = await call_value(h, agent, "terminal_send", {"sessionId": sid, "text": command})
    output = value["viewport"]
    for _ in range(40):
        if value["waitReason"] == "stdin_read":
            return str(output)
        assert value["waitReason"] == "inferred_idle", value
        value = await call_value(
            h, agent, "terminal_send", {"sessionId": sid, "text": "", "submit": False}
        )
        output += value["viewport"]
    raise AssertionError(f"no prompt after {command!r}: {output}")


def shown(value: dict[str, Any]) -> str:
    return str(value["screen"]["text"]) if "screen" in value else str(value["viewport"])


async def nvim_and_nano(h: Harness, agent: Agent, kind: str = "shell") -> list[str]:
    """Edit a file with each in a session of ``kind``; return what each showed (the
    screen while it ran)."""
    opening = {"type": kind, "screen": True, "rows": 24, "cols": 100}
    sid = (await call_value(h, agent, "terminal_open", opening))["sessionId"]
    seen = []
    opened = await send(h, agent, sid, text="nvim nvim.txt")
    seen.append(shown(opened))
    edited = await send(h, agent, sid, keys=["i", "written by nvim", "Escape"])
    seen.append(shown(edited))
    saved = await send(h, agent, sid, keys=[":wq", "Enter"])
    assert saved["exitCode"] == 0, shown(saved)
    opened = await send(h, agent, sid, text="nano nano.txt")
    seen.append(shown(opened))
    typed = await send(h, agent, sid, keys=["written by nano", "C-w", "nano", "Enter"])
    seen.append(shown(typed))
    await send(h, agent, sid, keys=["C-x"])
    done = await send(h, agent, sid, keys=["y", "Enter"])
    assert done["exitCode"] == 0, shown(done)
    await call_value(h, agent, "terminal_close", {"sessionId": sid})
    return seen


@needs("nvim", "nano", "npm")
async def test_nvim_nano_and_npm_install_keep_their_state_and_home_is_unchanged(
    user: dict[str, Path],
) -> None:
    before = tree_hash(user["home"])
    async with Harness(config=config(user)) as h:
        agent = h.create_agent("dev")
        seen = await nvim_and_nano(h, agent)
        for screen in seen:
            assert not [c for c in COMPLAINTS if c in screen], screen
        assert (user["ws"] / "nvim.txt").read_text() == "written by nvim\n"
        assert (user["ws"] / "nano.txt").read_text() == "written by nano\n"

        sid = (await call_value(h, agent, "terminal_open", {}))["sessionId"]
        tarball = user["base"] / "dsh-local-pkg-1.0.0.tgz"
        out = await run_long(
            h, agent, sid, f"npm install --no-audit --no-fund {tarball} 2>&1; echo rc=$?"
        )
        assert "rc=0" in out and "added 1 package" in out, out
        assert not [w for w in ("WARN", "ERR", "EROFS", "EACCES") if w in out], out
        loaded = await send(h, agent, sid, text="node -p \"require('dsh-local-pkg')\"")
        assert loaded["viewport"] == "dsh-local-pkg loaded\n"
        # The state each program kept is in the owner's store (nano, as root, keeps it
        # under the password database's home, which is layered too), where the owner's
        # next shell finds it.
        kept = await send(h, agent, sid, text="ls ~/.local/share/nvim/shada ~/.npm/_cacache")
        assert "main.shada" in kept["viewport"] and "index-v5" in kept["viewport"]
        assert "stale" not in kept["viewport"]
        store = h.ctx.sandbox_policy.resolve(agent).home_dir
        assert store is not None
        assert list(Path(store).glob("*/.local/share/nano/search_history"))
    assert tree_hash(user["home"]) == before
    assert not os.path.exists(store)  # discarded with its owner


@needs("nvim", "nano", "npm")
@pytest.mark.parametrize("kind", ["zsh", "fish"])
async def test_the_home_store_serves_zsh_and_fish_sessions_alike(
    user: dict[str, Path], kind: str
) -> None:
    """The store is the sandbox's, whatever the shell: the same programs, in a session
    of each other shell, with no complaint and the user's home unchanged."""
    if shutil.which(kind) is None:
        pytest.skip(f"{kind} is not installed")
    before = tree_hash(user["home"])
    async with Harness(config=config(user)) as h:
        agent = h.create_agent("dev")
        for screen in await nvim_and_nano(h, agent, kind):
            assert not [c for c in COMPLAINTS if c in screen], screen
        assert (user["ws"] / "nano.txt").read_text() == "written by nano\n"
        sid = (await call_value(h, agent, "terminal_open", {"type": kind}))["sessionId"]
        tarball = user["base"] / "dsh-local-pkg-1.0.0.tgz"
        status = "$status" if kind == "fish" else "$?"
        out = await run_long(
            h, agent, sid, f"npm install --no-audit --no-fund {tarball} 2>&1; echo rc={status}"
        )
        assert "rc=0" in out and "added 1 package" in out, out
        assert not [w for w in ("WARN", "ERR", "EROFS", "EACCES") if w in out], out
        wrote = await send(h, agent, sid, text="touch ~/.cache/pip/x ~/.new; echo done")
        assert wrote["viewport"] == "done\n", wrote
    assert tree_hash(user["home"]) == before


@needs("nvim", "nano", "npm")
async def test_control_with_a_read_only_home_the_old_failures_are_back(
    user: dict[str, Path],
) -> None:
    before = tree_hash(user["home"])
    async with Harness(config=config(user, home="read-only")) as h:
        agent = h.create_agent("dev")
        shown_by = {}
        for program in ("nvim", "nano"):  # each opened, looked at, closed with its session
            value = await call_value(h, agent, "terminal_open", {"screen": True, "rows": 24})
            sid = value["sessionId"]
            shown_by[program] = shown(await send(h, agent, sid, text=f"{program} f.txt"))
            await call_value(h, agent, "terminal_close", {"sessionId": sid})
        nvim, nano = shown_by["nvim"], shown_by["nano"]
        assert "E303" in nvim and "Problems with history file" in nano, (nvim, nano)
        sid = (await call_value(h, agent, "terminal_open", {}))["sessionId"]
        tarball = user["base"] / "dsh-local-pkg-1.0.0.tgz"
        failed = await run_long(
            h, agent, sid, f"npm install --no-audit --no-fund {tarball} 2>&1; echo rc=$?"
        )
        assert ".npm/_cacache" in failed and "rc=0" not in failed, failed
    assert tree_hash(user["home"]) == before
