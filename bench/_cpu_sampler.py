"""Run a module under an on-CPU stack sampler; write the folded stacks when it exits.

    python3 bench/_cpu_sampler.py OUT -m module [args...]

``ITIMER_PROF`` counts the process's own CPU time (user and system), so a sample is
taken only while the process runs: a thread waiting in ``epoll`` or preempted by the
shell it just woke costs nothing, which is what misled py-spy here (it counts a
preempted thread as busy). The signal is handled on the main thread between bytecodes,
so a system call's time lands on the Python line that made it. The kernel delivers the
timer at its tick (4 ms here), so a profile needs some thousands of samples: tens of
seconds of CPU.

Sampling starts paused when ``DSH_SAMPLE_PAUSED=1`` and each ``SIGUSR2`` toggles it, so
a driver can leave out the server's start-up and warm-up. Each line of ``OUT`` is a
stack, ``file:function:line`` frames joined by ``;`` from the root, and its count.
"""

from __future__ import annotations

import collections
import os
import runpy
import signal
import sys
from types import FrameType

_PERIOD_S = 0.0002


class _Sampler:
    def __init__(self, out: str, paused: bool) -> None:
        self.out = out
        self.on = not paused
        self.stacks: collections.Counter[str] = collections.Counter()

    def sample(self, _signum: int, frame: FrameType | None) -> None:
        if not self.on:
            return
        frames = []
        while frame is not None:
            code = frame.f_code
            frames.append(f"{code.co_filename}:{code.co_name}:{frame.f_lineno}")
            frame = frame.f_back
        self.stacks[";".join(reversed(frames))] += 1

    def toggle(self, _signum: int, _frame: FrameType | None) -> None:
        self.on = not self.on

    def write(self) -> None:
        signal.setitimer(signal.ITIMER_PROF, 0)
        with open(self.out, "w") as out:
            for stack, count in self.stacks.items():
                out.write(f"{stack} {count}\n")


def main() -> None:
    if len(sys.argv) < 4 or sys.argv[2] != "-m":
        raise SystemExit("usage: _cpu_sampler.py OUT -m module [args...]")
    out, module = sys.argv[1], sys.argv[3]
    sampler = _Sampler(out, os.environ.get("DSH_SAMPLE_PAUSED") == "1")
    signal.signal(signal.SIGPROF, sampler.sample)
    signal.signal(signal.SIGUSR2, sampler.toggle)
    signal.setitimer(signal.ITIMER_PROF, _PERIOD_S, _PERIOD_S)
    sys.argv = [module, *sys.argv[4:]]
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    finally:
        sampler.write()


if __name__ == "__main__":
    main()
