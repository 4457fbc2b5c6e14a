"""A throwaway OpenSSH server on 127.0.0.1 for the ssh consumer's tests.

It runs in the foreground (``-D``) as a child of the test process, so every
per-connection sshd and every remote shell is a descendant the suite's leak check sees.
Root logs in by key only; the user ``dshpw`` may only use a password, which no test
ever types. A second port gives root ``/bin/sh -i`` (dash on Debian) instead of its
login shell, for the POSIX-sh side of the prompt protocol.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import attrs
import psutil

SSHD = shutil.which("sshd") or "/usr/sbin/sshd"
SSH_KEYGEN = shutil.which("ssh-keygen") or "/usr/bin/ssh-keygen"
PASSWORD_USER = "dshpw"


def available() -> str | None:
    """Why the tests cannot run here, or None."""
    if not os.path.exists(SSHD):
        return "sshd (openssh-server) is not installed"
    if shutil.which("ssh") is None:
        return "ssh (openssh-client) is not installed"
    if os.geteuid() != 0:
        return "the throwaway sshd needs root to switch to the logged-in user"
    return None


def keygen(path: Path, passphrase: str = "") -> Path:
    subprocess.run(
        [SSH_KEYGEN, "-q", "-t", "ed25519", "-N", passphrase, "-C", "dsh-test", "-f", str(path)],
        check=True,
    )
    return path


def _free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


@attrs.define
class Sshd:
    """One running server: where it listens, its keys, and its process."""

    host: str
    port: int
    directory: Path
    host_key: Path
    client_key: Path
    process: subprocess.Popen[bytes] | None = None
    sh_port: int = 0
    netns: str | None = None

    @property
    def known_hosts_name(self) -> str:
        """How a known-hosts file names this server."""
        return self.host if self.port == 22 else f"[{self.host}]:{self.port}"

    def connection_processes(self) -> list[psutil.Process]:
        """The per-connection sshd processes and everything under them (remote shells)."""
        assert self.process is not None
        try:
            return psutil.Process(self.process.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            return []

    def kill_connections(self) -> int:
        """SIGKILL every per-connection sshd (only processes this server started)."""
        killed = 0
        assert self.process is not None
        for child in psutil.Process(self.process.pid).children(recursive=False):
            with contextlib.suppress(psutil.Error):
                child.send_signal(signal.SIGKILL)
                killed += 1
        return killed

    def stop(self) -> None:
        if self.process is None:
            return
        for child in self.connection_processes():
            with contextlib.suppress(psutil.Error):
                child.kill()
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)
        self.process = None


def _config(
    directory: Path, host: str, ports: tuple[int, int], host_key: Path, authorized: Path
) -> Path:
    port, sh_port = ports
    path = directory / "sshd_config"
    path.write_text(
        f"""Port {port}
Port {sh_port}
ListenAddress {host}
HostKey {host_key}
PidFile none
AuthorizedKeysFile {authorized}
StrictModes no
UsePAM no
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
PrintMotd no
PrintLastLog no
Banner {directory / "banner"}
ClientAliveInterval 0
MaxStartups 100
MaxSessions 100
LogLevel ERROR
Match LocalPort {sh_port}
    ForceCommand exec /bin/sh -i
Match User {PASSWORD_USER}
    PasswordAuthentication yes
    PubkeyAuthentication no
    AuthenticationMethods password
"""
    )
    return path


@contextlib.contextmanager
def running_sshd(
    directory: Path, host: str = "127.0.0.1", netns: str | None = None
) -> Iterator[Sshd]:
    """Start sshd on a free port of ``host`` (inside ``netns`` when given); stop it after."""
    directory.mkdir(parents=True, exist_ok=True)
    host_key = keygen(directory / "host_key")
    client_key = keygen(directory / "client_key")
    authorized = directory / "authorized_keys"
    authorized.write_text((directory / "client_key.pub").read_text())
    (directory / "banner").write_text("dsh test server: authorized use only\n")
    # sshd refuses to start without its privilege-separation directory.
    os.makedirs("/run/sshd", mode=0o755, exist_ok=True)
    server = Sshd(host=host, port=0, directory=directory, host_key=host_key, client_key=client_key)
    for _attempt in range(5):
        port = _free_port(host) if netns is None else 22
        sh_port = _free_port(host) if netns is None else 2222
        config = _config(directory, host, (port, sh_port), host_key, authorized)
        argv = [SSHD, "-D", "-e", "-f", str(config)]
        if netns is not None:
            argv = ["ip", "netns", "exec", netns, *argv]
        with open(directory / "sshd.log", "ab") as log:
            process = subprocess.Popen(argv, stderr=log)
        if _listening(host, port, process, netns):
            server.port, server.process, server.netns = port, process, netns
            server.sh_port = sh_port
            break
        process.kill()
        process.wait()
    else:
        raise RuntimeError(f"sshd did not start: {(directory / 'sshd.log').read_text()[-2000:]}")
    try:
        yield server
    finally:
        server.stop()


def _listening(host: str, port: int, process: subprocess.Popen[bytes], netns: str | None) -> bool:
    """Wait until ``host:port`` accepts (reachable from here in both set-ups)."""
    del netns
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return False
        with socket.socket() as s:
            s.settimeout(1)
            if s.connect_ex((host, port)) == 0:
                return True
        time.sleep(0.05)
    return False


def netns_unavailable() -> str | None:
    """Why a second host in its own network namespace cannot be made here, or None."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    if shutil.which("ip") is None:
        return "iproute2 (ip) is not installed"
    probe = f"dshprobe{os.getpid()}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if made.returncode != 0:
        return f"this machine does not allow network namespaces: {made.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


@contextlib.contextmanager
def network_namespace() -> Iterator[tuple[str, str]]:
    """A namespace joined to this one by a veth pair; yields (name, its address).

    Names and the /30 come from this process's pid, so parallel runs do not collide;
    deleting the namespace and our end of the pair removes everything it made.
    """
    pid = os.getpid()
    name = f"dshssh{pid}"
    ours, theirs = f"dsv{pid}a", f"dsv{pid}b"
    block = (pid % 16000) * 4
    prefix = f"10.{200 + block // 65536 % 50}.{block // 256 % 256}"
    local, remote = f"{prefix}.{block % 256 + 1}", f"{prefix}.{block % 256 + 2}"
    steps = [
        ["ip", "netns", "add", name],
        ["ip", "link", "add", ours, "type", "veth", "peer", "name", theirs],
        ["ip", "link", "set", theirs, "netns", name],
        ["ip", "addr", "add", f"{local}/30", "dev", ours],
        ["ip", "link", "set", ours, "up"],
        ["ip", "netns", "exec", name, "ip", "addr", "add", f"{remote}/30", "dev", theirs],
        ["ip", "netns", "exec", name, "ip", "link", "set", theirs, "up"],
        ["ip", "netns", "exec", name, "ip", "link", "set", "lo", "up"],
    ]
    try:
        for step in steps:
            subprocess.run(step, check=True, capture_output=True)
        yield name, remote
    finally:
        subprocess.run(["ip", "link", "del", ours], capture_output=True)
        subprocess.run(["ip", "netns", "del", name], capture_output=True)
