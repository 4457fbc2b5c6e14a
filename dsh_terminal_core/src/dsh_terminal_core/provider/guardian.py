"""The host-death guardian: SIGKILLs every recorded terminal session once its host is gone.

Run as a standalone script (``python -I -S guardian.py``) with the read end of a pipe on
stdin; only the host holds the write end (close-on-exec, so no shell inherits it). The
host writes ``+ <sid> <starttime>`` when a terminal session starts and ``- <sid>`` when
it was torn down. End of file means the host died — however it died, SIGKILL included,
when no exit hook could run — and every session still recorded is killed: each process
whose POSIX session is a recorded one. A session whose leader pid now carries another
start time is skipped (the pid was reused). A process that left its session with
``setsid`` is not found; nothing else is spared.

Standard library only, no site packages: it starts in milliseconds and cannot be broken
by the host's environment.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time


# Its own parse of /proc/<pid>/stat (the package has procfs.read_stat): this script runs
# with -I -S and must import nothing from the package.
def _stat(pid: int) -> tuple[int, int] | None:
    """(session id, start time in clock ticks) of ``pid``, or None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            raw = handle.read()
    except OSError:
        return None
    fields = raw[raw.rfind(b")") + 2 :].split()
    try:
        return int(fields[3]), int(fields[19])
    except (IndexError, ValueError):
        return None


def _members(sessions: dict[int, int]) -> list[int]:
    live = {sid for sid, start in sessions.items() if (_stat(sid) or (sid, start))[1] == start}
    me = os.getpid()
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != me:
            stat = _stat(int(entry))
            if stat is not None and stat[0] in live:
                found.append(int(entry))
    return found


def _reap(sessions: dict[int, int]) -> None:
    # Members may fork while being killed; a few passes catch the stragglers.
    for _ in range(5):
        members = _members(sessions)
        if not members:
            return
        for pid in members:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.02)


def _serve(stream: int) -> dict[int, int]:
    sessions: dict[int, int] = {}
    pending = b""
    while True:
        try:
            data = os.read(stream, 65536)
        except InterruptedError:
            continue
        if not data:
            return sessions
        pending += data
        *lines, pending = pending.split(b"\n")
        for line in lines:
            parts = line.split()
            try:
                if len(parts) == 3 and parts[0] == b"+":
                    sessions[int(parts[1])] = int(parts[2])
                elif len(parts) == 2 and parts[0] == b"-":
                    sessions.pop(int(parts[1]), None)
            except ValueError:
                continue


def main() -> None:
    # Detach twice: a new session, so a signal to the host's process group spares the
    # guardian, and a second fork, so the host never has to reap it.
    if os.fork() > 0:
        os._exit(0)
    for sig in (signal.SIGHUP, signal.SIGINT, signal.SIGTERM, signal.SIGPIPE):
        signal.signal(sig, signal.SIG_IGN)
    sessions = _serve(sys.stdin.fileno())
    if sessions:
        _reap(sessions)


if __name__ == "__main__":
    main()
