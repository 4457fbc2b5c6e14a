"""Sandbox policy, the mode fence, and bubblewrap confinement enforced by a real ``bwrap``."""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import attrs
import psutil
import pytest

from dsh_terminal_core.kernel.agents import Agent
from dsh_terminal_core.kernel.errors import SandboxUnavailable, TerminalError
from dsh_terminal_core.sandbox import (
    BwrapConfig,
    BwrapSandbox,
    NetworkAccess,
    Policy,
    SandboxMode,
    SandboxPolicyConfig,
    SandboxPolicyService,
)

LOCKED_MESSAGE = (
    "cannot change sandbox mode from workspace-write to read-only while persistent "
    "terminal sessions are open or being created; close them first"
)


@pytest.fixture(scope="module")
def sandbox() -> BwrapSandbox:
    box = BwrapSandbox(BwrapConfig())
    if not box.available():
        pytest.skip(f"bwrap cannot run here: {box.unavailable_reason}")
    return box


@pytest.fixture
def area() -> Iterator[Path]:
    """A workspace and its sibling outside /tmp, since workspace-write makes /tmp writable."""
    base = Path(tempfile.mkdtemp(prefix="dsh-sandbox-", dir="/var/tmp"))
    (base / "ws").mkdir()
    (base / "sibling").mkdir()
    try:
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


def run_in(box: BwrapSandbox, policy: Policy, script: str) -> subprocess.CompletedProcess[str]:
    argv = box.confine(["bash", "-c", script], policy)
    return subprocess.run(
        argv, capture_output=True, text=True, timeout=30, check=False, stdin=subprocess.DEVNULL
    )


def unique(name: str) -> str:
    return f"dsh-sandbox-{name}-{uuid.uuid4().hex}"


# --- bubblewrap enforcement ---------------------------------------------------------------


@pytest.mark.bwrap
def test_read_only_blocks_every_host_write(sandbox: BwrapSandbox, area: Path) -> None:
    ws = area / "ws"
    policy = Policy(SandboxMode.READ_ONLY, str(ws))
    targets = [ws / unique("ws"), Path("/root") / unique("root"), Path("/var/tmp") / unique("v")]
    try:
        for target in targets:
            done = run_in(sandbox, policy, f"echo hi > {target}")
            assert done.returncode != 0, target
            assert "Read-only file system" in done.stderr, (target, done.stderr)
            assert not target.exists(), target
    finally:
        for target in targets:
            target.unlink(missing_ok=True)


@pytest.mark.bwrap
def test_read_only_tmp_is_private_and_never_reaches_the_host(
    sandbox: BwrapSandbox, area: Path
) -> None:
    policy = Policy(SandboxMode.READ_ONLY, str(area / "ws"))
    marker = Path("/tmp") / unique("host")
    marker.write_text("host")
    inner = Path("/tmp") / unique("inner")
    try:
        # Scratch space works inside, starts empty, and is gone from the host's view.
        done = run_in(sandbox, policy, f"test ! -e {marker} && echo x > {inner} && cat {inner}")
        assert done.returncode == 0, done.stderr
        assert done.stdout == "x\n"
        assert not inner.exists()
    finally:
        marker.unlink(missing_ok=True)
        inner.unlink(missing_ok=True)


@pytest.mark.bwrap
def test_read_only_still_reads_the_host(sandbox: BwrapSandbox, area: Path) -> None:
    (area / "ws" / "notes.txt").write_text("workspace data\n")
    policy = Policy(SandboxMode.READ_ONLY, str(area / "ws"))
    done = run_in(sandbox, policy, f"cat /etc/hostname && cat {area}/ws/notes.txt")
    assert done.returncode == 0, done.stderr
    assert done.stdout == Path("/etc/hostname").read_text() + "workspace data\n"


@pytest.mark.bwrap
def test_read_only_keeps_a_workspace_under_tmp_visible(
    sandbox: BwrapSandbox, tmp_path: Path
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "notes.txt").write_text("kept\n")
    policy = Policy(SandboxMode.READ_ONLY, str(ws))
    done = run_in(sandbox, policy, f"cat {ws}/notes.txt; echo y > {ws}/new")
    assert done.stdout == "kept\n"
    assert done.returncode != 0
    assert "Read-only file system" in done.stderr
    assert not (ws / "new").exists()


@pytest.mark.bwrap
def test_workspace_write_writes_only_the_workspace_and_its_private_tmp(
    sandbox: BwrapSandbox, area: Path
) -> None:
    ws = area / "ws"
    private = area / "private-tmp"
    policy = Policy(SandboxMode.WORKSPACE_WRITE, str(ws), tmp_dir=str(private))
    name = unique("tmp")
    try:
        done = run_in(sandbox, policy, f"echo inside > {ws}/made.txt && echo t > /tmp/{name}")
        assert done.returncode == 0, done.stderr
        assert (ws / "made.txt").read_text() == "inside\n"
        # /tmp inside is the private directory (created 0700 by confine), not the host's.
        assert (private / name).read_text() == "t\n"
        assert not (Path("/tmp") / name).exists()
        assert private.stat().st_mode & 0o777 == 0o700
    finally:
        (Path("/tmp") / name).unlink(missing_ok=True)
    for target in (area / "sibling" / "f", Path("/usr") / unique("usr"), area / "f"):
        done = run_in(sandbox, policy, f"echo no > {target}")
        assert done.returncode != 0, target
        assert "Read-only file system" in done.stderr, (target, done.stderr)
        assert not target.exists(), target


@pytest.mark.bwrap
def test_private_tmp_that_is_not_ours_is_refused(sandbox: BwrapSandbox, area: Path) -> None:
    decoy = area / "decoy"
    decoy.mkdir(mode=0o755)
    decoy.chmod(0o755)
    link = area / "link"
    link.symlink_to(decoy)
    for bad in (decoy, link):
        with pytest.raises(SandboxUnavailable, match="refusing to use"):
            sandbox.confine(
                ["bash"], Policy(SandboxMode.READ_ONLY, str(area / "ws"), tmp_dir=str(bad))
            )


def _nspid(pid: int) -> list[str] | None:
    """The NSpid line of a process, outermost namespace first; None once it has gone."""
    try:
        with open(f"/proc/{pid}/status") as status:
            return next(line for line in status if line.startswith("NSpid:")).split()[1:]
    except (FileNotFoundError, ProcessLookupError):
        return None


@pytest.mark.bwrap
def test_confined_shell_runs_in_its_own_pid_namespace(sandbox: BwrapSandbox, area: Path) -> None:
    ws = area / "ws"
    policy = Policy(SandboxMode.WORKSPACE_WRITE, str(ws))
    script = "pwd; echo $$; ls /proc | grep -c '^[0-9]'; read -r _ || true"
    argv = sandbox.confine(["bash", "-c", script], policy)
    with subprocess.Popen(
        argv, cwd=ws, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    ) as shell:
        assert shell.stdout is not None and shell.stdin is not None
        try:
            assert shell.stdout.readline() == f"{ws}\n"
            # Inside, the shell has a small pid of its own namespace and sees only that
            # namespace; from the host it is a descendant of bwrap with a host pid, and
            # /proc/<host pid>/status maps one to the other.
            inner_pid = int(shell.stdout.readline())
            assert inner_pid < 10
            assert int(shell.stdout.readline()) < 10
            # The pipeline's `ls` and `grep` may still be exiting while the shell reads, so
            # a descendant can vanish between the listing and the look at it.
            mapped = {
                pid: nspid
                for pid in (p.pid for p in psutil.Process(shell.pid).children(recursive=True))
                if (nspid := _nspid(pid)) is not None
            }
            [host_pid] = [pid for pid, nspid in mapped.items() if nspid[-1] == str(inner_pid)]
            assert mapped[host_pid] == [str(host_pid), str(inner_pid)]
            assert psutil.Process(host_pid).name() == "bash"
        finally:
            shell.stdin.close()
            assert shell.wait(timeout=10) == 0


@pytest.mark.bwrap
@pytest.mark.parametrize("network", ["none", "host"])
def test_confine_argv_shape(sandbox: BwrapSandbox, area: Path, network: str) -> None:
    argv = ["/bin/bash", "--noprofile", "--norc", "-i"]
    policy = Policy(SandboxMode.WORKSPACE_WRITE, str(area / "ws"), network=network)
    confined = sandbox.confine(argv, policy)
    assert confined[0] == sandbox.executable
    assert os.path.isabs(confined[0])
    assert confined[-5:] == ["--", *argv]
    for required in (
        "--die-with-parent",
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup",
    ):
        assert required in confined
    assert confined[confined.index("--cap-drop") + 1] == "ALL"
    assert ("--unshare-net" in confined) is (network == "none")
    unset = {confined[i + 1] for i, arg in enumerate(confined) if arg == "--unsetenv"}
    assert unset >= {"SSH_AUTH_SOCK", "DBUS_SESSION_BUS_ADDRESS", "TMUX", "XDG_RUNTIME_DIR"}
    assert confined[confined.index("/run") - 1] == "--tmpfs"
    for forbidden in ("--new-session", "--unshare-all", "--unshare-user", "--share-net"):
        assert forbidden not in confined


@pytest.mark.bwrap
def test_runtime_dir_outside_run_is_hidden_too(
    sandbox: BwrapSandbox, area: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runtime = area / "runtime"
    runtime.mkdir()
    (runtime / "bus").write_text("a socket would live here")
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    policy = Policy(SandboxMode.READ_ONLY, str(area / "ws"))
    done = run_in(sandbox, policy, f"ls -A {runtime}; echo ${{XDG_RUNTIME_DIR:-unset}}")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "unset\n"


@pytest.mark.bwrap
@pytest.mark.parametrize("network", ["none", "host"])
def test_dns_under_run_stays_readable_with_the_host_network(
    sandbox: BwrapSandbox, area: Path, monkeypatch: pytest.MonkeyPatch, network: str
) -> None:
    from dsh_terminal_core.sandbox import bwrap

    run_dir = Path(tempfile.mkdtemp(prefix="dsh-dns-", dir="/run"))
    try:
        (run_dir / "resolv.conf").write_text("nameserver 127.0.0.53\n")
        (area / "resolv.conf").symlink_to(run_dir / "resolv.conf")
        monkeypatch.setattr(bwrap, "_DNS_FILES", (str(area / "resolv.conf"),))
        policy = Policy(SandboxMode.READ_ONLY, str(area / "ws"), network=network)
        done = run_in(sandbox, policy, f"cat {area}/resolv.conf; ls -A /run")
        if network == "host":
            assert done.stdout.startswith("nameserver 127.0.0.53\n"), done.stderr
            assert done.stdout.splitlines()[1:] == [run_dir.name]  # nothing else of /run
        else:
            assert done.stdout == "" and "No such file" in done.stderr
    finally:
        shutil.rmtree(run_dir)


@pytest.mark.bwrap
def test_die_with_parent_kills_the_sandboxed_command(sandbox: BwrapSandbox, area: Path) -> None:
    argv = sandbox.confine(["sleep", "1000"], Policy(SandboxMode.WORKSPACE_WRITE, str(area / "ws")))
    parent_code = (
        "import json, subprocess, sys\n"
        "child = subprocess.Popen(json.loads(sys.argv[1]))\n"
        "print(child.pid, flush=True)\n"
        "child.wait()\n"
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", parent_code, json.dumps(argv)], stdout=subprocess.PIPE, text=True
    )
    watched: list[psutil.Process] = []
    try:
        assert parent.stdout is not None
        bwrap = psutil.Process(int(parent.stdout.readline()))
        watched.append(bwrap)
        deadline = time.monotonic() + 10
        sleeper: psutil.Process | None = None
        while sleeper is None and time.monotonic() < deadline:
            sleeper = next((p for p in bwrap.children(recursive=True) if p.name() == "sleep"), None)
            if sleeper is None:
                time.sleep(0.01)
        assert sleeper is not None, "the sandboxed sleep never started"
        watched.append(sleeper)

        parent.kill()
        parent.wait(timeout=10)

        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and any(_alive(p) for p in watched):
            time.sleep(0.02)
        assert not any(_alive(p) for p in watched), "sandboxed process outlived its parent"
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait(timeout=10)
        if parent.stdout is not None:
            parent.stdout.close()
        for proc in watched:
            if _alive(proc):
                proc.kill()  # psutil re-checks the start time, so never a reused pid


def _alive(proc: psutil.Process) -> bool:
    try:
        return bool(proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return False


# --- availability ---------------------------------------------------------------------------


def test_danger_full_access_returns_argv_unchanged() -> None:
    box = BwrapSandbox(BwrapConfig(bwrap_path="/nonexistent/bwrap"))
    argv = ("bash", "-i")
    confined = box.confine(argv, Policy(SandboxMode.DANGER_FULL_ACCESS, "/"))
    assert confined == ["bash", "-i"]
    assert isinstance(confined, list)


@pytest.mark.parametrize("mode", [SandboxMode.READ_ONLY, SandboxMode.WORKSPACE_WRITE])
def test_missing_bwrap_refuses_confined_modes(mode: SandboxMode) -> None:
    box = BwrapSandbox(BwrapConfig(bwrap_path="/nonexistent/bwrap"))
    assert box.available() is False
    assert box.executable is None
    assert "/nonexistent/bwrap" in (box.unavailable_reason or "")
    with pytest.raises(SandboxUnavailable) as caught:
        box.confine(["bash"], Policy(mode, "/"))
    message = str(caught.value)
    assert caught.value.code == "SANDBOX_UNAVAILABLE"
    assert isinstance(caught.value, TerminalError)
    assert f"sandbox mode '{mode.value}'" in message
    assert "install bubblewrap (e.g. apt-get install bubblewrap)" in message
    assert "choose sandbox mode 'danger-full-access' explicitly" in message


def test_bwrap_that_cannot_create_namespaces_is_unavailable(tmp_path: Path) -> None:
    fake = tmp_path / "bwrap"
    fake.write_text(
        "#!/bin/sh\necho 'bwrap: No permissions to create a new namespace' >&2\nexit 1\n"
    )
    fake.chmod(0o755)
    box = BwrapSandbox(BwrapConfig(bwrap_path=str(fake)))
    assert box.available() is False
    reason = box.unavailable_reason or ""
    assert "No permissions to create a new namespace" in reason
    with pytest.raises(SandboxUnavailable, match="No permissions to create a new namespace"):
        box.confine(["bash"], Policy(SandboxMode.READ_ONLY, "/"))


def test_bwrap_missing_from_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    box = BwrapSandbox()
    assert not box.available()
    assert box.unavailable_reason == "it was not found on PATH"


@pytest.mark.bwrap
def test_confine_rejects_a_vanished_workspace(sandbox: BwrapSandbox, tmp_path: Path) -> None:
    with pytest.raises(TerminalError) as caught:
        sandbox.confine(["bash"], Policy(SandboxMode.WORKSPACE_WRITE, str(tmp_path / "gone")))
    assert caught.value.code == "INVALID_ARGUMENT"


def test_confine_rejects_empty_argv() -> None:
    with pytest.raises(TerminalError) as caught:
        BwrapSandbox().confine([], Policy(SandboxMode.DANGER_FULL_ACCESS, "/"))
    assert caught.value.code == "INVALID_ARGUMENT"


# --- policy ---------------------------------------------------------------------------------


def test_default_is_workspace_write_over_cwd(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    service = SandboxPolicyService(SandboxPolicyConfig())
    policy = service.resolve(Agent("a"))
    expected = Policy(SandboxMode.WORKSPACE_WRITE, os.path.realpath(tmp_path))
    assert attrs.evolve(policy, tmp_dir=None, home_dir=None) == expected == service.default
    assert policy.confined and policy.network is NetworkAccess.NONE


def test_configured_mode_and_root(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    config = SandboxPolicyConfig(mode="read-only", workspace_root=str(tmp_path / "link"))
    assert config.mode is SandboxMode.READ_ONLY
    assert config.workspace_root == os.path.realpath(tmp_path / "real")
    policy = SandboxPolicyService(config).resolve(Agent("a"))
    assert policy.mode is SandboxMode.READ_ONLY
    assert policy.workspace_root == config.workspace_root
    assert not Policy(SandboxMode.DANGER_FULL_ACCESS, "/").confined


def test_override_is_per_owner_object(tmp_path: Path) -> None:
    service = SandboxPolicyService(SandboxPolicyConfig(workspace_root=str(tmp_path)))
    first, namesake = Agent("same"), Agent("same")
    assert service.set_mode(first, "read-only").mode is SandboxMode.READ_ONLY
    resolved = service.resolve(first)
    assert (resolved.mode, resolved.workspace_root) == (SandboxMode.READ_ONLY, str(tmp_path))
    assert service.resolve(namesake).mode is SandboxMode.WORKSPACE_WRITE
    service.forget(first)
    assert service.resolve(first).mode is SandboxMode.WORKSPACE_WRITE
    service.forget(first)  # harmless twice


def test_mode_fence(tmp_path: Path) -> None:
    busy: set[int] = set()
    asked: list[Agent] = []

    def activity(owner: Agent) -> bool:
        asked.append(owner)
        return id(owner) in busy

    service = SandboxPolicyService(
        SandboxPolicyConfig(workspace_root=str(tmp_path)), activity=activity
    )
    agent = Agent("a")
    busy.add(id(agent))

    with pytest.raises(TerminalError) as caught:
        service.set_mode(agent, SandboxMode.READ_ONLY)
    assert caught.value.code == "SANDBOX_MODE_LOCKED"
    assert str(caught.value) == LOCKED_MESSAGE
    assert asked[-1] is agent
    assert service.resolve(agent).mode is SandboxMode.WORKSPACE_WRITE

    # Re-asserting the effective mode is always allowed, even with sessions open.
    assert service.set_mode(agent, "workspace-write").mode is SandboxMode.WORKSPACE_WRITE

    busy.clear()
    assert service.set_mode(agent, "read-only").mode is SandboxMode.READ_ONLY
    busy.add(id(agent))
    assert service.set_mode(agent, "read-only").mode is SandboxMode.READ_ONLY
    with pytest.raises(TerminalError, match="from read-only to danger-full-access"):
        service.set_mode(agent, "danger-full-access")


def test_activity_probe_from_constructor(tmp_path: Path) -> None:
    service = SandboxPolicyService(
        SandboxPolicyConfig(workspace_root=str(tmp_path)), activity=lambda owner: True
    )
    with pytest.raises(TerminalError, match="close them first"):
        service.set_mode(Agent("a"), "danger-full-access")


def test_set_mode_rejects_unknown_mode(tmp_path: Path) -> None:
    service = SandboxPolicyService(SandboxPolicyConfig(workspace_root=str(tmp_path)))
    with pytest.raises(TerminalError) as caught:
        service.set_mode(Agent("a"), "full")
    assert caught.value.code == "INVALID_ARGUMENT"
    assert "'danger-full-access'" in str(caught.value)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"mode": "bogus"}, "'read-only', 'workspace-write', 'danger-full-access'"),
        ({"mode": 3}, "sandbox mode must be one of"),
        ({"workspace_root": "relative/dir"}, "absolute path"),
        ({"workspace_root": "/nonexistent/dsh-workspace"}, "does not exist"),
        ({"workspace_root": ""}, "non-empty"),
        ({"network": "bridge"}, "network must be one of 'none', 'host'"),
        ({"network": None}, "network must be one of"),
    ],
)
def test_config_validation(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        SandboxPolicyConfig(**kwargs)  # type: ignore[arg-type]


def test_policy_requires_absolute_root() -> None:
    with pytest.raises(ValueError, match="absolute"):
        Policy(SandboxMode.READ_ONLY, "ws")


def test_bwrap_config_validation() -> None:
    with pytest.raises(ValueError, match="bwrap_path"):
        BwrapConfig(bwrap_path="")


# --- the owner's private /tmp and the network setting ------------------------------------


def test_network_is_none_unless_the_operator_opts_in(tmp_path: Path) -> None:
    default = SandboxPolicyService(SandboxPolicyConfig(workspace_root=str(tmp_path)))
    assert default.resolve(Agent("a")).network is NetworkAccess.NONE
    opted = SandboxPolicyService(SandboxPolicyConfig(workspace_root=str(tmp_path), network="host"))
    assert opted.resolve(Agent("a")).network == "host"
    assert opted.set_mode(Agent("b"), "read-only").network is NetworkAccess.HOST


async def test_private_tmp_is_per_owner_stable_and_removed_at_disposal(tmp_path: Path) -> None:
    service = SandboxPolicyService(SandboxPolicyConfig(workspace_root=str(tmp_path)))
    first, second, free = Agent("a"), Agent("a"), Agent("c")
    path = service.resolve(first).tmp_dir
    assert path is not None and os.path.dirname(path) == tempfile.gettempdir()
    assert service.resolve(first).tmp_dir == path  # shared by all of first's sessions
    assert service.resolve(second).tmp_dir not in (None, path)
    service.set_mode(free, "danger-full-access")
    assert service.resolve(free).tmp_dir is None
    # Named, not created: the sandbox makes it when the first confined shell starts.
    assert not os.path.exists(path)
    os.mkdir(path, 0o700)
    os.makedirs(os.path.join(path, "deep", "locked"))
    os.chmod(os.path.join(path, "deep"), 0o500)
    seen_during_other_effects: list[bool] = []
    # An effect registered later (a session close) still runs before the removal.
    first.on_dispose(lambda: seen_during_other_effects.append(os.path.isdir(path)))
    await first.dispose()
    assert seen_during_other_effects == [True]
    assert not os.path.exists(path)
    assert service.resolve(first).tmp_dir == path  # a disposed owner gets no new one
    late = Agent("late")
    await late.dispose()
    assert service.resolve(late).tmp_dir is None  # would never be removed: not named
    await second.dispose()  # never created: nothing to remove, no error


@pytest.mark.bwrap
def test_a_sandbox_pid_1_is_known_to_drop_signals_from_outside(
    sandbox: BwrapSandbox, area: Path
) -> None:
    """Teardown must not wait for a polite signal to reach bwrap's pid 1: the kernel drops
    every signal from outside the namespace that pid 1 has no handler for."""
    from dsh_terminal_core.provider.process_table import ProcfsProcessTable

    table = ProcfsProcessTable()
    argv = sandbox.confine(["sleep", "1000"], Policy(SandboxMode.READ_ONLY, str(area / "ws")))
    checked = (signal.SIGTERM, signal.SIGHUP, signal.SIGCONT)
    # An ignored disposition survives exec: a suite run under nohup would hand the sleeper
    # an ignored SIGHUP. The child starts from the defaults, as the fork server's do.
    inherited = {sig: signal.signal(sig, signal.SIG_DFL) for sig in checked}
    try:
        outer = subprocess.Popen(argv, stdin=subprocess.DEVNULL)
    finally:
        for sig, handler in inherited.items():
            signal.signal(sig, handler)
    with outer:
        try:
            deadline = time.monotonic() + 10
            tree: list[psutil.Process] = []
            while time.monotonic() < deadline:
                tree = psutil.Process(outer.pid).children(recursive=True)
                if len(tree) >= 2 and tree[-1].name() == "sleep":
                    break
                time.sleep(0.01)
            init, sleeper = tree[0], tree[-1]
            assert sleeper.name() == "sleep"
            init_id, sleeper_id = table.lookup(init.pid), table.lookup(sleeper.pid)
            assert init_id is not None and sleeper_id is not None
            for sig in checked:
                assert table.ignores(init_id.identity, sig) is True
                assert table.ignores(sleeper_id.identity, sig) is False
            assert table.ignores(init_id.identity, signal.SIGKILL) is False
            outer_id = table.lookup(outer.pid)
            assert (
                outer_id is not None and table.ignores(outer_id.identity, signal.SIGTERM) is False
            )
        finally:
            outer.kill()
            outer.wait(timeout=10)


def test_orphaned_private_tmp_dirs_of_dead_hosts_are_swept(tmp_path: Path) -> None:
    from dsh_terminal_core.sandbox.policy import sweep_orphaned_tmp_dirs

    with subprocess.Popen(["true"]) as gone_host:
        dead = psutil.Process(gone_host.pid).create_time()
        gone_host.wait()
    me = psutil.Process()
    orphan = tmp_path / f"dsh-tmp-{gone_host.pid}-{round(dead * 100)}-{'a' * 24}"
    live = tmp_path / f"dsh-tmp-{me.pid}-{round(me.create_time() * 100)}-{'b' * 24}"
    reused = tmp_path / f"dsh-tmp-{me.pid}-{round(me.create_time() * 100) - 1}-{'c' * 24}"
    unrelated = tmp_path / "dsh-tmp-not-ours"
    for path in (orphan, live, reused, unrelated):
        (path / "sub").mkdir(parents=True)
    (orphan / "sub").chmod(0o500)
    removed = sweep_orphaned_tmp_dirs(str(tmp_path))
    # A live host keeps its directories; a dead one's (or a pid now reused) are removed.
    assert sorted(removed) == sorted([str(orphan), str(reused)])
    assert live.is_dir() and unrelated.is_dir()
    assert not orphan.exists() and not reused.exists()


def test_the_owner_tmp_name_carries_its_hosts_identity(tmp_path: Path) -> None:
    service = SandboxPolicyService(SandboxPolicyConfig(workspace_root=str(tmp_path)))
    path = service.resolve(Agent("a")).tmp_dir
    me = psutil.Process()
    assert path is not None
    assert os.path.basename(path).startswith(f"dsh-tmp-{me.pid}-{round(me.create_time() * 100)}-")


def test_sweeping_a_private_tmp_leaves_the_shared_directory_it_is_in_as_it_was(
    tmp_path: Path,
) -> None:
    """A private ``/tmp`` whose own removal fails (here a mount point, EBUSY; a sweep
    racing another gets ENOENT) once made the retry chmod its parent, the host's
    ``/tmp``, to 0700 — silently, as the sweep goes on past what it cannot remove."""
    from dsh_terminal_core.sandbox.policy import sweep_orphaned_tmp_dirs

    with subprocess.Popen(["true"]) as gone_host:
        dead = psutil.Process(gone_host.pid).create_time()
        gone_host.wait()
    shared = tmp_path / "tmp"
    shared.mkdir()
    shared.chmod(0o1777)
    orphan = shared / f"dsh-tmp-{gone_host.pid}-{round(dead * 100)}-{'a' * 24}"
    orphan.mkdir(mode=0o700)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k,mode=700", "tmpfs", str(orphan)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip() or 'not root'}")
    try:
        (orphan / "deep").mkdir()
        (orphan / "deep" / "left").write_text("x")
        (orphan / "deep").chmod(0o500)
        assert sweep_orphaned_tmp_dirs(str(shared)) == []  # the mount point stays
        assert not (orphan / "deep").exists()  # what it held went
        assert stat.S_IMODE(shared.stat().st_mode) == 0o1777
    finally:
        subprocess.run(["umount", str(orphan)], capture_output=True, check=False)
