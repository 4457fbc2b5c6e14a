"""A home a confined shell may write to (SPEC §32.3), enforced by a real ``bwrap``.

Each test builds a small user home of its own (``HOME`` pointed at it), runs confined
shells over it, and hashes the home before and after: the user's files must come out
byte for byte, mode for mode, as they went in.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from dsh_terminal_core.kernel.agents import Agent
from dsh_terminal_core.sandbox import (
    BwrapConfig,
    BwrapSandbox,
    Policy,
    SandboxMode,
    SandboxPolicyConfig,
    SandboxPolicyService,
)
from dsh_terminal_core.sandbox.home import DEFAULT_STATE_DIRS, check_state_dirs


@pytest.fixture(scope="module")
def sandbox() -> BwrapSandbox:
    box = BwrapSandbox(BwrapConfig())
    if not box.available():
        pytest.skip(f"bwrap cannot run here: {box.unavailable_reason}")
    return box


@pytest.fixture
def area(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """``home`` (the user's, HOME points at it), ``ws`` and ``store`` outside /tmp."""
    base = Path(tempfile.mkdtemp(prefix="dsh-home-test-", dir="/var/tmp"))
    home = base / "home"
    (home / ".config" / "nvim").mkdir(parents=True)
    (home / ".config" / "nvim" / "init.vim").write_text("set number\n")
    (home / ".bashrc").write_text("# the user's\n")
    (home / ".local" / "share" / "nvim" / "site").mkdir(parents=True)
    (home / ".local" / "share" / "nvim" / "site" / "plugin.vim").write_text("plugin\n")
    (home / ".cache" / "ms-playwright").mkdir(parents=True)
    (home / ".cache" / "ms-playwright" / "chromium").write_text("a browser\n")
    (home / ".npm" / "_cacache").mkdir(parents=True)
    (home / ".npm" / "_cacache" / "old").write_text("an old cache entry\n")
    (home / "notes.txt").write_text("mine\n")
    (home / ".link").symlink_to(".bashrc")
    (home / ".dangling").symlink_to("/nonexistent/dsh")
    (base / "ws").mkdir()
    monkeypatch.setenv("HOME", str(home))
    try:
        yield base
    finally:
        subprocess.run(["chmod", "-R", "u+rwX", str(base)], check=False)
        shutil.rmtree(base, ignore_errors=True)


def tree_hash(root: Path) -> str:
    """Every path under ``root`` with its kind, mode, size, content or link target."""
    digest = hashlib.sha256()
    for directory, dirs, files in sorted(os.walk(root)):
        dirs.sort()
        for name in sorted([*dirs, *files]):
            path = Path(directory) / name
            info = path.lstat()
            digest.update(f"{path.relative_to(root)}|{info.st_mode:o}|".encode())
            if path.is_symlink():
                digest.update(os.readlink(path).encode())
            elif path.is_file():
                digest.update(path.read_bytes())
        digest.update(f"{directory}|{os.lstat(directory).st_mode:o}".encode())
    return digest.hexdigest()


def private(base: Path, mode: SandboxMode = SandboxMode.WORKSPACE_WRITE) -> Policy:
    return Policy(mode, str(base / "ws"), home_dir=str(base / "store"))


def run_in(box: BwrapSandbox, policy: Policy, script: str) -> subprocess.CompletedProcess[str]:
    argv = box.confine(["bash", "-c", script], policy)
    return subprocess.run(
        argv, capture_output=True, text=True, timeout=30, check=False, stdin=subprocess.DEVNULL
    )


@pytest.mark.bwrap
@pytest.mark.parametrize("mode", [SandboxMode.READ_ONLY, SandboxMode.WORKSPACE_WRITE])
def test_state_lands_in_the_owners_store_and_the_users_files_stay_read_only(
    sandbox: BwrapSandbox, area: Path, mode: SandboxMode
) -> None:
    home, store = area / "home", area / "store" / "home"  # the part layered under $HOME
    before = tree_hash(home)
    script = r"""
    fail() { echo "FAIL: $*"; exit 1; }
    [ "$(cat ~/.bashrc)" = "# the user's" ] || fail bashrc unreadable
    echo x >> ~/.bashrc 2>/dev/null && fail bashrc writable
    echo x > ~/notes.txt 2>/dev/null && fail notes writable
    echo x >> ~/.config/nvim/init.vim 2>/dev/null && fail init.vim writable
    [ -f ~/.local/share/nvim/site/plugin.vim ] || fail nvim plugins hidden
    [ -f ~/.cache/ms-playwright/chromium ] || fail an installed cache hidden
    [ -e ~/.npm/_cacache/old ] && fail npm cache not fresh
    [ "$(readlink ~/.link)" = .bashrc ] && [ "$(cat ~/.link)" = "# the user's" ] || fail link
    [ "$(readlink ~/.dangling)" = /nonexistent/dsh ] || fail dangling link
    touch ~/.new-dotfile && mkdir -p ~/.config/newtool && echo s > ~/.config/newtool/s \
      || fail new names under HOME
    echo c > ~/.npm/entry && echo p > ~/.cache/pip/entry && echo n > ~/.cache/brand-new \
      || fail caches
    mkdir -p ~/.local/share/nano ~/.local/state/nvim/swap ~/.local/share/nvim/swap \
      && touch ~/.local/share/nano/search_history ~/.local/share/nvim/swap/f.swp \
      || fail editor state
    echo ok
    """
    done = run_in(sandbox, private(area, mode), script)
    assert (done.returncode, done.stdout.strip()) == (0, "ok"), done.stdout + done.stderr
    assert tree_hash(home) == before
    # What was written lives in the owner's store, where the next shell finds it.
    assert (store / ".new-dotfile").is_file() and (store / ".npm" / "entry").read_text() == "c\n"
    assert (store / ".config" / "newtool" / "s").read_text() == "s\n"
    again = run_in(sandbox, private(area, mode), "cat ~/.npm/entry ~/.cache/brand-new")
    assert again.stdout == "c\nn\n", again.stderr
    assert not (home / ".new-dotfile").exists()
    # The user's entries are the store's symlinks to them: a shell may remove one, or
    # rename a file of its own over one (sed -i); that stays in the store. The user's
    # file is untouched, and a removed link is back for the next shell.
    changed = run_in(
        sandbox, private(area, mode), "rm ~/notes.txt && sed -i s/#/%/ ~/.bashrc && cat ~/.bashrc"
    )
    assert changed.stdout == "% the user's\n", changed.stderr
    back = run_in(sandbox, private(area, mode), "cat ~/notes.txt ~/.bashrc")
    assert back.stdout == "mine\n% the user's\n"
    assert tree_hash(home) == before


@pytest.mark.bwrap
def test_without_a_store_home_is_read_only_as_before(sandbox: BwrapSandbox, area: Path) -> None:
    before = tree_hash(area / "home")
    policy = Policy(SandboxMode.WORKSPACE_WRITE, str(area / "ws"))
    done = run_in(sandbox, policy, "touch ~/.new 2>&1; mkdir ~/.local/share/nano 2>&1")
    assert done.stdout.count("Read-only file system") == 2, done.stdout
    assert tree_hash(area / "home") == before


@pytest.mark.bwrap
def test_a_workspace_inside_home_stays_writable(
    sandbox: BwrapSandbox, area: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = area / "home"
    workspace = home / "src" / "project"
    workspace.mkdir(parents=True)
    (home / "src" / "sibling").mkdir()
    for mode in (SandboxMode.WORKSPACE_WRITE, SandboxMode.READ_ONLY):
        policy = Policy(mode, str(workspace), home_dir=str(area / "store"))
        # The workspace keeps its real path (not the side path a symlink would give).
        real = run_in(sandbox, policy, f"cd {workspace} && pwd -P && ls -d ~/src/sibling")
        assert real.stdout == f"{workspace}\n{home}/src/sibling\n", real.stderr
    policy = Policy(SandboxMode.WORKSPACE_WRITE, str(workspace), home_dir=str(area / "store"))
    done = run_in(sandbox, policy, f"echo w > {workspace}/built && touch ~/src/beside")
    assert done.returncode == 0 and (workspace / "built").read_text() == "w\n"
    # Its parent is layered: a new name there is the owner's, in the store.
    assert (area / "store" / "home" / "src" / "beside").exists()
    assert not (home / "src" / "beside").exists()
    # A home inside the workspace is the workspace: writable, no layering.
    policy = Policy(SandboxMode.WORKSPACE_WRITE, str(area), home_dir=str(area / "unused"))
    assert run_in(sandbox, policy, "touch ~/.straight-in").returncode == 0
    assert (home / ".straight-in").exists() and not (area / "unused" / "home").exists()


@pytest.mark.bwrap
def test_links_the_shells_plant_in_the_store_never_lead_the_host_elsewhere(
    sandbox: BwrapSandbox, area: Path
) -> None:
    target = area / "target"
    target.mkdir()
    policy = private(area)
    # The shells own the store: they replace a layered directory and a state directory
    # by links to a host directory, and a user's symlink by one of their own.
    planted = run_in(
        sandbox,
        policy,
        f"rm -rf ~/.local/share/nano ~/.npm && ln -s {target} ~/.local/share/nano && "
        f"ln -s {target} ~/.npm && mkdir -p ~/.config && rm -f ~/.link && ln -s {target} ~/.link"
        " 2>&1; echo planted",
    )
    assert planted.stdout.strip().endswith("planted")
    # ~/.cache is layered (the user's entries are bound in it): empty it of the store's
    # own, then swap it for a link as well, from a shell without the layering.
    store = area / "store" / "home"
    shutil.rmtree(store / ".cache")
    (store / ".cache").symlink_to(target)
    before = tree_hash(area / "home")
    done = run_in(sandbox, policy, "touch ~/ok && readlink ~/.link && ls ~/.npm")
    assert done.returncode == 0, done.stderr
    # The user's symlink is restored; nothing was made through the planted links.
    assert done.stdout.splitlines()[0] == ".bashrc"
    assert list(target.iterdir()) == []
    assert tree_hash(area / "home") == before


@pytest.mark.bwrap
def test_what_the_owner_made_stays_when_the_user_later_makes_another_kind(
    sandbox: BwrapSandbox, area: Path
) -> None:
    policy = private(area)
    assert run_in(sandbox, policy, "mkdir ~/thing && echo o > ~/thing/owner").returncode == 0
    (area / "home" / "thing").write_text("the user's file\n")
    done = run_in(sandbox, policy, "cat ~/thing/owner; cat ~/notes.txt")
    assert (done.returncode, done.stdout) == (0, "o\nmine\n"), done.stderr


@pytest.mark.bwrap
async def test_an_owners_shells_opening_together_share_one_store(
    sandbox: BwrapSandbox, area: Path
) -> None:
    policy = private(area)

    async def one(n: int) -> tuple[int | None, bytes]:
        argv = sandbox.confine(
            ["bash", "-c", f"readlink ~/.link && touch ~/.cache/pip/{n}"], policy
        )
        process = await asyncio.create_subprocess_exec(
            *argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
        )
        out, _ = await process.communicate()
        return process.returncode, out

    results = await asyncio.gather(*(one(n) for n in range(6)))
    assert results == [(0, b".bashrc\n")] * 6
    assert sorted(p.name for p in (area / "store" / "home" / ".cache" / "pip").iterdir()) == [
        str(n) for n in range(6)
    ]


def test_state_dirs_are_checked() -> None:
    assert check_state_dirs(["./.cache//pip/", ".npm", ".npm"]) == (".cache/pip", ".npm")
    for bad in (["/abs"], ["../up"], [".cache/../.."], [""], [".local", ".local/state"]):
        with pytest.raises(ValueError, match="home_state_dirs"):
            check_state_dirs(bad)
    with pytest.raises(ValueError, match="list of strings"):
        check_state_dirs(".cache")  # type: ignore[arg-type]
    assert check_state_dirs(DEFAULT_STATE_DIRS) == DEFAULT_STATE_DIRS
    with pytest.raises(ValueError, match="home must be one of 'private', 'read-only'"):
        SandboxPolicyConfig(home="writable")  # type: ignore[arg-type]


async def test_the_home_store_is_per_owner_and_removed_at_disposal(tmp_path: Path) -> None:
    service = SandboxPolicyService(SandboxPolicyConfig(workspace_root=str(tmp_path)))
    first, second = Agent("a"), Agent("a")
    resolved = service.resolve(first)
    me = psutil.Process()
    assert resolved.home_dir is not None and resolved.home_state_dirs == DEFAULT_STATE_DIRS
    assert os.path.basename(resolved.home_dir).startswith(
        f"dsh-home-{me.pid}-{round(me.create_time() * 100)}-"
    )
    assert service.resolve(first).home_dir == resolved.home_dir
    assert service.resolve(second).home_dir not in (None, resolved.home_dir)
    os.mkdir(resolved.home_dir, 0o700)
    os.makedirs(os.path.join(resolved.home_dir, ".npm", "locked"))
    os.chmod(os.path.join(resolved.home_dir, ".npm"), 0o500)
    await first.dispose()
    assert not os.path.exists(resolved.home_dir)
    await second.dispose()
    read_only = SandboxPolicyService(
        SandboxPolicyConfig(workspace_root=str(tmp_path), home="read-only", home_state_dirs=[])
    )
    policy = read_only.resolve(Agent("c"))
    assert policy.home_dir is None and policy.tmp_dir is not None


def test_orphaned_home_stores_of_dead_hosts_are_swept(tmp_path: Path) -> None:
    from dsh_terminal_core.sandbox.policy import sweep_orphaned_tmp_dirs

    with subprocess.Popen(["true"]) as gone_host:
        dead = psutil.Process(gone_host.pid).create_time()
        gone_host.wait()
    me = psutil.Process()
    orphan = tmp_path / f"dsh-home-{gone_host.pid}-{round(dead * 100)}-{'a' * 24}"
    live = tmp_path / f"dsh-home-{me.pid}-{round(me.create_time() * 100)}-{'b' * 24}"
    for path in (orphan, live):
        (path / "sub").mkdir(parents=True)
    assert sweep_orphaned_tmp_dirs(str(tmp_path)) == [str(orphan)]
    assert live.is_dir() and not orphan.exists()
