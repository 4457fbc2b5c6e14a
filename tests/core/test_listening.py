"""Listening sockets of a session's processes, read from ``/proc`` (§19.3).

Every socket here is made by a real child process, which prints what it made (ports,
socket inodes, pids) on a pipe once it has made it; the test reads that line instead of
sleeping. The ``start`` fixture kills each child's whole process group, waits for every
process the children reported (grandchildren included) and checks that no descriptor of
this process was left open.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from dsh_terminal_core.provider.inetdiag import listening_here
from dsh_terminal_core.provider.listening import (
    COMMAND_LIMIT,
    Listener,
    SocketRow,
    _descendants_by_parent,
    _read_tables,
    has_children,
    listeners,
    listening_in_session,
    parse_tcp_row,
    parse_unix_row,
    session_processes,
)

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")

# Makes the sockets its first argument lists, prints {"pid", "results"} and then waits to
# be killed.
_SERVER = r"""
import json, os, queue, signal, socket, sys, threading

kept, results = [], []

def inode(sock):
    kept.append(sock)
    return os.fstat(sock.fileno()).st_ino

def family(host):
    return socket.AF_INET6 if ":" in host else socket.AF_INET

for action, *args in json.loads(sys.argv[1]):
    if action == "tcp":
        sock = socket.socket(family(args[0]), socket.SOCK_STREAM)
        sock.bind((args[0], 0))
        sock.listen()
        results.append({"port": sock.getsockname()[1], "inode": inode(sock)})
    elif action == "bound":
        sock = socket.socket(family(args[0]), socket.SOCK_STREAM)
        sock.bind((args[0], 0))
        results.append({"port": sock.getsockname()[1], "inode": inode(sock)})
    elif action == "connected":
        server = socket.create_server(("127.0.0.1", 0))
        client = socket.create_connection(server.getsockname())
        accepted, _ = server.accept()
        server.close()
        results.append({"inodes": [inode(client), inode(accepted)]})
    elif action == "udp":
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.bind(("127.0.0.1", 0))
        results.append({"inode": inode(sock)})
    elif action == "pair":
        results.append({"inodes": [inode(end) for end in socket.socketpair()]})
    elif action in ("unix", "unix-bound"):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.bind(args[0])
        if action == "unix":
            sock.listen()
        results.append({"inode": inode(sock)})
    elif action == "fork":
        child = os.fork()
        if child == 0:
            while True:
                signal.pause()
        results.append({"child": child})
    elif action == "thread-fork":
        # The forking thread stays: its children stay its own, not the main thread's.
        forked = queue.Queue()
        def fork_and_stay():
            child = os.fork()
            if child == 0:
                while True:
                    signal.pause()
            forked.put(child)
            threading.Event().wait()
        threading.Thread(target=fork_and_stay, daemon=True).start()
        results.append({"child": forked.get()})
    elif action == "churn":
        print(json.dumps({"pid": os.getpid(), "results": results}), flush=True)
        while True:
            sock = socket.create_server(("127.0.0.1", 0))
            child = os.fork()
            if child == 0:
                os._exit(0)
            sock.close()
            os.waitpid(child, 0)

print(json.dumps({"pid": os.getpid(), "results": results}), flush=True)
while True:
    signal.pause()
"""

Report = dict[str, Any]
Start = Callable[..., Report]


def _open_fds() -> dict[str, str]:
    found = {}
    for name in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            found[name] = os.readlink(f"/proc/self/fd/{name}")
    return found


def _wait_gone(pidfd: int, pid: int) -> None:
    ready, _, _ = select.select([pidfd], [], [], 10.0)
    assert ready, f"process {pid} outlived its process group's SIGKILL"


@pytest.fixture
def start() -> Iterator[Start]:
    """Start socket-making children; all killed, waited and their pipes closed after."""
    fds_before = _open_fds()
    started: list[subprocess.Popen[bytes]] = []
    watched: list[tuple[int, int]] = []  # (pidfd, pid) of every process a child reported

    def _start(
        actions: Sequence[Sequence[str]],
        *,
        prefix: Sequence[str] = (),
        extra: Sequence[str] = (),
        shell: str | None = None,
    ) -> Report:
        argv = [*prefix, sys.executable, "-c", _SERVER, json.dumps(actions), *extra]
        if shell is not None:  # the script runs "$@" (the server's argv) as it likes
            argv = ["bash", "-c", shell, "bash", *argv]
        process = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, start_new_session=True
        )
        started.append(process)
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line, f"{argv[0]} exited before reporting its sockets"
        report: Report = json.loads(line)
        pids = [report["pid"]] + [r["child"] for r in report["results"] if "child" in r]
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                watched.append((os.pidfd_open(pid), pid))
        report["popen"] = process.pid
        return report

    try:
        yield _start
    finally:
        for process in started:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            assert process.stdin is not None and process.stdout is not None
            process.stdin.close()
            process.stdout.close()
        for pidfd, pid in watched:
            try:
                _wait_gone(pidfd, pid)
            finally:
                os.close(pidfd)
    assert _open_fds() == fds_before


def _bwrap_with_own_network() -> str | None:
    path = shutil.which("bwrap")
    if path is None:
        return None
    probe = subprocess.run(
        [path, "--unshare-net", "--dev-bind", "/", "/", "true"], capture_output=True
    )
    return path if probe.returncode == 0 else None


def _has_ipv6_loopback() -> bool:
    if not socket.has_ipv6:
        return False
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as sock:
            sock.bind(("::1", 0))
    except OSError:
        return False
    return True


def _short_dir(factory: pytest.TempPathFactory) -> Path:
    # sun_path holds 108 bytes; a test's own tmp_path can be longer than that.
    return factory.mktemp("unix")


# --- live sockets -------------------------------------------------------------------


def test_a_tcp_listener_on_ipv4_is_reported_with_its_port(start: Start) -> None:
    long_argument = "x" * (2 * COMMAND_LIMIT)
    report = start([["tcp", "127.0.0.1"]], extra=[long_argument])
    pid, (made,) = report["pid"], report["results"]

    (found,) = listeners([pid])

    assert (found.address, found.port, found.pid, found.inode) == (
        "127.0.0.1",
        made["port"],
        pid,
        made["inode"],
    )
    assert found.command.startswith(f"{sys.executable} -c ")
    assert len(found.command) == COMMAND_LIMIT and found.command.endswith("…")
    assert found.to_wire() == {
        "address": "127.0.0.1",
        "port": made["port"],
        "pid": pid,
        "command": found.command,
    }


def test_a_wildcard_tcp_listener_reads_as_any_address(start: Start) -> None:
    report = start([["tcp", "0.0.0.0"]])
    (found,) = listeners([report["pid"]])
    assert (found.address, found.port) == ("0.0.0.0", report["results"][0]["port"])


@pytest.mark.skipif(not _has_ipv6_loopback(), reason="this kernel has no IPv6 loopback")
def test_tcp_listeners_on_ipv6_are_reported_in_ipv6_text(start: Start) -> None:
    report = start([["tcp", "::1"], ["tcp", "::"], ["tcp", "::ffff:127.0.0.1"]])
    loopback, wildcard, mapped = report["results"]

    found = {(entry.address, entry.port) for entry in listeners([report["pid"]])}

    assert found == {
        ("::1", loopback["port"]),
        ("::", wildcard["port"]),
        ("::ffff:127.0.0.1", mapped["port"]),
    }


def test_the_kernel_dump_and_the_proc_tables_agree(
    start: Start, tmp_path_factory: pytest.TempPathFactory
) -> None:
    # This process's namespace is read by sock_diag, any other by its /proc tables.
    if listening_here() is None:
        pytest.skip("the kernel cannot be asked for TCP listeners by sock_diag here")
    hosts = ["127.0.0.1", "0.0.0.0"]
    if _has_ipv6_loopback():
        hosts += ["::1", "::", "::ffff:127.0.0.1"]
    path = str(_short_dir(tmp_path_factory) / "agree.sock")
    report = start(
        [["tcp", host] for host in hosts] + [["unix", path], ["bound", "127.0.0.1"], ["udp"]]
    )
    wanted = {made["inode"] for made in report["results"]}

    dumped = _read_tables(report["pid"], wanted, True)
    tabled = _read_tables(report["pid"], wanted, False)

    assert dumped == tabled
    assert dumped is not None
    assert sorted(dumped.values(), key=str) == sorted(
        [
            (host, made["port"])
            for host, made in zip(hosts, report["results"][: len(hosts)], strict=True)
        ]
        + [(path, None)],
        key=str,
    )


def test_a_listening_named_unix_socket_is_reported_by_its_path(
    start: Start, tmp_path_factory: pytest.TempPathFactory
) -> None:
    directory = _short_dir(tmp_path_factory)
    path = str(directory / "my server.sock")
    with_newline = str(directory / "two\nlines.sock")
    report = start(
        [
            ["unix", path],
            ["unix", with_newline],
            ["unix-bound", str(directory / "bound.sock")],
            ["unix", f"\0dsh-listening-{uuid.uuid4().hex}"],
        ]
    )
    named, newline, _, _ = report["results"]

    found = listeners([report["pid"]])

    assert sorted((entry.address, entry.port, entry.inode) for entry in found) == sorted(
        [(path, None, named["inode"]), (with_newline, None, newline["inode"])]
    )


def test_sockets_that_do_not_listen_are_not_reported(start: Start) -> None:
    quiet = start([["bound", "127.0.0.1"], ["connected"], ["udp"], ["pair"]])
    mixed = start([["bound", "127.0.0.1"], ["connected"], ["tcp", "127.0.0.1"]])

    assert listeners([quiet["pid"]]) == []
    (found,) = listeners([mixed["pid"]])
    assert found.inode == mixed["results"][2]["inode"]


def test_each_holder_of_a_socket_is_reported_once_and_the_order_is_stable(
    start: Start, tmp_path_factory: pytest.TempPathFactory
) -> None:
    path = str(_short_dir(tmp_path_factory) / "s.sock")
    report = start([["unix", path], ["tcp", "127.0.0.1"], ["tcp", "127.0.0.1"], ["fork"]])
    parent = report["pid"]
    unix, first, second, forked = report["results"]
    child = forked["child"]

    found = listeners([child, parent, parent, child])

    low, high = sorted([first["port"], second["port"]])
    holders = sorted([parent, child])
    assert [(entry.port, entry.pid) for entry in found] == [
        (low, holders[0]),
        (low, holders[1]),
        (high, holders[0]),
        (high, holders[1]),
        (None, holders[0]),
        (None, holders[1]),
    ]
    assert {entry.inode for entry in found if entry.port is None} == {unix["inode"]}


def test_grandchildren_are_found_through_the_descendants(start: Start) -> None:
    report = start([["tcp", "127.0.0.1"]], shell='"$@" & wait')
    # The wrapper's own report is the one the grandchild printed on the shared pipe.
    shell, grandchild = report["popen"], report["pid"]
    assert grandchild != shell

    descendants = session_processes(shell)

    assert grandchild in descendants
    assert set(_descendants_by_parent(shell)) == set(descendants)
    assert has_children(shell)
    (found,) = listening_in_session(shell)
    assert (found.pid, found.port) == (grandchild, report["results"][0]["port"])
    # The process passed in is the session's root and is not itself looked at.
    assert listening_in_session(grandchild) == []


def test_a_listener_in_its_own_network_namespace_is_found(start: Start) -> None:
    bwrap = _bwrap_with_own_network()
    if bwrap is None:
        pytest.skip("bwrap cannot create a network namespace here")
    report = start(
        [["tcp", "127.0.0.1"]],
        prefix=[bwrap, "--unshare-net", "--die-with-parent", "--dev-bind", "/", "/"],
    )
    server, made = report["pid"], report["results"][0]
    assert os.stat(f"/proc/{server}/ns/net").st_ino != os.stat("/proc/self/ns/net").st_ino

    (found,) = listening_in_session(report["popen"])

    assert (found.address, found.port, found.pid, found.inode) == (
        "127.0.0.1",
        made["port"],
        server,
        made["inode"],
    )
    for table in ("tcp", "tcp6"):
        rows = Path(f"/proc/self/net/{table}").read_bytes().splitlines()[1:]
        parsed = [parse_tcp_row(row, ipv6=table == "tcp6") for row in rows]
        assert made["inode"] not in {row.inode for row in parsed if row is not None}


def test_has_children_tells_a_leaf_from_a_parent(start: Start) -> None:
    leaf = start([["tcp", "127.0.0.1"]])
    parent = start([["fork"]])

    assert not has_children(leaf["pid"])
    assert session_processes(leaf["pid"]) == []
    assert listening_in_session(leaf["pid"]) == []
    assert has_children(parent["pid"])
    assert session_processes(parent["pid"]) == [parent["results"][0]["child"]]


def test_children_of_every_thread_are_descendants_but_has_children_reads_the_main_one(
    start: Start,
) -> None:
    report = start([["thread-fork"]])
    parent, child = report["pid"], report["results"][0]["child"]

    assert session_processes(parent) == [child]
    # The documented price of one read: a shell is single-threaded, this process is not.
    assert not has_children(parent)


def test_processes_that_are_gone_or_dead_are_skipped() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        # Exited but not reaped: a zombie, whose descriptors and namespaces are gone.
        os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)
        assert listeners([child.pid]) == []
        assert not has_children(child.pid)
        assert session_processes(child.pid) == []
    finally:
        child.wait()
    assert listeners([child.pid]) == []
    assert not has_children(child.pid)
    assert listening_in_session(child.pid) == []


def test_processes_exiting_while_they_are_read_do_not_raise(start: Start) -> None:
    # Forks a child holding a listener and reaps it, over and over: every walk races
    # children that appear, hold a socket and vanish between the reads.
    churner = start([["churn"]])["pid"]
    deadline = time.monotonic() + 1.0
    looks = 0
    while time.monotonic() < deadline or looks < 200:
        found = listening_in_session(churner)
        assert all(isinstance(entry, Listener) and entry.port for entry in found)
        looks += 1
    assert looks >= 200


# --- table rows -----------------------------------------------------------------------

little_endian = pytest.mark.skipif(
    sys.byteorder != "little", reason="the rows below are as a little-endian kernel prints"
)
_TCP_TAIL = b" 00000000:00000000 00:00000000 00000000  1000        0 4242 1 0 100 0 0 10 0"


@little_endian
@pytest.mark.parametrize(
    ("local", "state", "ipv6", "address", "port", "listening"),
    [
        (b"0100007F:1F90", b"0A", False, "127.0.0.1", 8080, True),
        (b"00000000:0016", b"0A", False, "0.0.0.0", 22, True),
        (b"0100007F:1F90", b"01", False, "127.0.0.1", 8080, False),
        (b"00000000000000000000000001000000:1F90", b"0A", True, "::1", 8080, True),
        (b"00000000000000000000000000000000:0050", b"0A", True, "::", 80, True),
        (b"B80D0120000000000000000001000000:01BB", b"0A", True, "2001:db8::1", 443, True),
        (b"0000000000000000FFFF00000100007F:1F90", b"0A", True, "::ffff:127.0.0.1", 8080, True),
    ],
)
def test_a_tcp_row_reads_its_address_word_by_word(
    local: bytes, state: bytes, ipv6: bool, address: str, port: int, listening: bool
) -> None:
    remote = b"0" * (32 if ipv6 else 8) + b":0000"
    line = b"   0: " + local + b" " + remote + b" " + state + _TCP_TAIL

    assert parse_tcp_row(line, ipv6=ipv6) == SocketRow(
        inode=4242, address=address, port=port, listening=listening
    )


def test_what_is_not_a_tcp_row_parses_as_none() -> None:
    header = (
        b"  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt"
        b"   uid  timeout inode"
    )
    assert parse_tcp_row(header, ipv6=False) is None
    assert parse_tcp_row(b"", ipv6=True) is None
    v4_in_v6_table = b"   0: 0100007F:1F90 00000000:0000 0A" + _TCP_TAIL
    assert parse_tcp_row(v4_in_v6_table, ipv6=True) is None


@pytest.mark.parametrize(
    ("line", "row"),
    [
        (
            b"0000000000000000: 00000002 00000000 00010000 0001 01 31337 /tmp/a dir/my sock",
            SocketRow(inode=31337, address="/tmp/a dir/my sock", port=None, listening=True),
        ),
        (
            b"ffff8a0b4c2d1e00: 00000002 00000000 00010000 0005 01   123  leading space",
            SocketRow(inode=123, address=" leading space", port=None, listening=True),
        ),
        (
            b"0000000000000000: 00000002 00000000 00010000 0001 01 31338 @/tmp/.X11-unix/X0",
            SocketRow(inode=31338, address="@/tmp/.X11-unix/X0", port=None, listening=True),
        ),
        (
            b"0000000000000000: 00000003 00000000 00000000 0001 03 31339 /run/app.sock",
            SocketRow(inode=31339, address="/run/app.sock", port=None, listening=False),
        ),
        (
            b"0000000000000000: 00000002 00000000 00000000 0002 01 31340",
            SocketRow(inode=31340, address=None, port=None, listening=False),
        ),
        (
            b"0000000000000000: 00000002 00000000 00010000 0001 01 31341 /tmp/two\nlines",
            SocketRow(inode=31341, address="/tmp/two\nlines", port=None, listening=True),
        ),
    ],
)
def test_a_unix_row_keeps_the_whole_path(line: bytes, row: SocketRow) -> None:
    assert parse_unix_row(line) == row


def test_what_is_not_a_unix_row_parses_as_none() -> None:
    assert parse_unix_row(b"Num       RefCount Protocol Flags    Type St Inode Path") is None
    assert parse_unix_row(b"lines.sock") is None
