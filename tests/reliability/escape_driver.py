"""Escape attempts from inside a sandboxed shell, driven through the real terminal tools.

The driver sets up host-side targets (a process, unix sockets in ``/tmp`` and under
``/run``, a TCP listener on 127.0.0.1, socket-carrying variables, a writable host
directory), opens a shell through ``terminal_open`` under the given policy, tries each
escape with ``terminal_send`` and reports, per escape, whether it got through. An
escape "got through" when its effect is seen from the host (the target died, the file
appeared, the listener accepted) or, for the capability probes, when the kernel got past
its capability check.

It runs in the test process (as whoever runs the suite) or as a script under another
uid (``python escape_driver.py '<json>'``, the report on stdout as JSON), so the same
attempts are made as root and as an unprivileged user.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

SOCKET_VARIABLES = {
    "SSH_AUTH_SOCK": "/tmp/ssh-escape/agent.1",
    "GPG_AGENT_INFO": "/run/user/0/gnupg/S.gpg-agent:0:1",
    "DBUS_SESSION_BUS_ADDRESS": "unix:path=/run/user/0/bus",
    "XDG_RUNTIME_DIR": "/run/user/0",
    "DOCKER_HOST": "unix:///var/run/docker.sock",
    "DISPLAY": ":0",
    "WAYLAND_DISPLAY": "wayland-0",
    "TMUX": "/tmp/tmux-0/default,1,0",
    "TMUX_PANE": "%0",
}

# Runs inside the sandbox (python3 from the host's read-only tree). Each action prints one
# line, "ESCAPED ..." or "BLOCKED ...".
PROBE = r"""
import ctypes, errno, os, platform, socket, sys

action, *args = sys.argv[1:]
libc = ctypes.CDLL(None, use_errno=True)

def report(ok, detail):
    print(("ESCAPED " if ok else "BLOCKED ") + detail)

if action == "ptrace":
    PTRACE_SEIZE, PTRACE_DETACH = 0x4206, 17
    libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
    rc = libc.ptrace(PTRACE_SEIZE, int(args[0]), None, None)
    err = ctypes.get_errno()
    if rc == 0:
        libc.ptrace(PTRACE_DETACH, int(args[0]), None, None)
    outcome = "attached" if rc == 0 else errno.errorcode.get(err, str(err))
    report(rc == 0, "ptrace seize -> " + outcome)
elif action in ("unix", "tcp"):
    family = socket.AF_UNIX if action == "unix" else socket.AF_INET
    target = args[0] if action == "unix" else ("127.0.0.1", int(args[0]))
    if action == "unix" and target.startswith("@"):
        target = "\0" + target[1:]  # an abstract socket: no file, scoped by network namespace
    s = socket.socket(family, socket.SOCK_STREAM)
    s.settimeout(5)
    try:
        s.connect(target)
        report(True, "connected to " + str(target))
    except OSError as exc:
        report(False, type(exc).__name__ + ": " + str(exc))
    finally:
        s.close()
elif action == "module":
    number = {"x86_64": 313, "aarch64": 273}[platform.machine()]
    fd = os.open("/dev/null", os.O_RDONLY)
    rc = libc.syscall(number, fd, b"", 0)
    err = ctypes.get_errno()
    name = errno.errorcode.get(err, str(err)) if rc != 0 else "loaded"
    line = [l for l in open("/proc/self/status") if l.startswith("CapEff:")][0]
    held = bool(int(line.split()[1], 16) & (1 << 16))
    # EPERM is the capability check; ENOSYS a kernel built without modules; anything else
    # means the kernel went on to parse the (empty) module, i.e. CAP_SYS_MODULE was there.
    report(held or err not in (errno.EPERM, errno.ENOSYS),
           "finit_module -> " + name + ", CAP_SYS_MODULE " + ("held" if held else "dropped"))
elif action == "capeff":
    line = [l for l in open("/proc/self/status") if l.startswith("CapEff:")][0]
    report(int(line.split()[1], 16) != 0, line.strip())
"""


def _listen_unix(path: str) -> socket.socket:
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(8)
    server.setblocking(False)
    return server


def _listen_tcp() -> socket.socket:
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.setblocking(False)
    return server


def _accepted(server: socket.socket) -> bool:
    """True if a connection is waiting or was made (the probe connects, then writes)."""
    try:
        conn, _ = server.accept()
    except BlockingIOError:
        return False
    conn.close()
    return True


@contextlib.contextmanager
def _environment(values: dict[str, str]) -> Iterator[None]:
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@contextlib.asynccontextmanager
async def _shell(config: dict[str, Any]) -> AsyncIterator[Any]:
    from dsh_terminal_core.kernel.harness import Harness

    async with Harness(config=config) as h:
        agent = h.create_agent("escape")
        opened = await h.call_tool(agent, "terminal_open", {"type": "shell"})
        assert not opened.is_error, opened.text
        sid = opened.value["sessionId"]

        async def run(command: str) -> str:
            result = await h.call_tool(agent, "terminal_send", {"sessionId": sid, "text": command})
            assert result.value["waitReason"] == "stdin_read", result.text
            return str(result.value["viewport"])

        yield run


async def _dies(proc: subprocess.Popen[bytes]) -> bool:
    """True if ``proc`` exits within two seconds (a delivered SIGTERM kills ``sleep`` at once)."""
    try:
        await asyncio.to_thread(proc.wait, 2.0)
    except subprocess.TimeoutExpired:
        return False
    return True


def _verdict(output: str) -> tuple[bool, str]:
    for line in output.splitlines():
        if line.startswith(("ESCAPED ", "BLOCKED ")):
            return line.startswith("ESCAPED "), line.split(" ", 1)[1]
    return False, output.strip()[-200:]


async def run_escapes(
    mode: str, network: str | None, workspace: str, run_dir: str, outside_dir: str
) -> dict[str, dict[str, Any]]:
    """Try every escape under ``mode``; return ``{escape: {"escaped": bool, "detail": str}}``.

    ``run_dir`` is a directory under ``/run`` and ``outside_dir`` one outside the
    workspace and ``/tmp``, both writable by the caller (the test prepares them).
    """
    nonce = secrets.token_hex(6)
    Path(workspace, "probe.py").write_text(PROBE)
    policy: dict[str, Any] = {"mode": mode, "workspace_root": workspace}
    if network is not None:
        policy["network"] = network
    tmp_file = f"/tmp/dsh-escape-{nonce}"
    tmp_sock = f"/tmp/dsh-escape-{nonce}.sock"
    run_sock = os.path.join(run_dir, f"escape-{nonce}.sock")
    root_file = os.path.join(outside_dir, f"via-proc-root-{nonce}")
    abstract = f"dsh-escape-{nonce}"
    servers = {"tmp_socket": _listen_unix(tmp_sock), "run_socket": _listen_unix(run_sock)}
    servers["abstract_socket"] = _listen_unix("\0" + abstract)
    servers["tcp_loopback"] = _listen_tcp()
    port = servers["tcp_loopback"].getsockname()[1]
    target = subprocess.Popen(["sleep", "300"], stdin=subprocess.DEVNULL)
    traced = subprocess.Popen(["sleep", "300"], stdin=subprocess.DEVNULL)
    report: dict[str, dict[str, Any]] = {}

    def note(name: str, escaped: bool, detail: str, command: str) -> None:
        report[name] = {"escaped": escaped, "detail": detail, "command": command}

    try:
        with _environment(SOCKET_VARIABLES):
            async with _shell({"sandbox-policy": policy}) as run:
                me = os.getpid()
                command = f"kill -TERM {target.pid}; echo rc=$?"
                out = await run(command)
                # Only a delivered signal (rc=0) is worth waiting for; otherwise the
                # target must simply still be there.
                killed = await _dies(target) if out.strip().endswith("rc=0") else False
                note(
                    "signal a host process",
                    killed or target.poll() is not None,
                    out.strip(),
                    command,
                )

                command = f"python3 probe.py ptrace {traced.pid}"
                note("ptrace a host process", *_verdict(await run(command)), command)

                command = (
                    f"test -e /proc/{me}/status && echo ESCAPED host pid {me} visible, "
                    "$(ls /proc | grep -c '^[0-9]') pids || echo BLOCKED host pid not visible, "
                    "$(ls /proc | grep -c '^[0-9]') pids"
                )
                note("see host pids in /proc", *_verdict(await run(command)), command)

                command = f"echo x > {tmp_file}; echo rc=$?"
                out = await run(command)
                note("write the host's /tmp", os.path.exists(tmp_file), out.strip(), command)

                for name, path in (("tmp_socket", tmp_sock), ("run_socket", run_sock)):
                    command = f"python3 probe.py unix {path}"
                    escaped, detail = _verdict(await run(command))
                    escaped = _accepted(servers[name]) or escaped
                    label = (
                        "reach a socket in the host's /tmp"
                        if name == "tmp_socket"
                        else "connect to a unix socket under /run"
                    )
                    note(label, escaped, detail, command)

                command = f"python3 probe.py unix @{abstract}"
                escaped, detail = _verdict(await run(command))
                escaped = _accepted(servers["abstract_socket"]) or escaped
                note("connect to a host abstract unix socket", escaped, detail, command)

                command = f"python3 probe.py tcp {port}"
                escaped, detail = _verdict(await run(command))
                escaped = _accepted(servers["tcp_loopback"]) or escaped
                note("connect to a host TCP service on 127.0.0.1", escaped, detail, command)

                names = "|".join(SOCKET_VARIABLES)
                command = f"env | grep -E '^({names})=' ; echo done"
                out = await run(command)
                leaked = [line for line in out.splitlines() if "=" in line]
                note(
                    "read a socket variable from the environment",
                    bool(leaked),
                    ", ".join(leaked) or "none",
                    command,
                )

                command = "python3 probe.py module"
                note("load a kernel module", *_verdict(await run(command)), command)

                command = "ip link set lo up 2>&1; echo rc=$?"
                out = await run(command)
                note(
                    "change a network interface", out.strip().endswith("rc=0"), out.strip(), command
                )

                command = "python3 probe.py capeff"
                note("keep any capability", *_verdict(await run(command)), command)

                command = f"echo x > /proc/{me}/root{root_file}; echo rc=$?"
                out = await run(command)
                note(
                    "write through /proc/<host pid>/root",
                    os.path.exists(root_file),
                    out.strip(),
                    command,
                )
    finally:
        for proc in (target, traced):
            proc.send_signal(signal.SIGKILL)
            proc.wait()
        for server in servers.values():
            server.close()
        for path in (tmp_file, tmp_sock, run_sock, root_file):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
    return report


def main() -> None:
    args = json.loads(sys.argv[1])
    tempfile.tempdir = args.get("tempdir")
    report = asyncio.run(
        run_escapes(
            args["mode"],
            args.get("network"),
            args["workspace"],
            args["run_dir"],
            args["outside_dir"],
        )
    )
    print(json.dumps(report))


if __name__ == "__main__":
    main()
