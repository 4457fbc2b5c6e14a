"""Threaded and multi-process programs through ``terminal_send`` (SPEC §28), production timings.

    python3 bench/threaded.py --nvim-rounds 200            # wrong settles of nvim, quiet
    python3 bench/threaded.py --nvim-rounds 200 --load 2   # with two CPU spinners
    python3 bench/threaded.py --programs                   # wait reason and time per program
    python3 bench/threaded.py --partner-rounds 20          # mc, tmux, screen: never early

Why it exists: nvim's input thread goes back to its wait on the terminal before its main
thread has run the keys it passed on, and a send once settled there (``:q!`` answered
``stdin_read`` with nvim still on screen). ``--nvim-rounds`` repeats a round of nvim —
open a file, type in insert mode, ``:w``, ``:q!`` — in one screen session and counts the
settles that claim more than the editor did: a ``stdin_read`` after typing whose screen
lacks the typed text, after ``:w`` whose file lacks it, after ``:q!`` without the prompt's
exit code or with nvim still on the alternate screen. ``--load N`` runs N ``yes`` processes
writing to ``/dev/null`` for the whole run (killed and reaped at the end).

``--programs`` opens one fresh screen session per program (mc with and without its
subshell, nested tmux and GNU screen, a Textual app, ipython, nvim, fzf, ``watch -n 1
date``, ``tail -f`` of a log written every 0.3 s), starts it, presses one key that
redraws (twice), and prints each send's wait reason and wall time (and ``periodic``),
then leaves the program as a person would. Run it with ``PYTHONPATH`` pointing at
another checkout's ``*/src`` folders to measure that code in the same minutes.

``--partner-rounds N`` runs, inside mc (its subshell), a nested tmux and a nested
screen, N commands ``sleep 0.9; echo I > FILE`` and counts the settles that say
``stdin_read`` before the file was written (wrong), and how each settled.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from dsh_terminal_core.kernel.harness import Harness

REPO = Path(__file__).resolve().parents[1]
TEXTUAL_APP = REPO / "tests" / "fixtures" / "textual_app.py"
BUDGET_MS = 15_000
CONFIG = {"sandbox-policy": {"mode": "danger-full-access"}}


async def _send(h: Harness, agent: Any, sid: str, **args: Any) -> tuple[dict[str, Any], float]:
    started = time.perf_counter()
    result = await h.call_tool(
        agent, "terminal_send", {"sessionId": sid, "timeoutMs": BUDGET_MS, **args}
    )
    took = time.perf_counter() - started
    if result.is_error:
        raise RuntimeError(result.text)
    return dict(result.value), took


def _text_of(path: Path) -> str:
    """The file as nvim left it; empty before its first write."""
    try:
        return path.read_text(errors="replace")
    except FileNotFoundError:
        return ""


def _screen(value: Mapping[str, Any]) -> Mapping[str, Any]:
    screen = value.get("screen")
    return screen if isinstance(screen, Mapping) else {}


async def nvim_rounds(rounds: int, workdir: Path) -> tuple[Counter[str], Counter[str]]:
    """Run ``rounds`` nvim rounds; the wrong settles and every wait reason, by step."""
    wrong: Counter[str] = Counter()
    reasons: Counter[str] = Counter()
    async with Harness(config=CONFIG) as h:
        agent = h.create_agent("bench-threaded")
        opened = await h.call_tool(agent, "terminal_open", {"screen": True})
        sid = str(opened.value["sessionId"])
        for i in range(rounds):
            path = workdir / f"round{i}.txt"
            token = f"token{i}x"
            value, _ = await _send(h, agent, sid, text=f"nvim --clean -n {path}")
            reasons[f"open:{value['waitReason']}"] += 1
            value, _ = await _send(h, agent, sid, text=f"i{token}", submit=False)
            reasons[f"insert:{value['waitReason']}"] += 1
            if value["waitReason"] == "stdin_read" and token not in str(_screen(value).get("text")):
                wrong["insert"] += 1
            await _send(h, agent, sid, keys=["Escape"])
            value, _ = await _send(h, agent, sid, text=":w")
            reasons[f"write:{value['waitReason']}"] += 1
            if value["waitReason"] == "stdin_read" and token not in _text_of(path):
                wrong["write"] += 1
            value, _ = await _send(h, agent, sid, text=":q!")
            reasons[f"quit:{value['waitReason']}"] += 1
            if value["waitReason"] == "stdin_read" and (
                value["exitCode"] != 0 or _screen(value).get("alternate")
            ):
                wrong["quit"] += 1
            if value["exitCode"] is None:
                value, _ = await _send(h, agent, sid, text="", submit=False)
                if value["exitCode"] is None:
                    raise RuntimeError(f"round {i}: nvim did not quit: {value}")
        await h.call_tool(agent, "terminal_close", {"sessionId": sid})
    return wrong, reasons


def _programs(workdir: Path) -> list[tuple[str, str | None, list[dict[str, Any]], dict[str, Any]]]:
    """(label, executable needed, [start, key], quit) per program."""
    log = workdir / "busy.log"
    python = sys.executable
    return [
        (
            "nvim",
            "nvim",
            [{"text": f"nvim --clean -n {workdir / 'f.txt'}"}, {"text": "ihello", "submit": False}],
            {"keys": ["Escape", ":", "q", "!", "Enter"]},
        ),
        (
            "mc -u (no subshell)",
            "mc",
            [{"text": "mc -u"}, {"keys": ["Down"]}, {"keys": ["Down"]}],
            {"keys": ["F10"]},
        ),
        (
            "mc (subshell)",
            "mc",
            [{"text": "mc"}, {"keys": ["Down"]}, {"keys": ["Down"]}],
            {"keys": ["F10"]},
        ),
        (
            "tmux",
            "tmux",
            [
                {"text": f"tmux -L dsh-bench-{os.getpid()} -f /dev/null new-session"},
                {"text": "echo hi"},
                {"text": "echo there"},
            ],
            {"text": "exit"},
        ),
        (
            "screen",
            "screen",
            [{"text": "screen -q"}, {"text": "echo hi"}, {"text": "echo there"}],
            {"text": "exit"},
        ),
        (
            "Textual",
            None,
            [{"text": f"{python} {TEXTUAL_APP}"}, {"keys": ["Down"]}, {"keys": ["Down"]}],
            {"keys": ["q"]},
        ),
        (
            "ipython",
            None,
            [
                {"text": f"{python} -m IPython --no-banner --HistoryManager.enabled=False"},
                {"text": "6 * 7"},
                {"text": "6 * 8"},
            ],
            {"text": "exit"},
        ),
        (
            "fzf",
            "fzf",
            [{"text": "seq 100 | fzf"}, {"keys": ["Up"]}, {"keys": ["Up"]}],
            {"keys": ["Escape"]},
        ),
        ("watch -n 1 date", "watch", [{"text": "watch -n 1 date"}], {"keys": ["C-c"]}),
        (
            "tail -f (0.3 s beat)",
            "tail",
            [
                {
                    "text": f": > {log}; (while :; do date +%N; sleep 0.3; done) >> {log} "
                    f"2>&1 & tail -f {log}"
                }
            ],
            {"keys": ["C-c"]},
        ),
    ]


async def programs(workdir: Path) -> list[tuple[str, str, str]]:
    rows: list[tuple[str, str, str]] = []
    async with Harness(config=CONFIG) as h:
        agent = h.create_agent("bench-threaded")
        for label, needs, steps, quit_ in _programs(workdir):
            if needs is not None and shutil.which(needs) is None:
                rows.append((label, "skipped", f"{needs} not installed"))
                continue
            opened = await h.call_tool(agent, "terminal_open", {"screen": True})
            sid = str(opened.value["sessionId"])
            for number, step in enumerate(steps):
                value, took = await _send(h, agent, sid, **step)
                periodic = " periodic" if value.get("periodic") else ""
                what = "start" if number == 0 else f"then {step.get('keys') or step.get('text')!r}"
                rows.append((label, what, f"{value['waitReason']}{periodic} {took * 1000:.0f} ms"))
            await _send(h, agent, sid, **quit_)
            await h.call_tool(agent, "terminal_close", {"sessionId": sid})
    return rows


def _partners() -> list[tuple[str, str, dict[str, Any], dict[str, Any]]]:
    """(label, executable, start, quit) of the programs that wait with other processes."""
    return [
        ("mc (subshell)", "mc", {"text": "mc"}, {"keys": ["F10"]}),
        (
            "tmux",
            "tmux",
            {"text": f"tmux -L dsh-bench-{os.getpid()} -f /dev/null new-session"},
            {"text": "exit"},
        ),
        ("screen", "screen", {"text": f"screen -q -S dsh-bench-{os.getpid()}"}, {"text": "exit"}),
    ]


async def partner_rounds(rounds: int, workdir: Path) -> list[tuple[str, int, Counter[str]]]:
    """Per program: the wrong settles of ``rounds`` commands typed into it, and the reasons."""
    rows: list[tuple[str, int, Counter[str]]] = []
    async with Harness(config=CONFIG) as h:
        agent = h.create_agent("bench-threaded")
        for label, needs, start, quit_ in _partners():
            if shutil.which(needs) is None:
                continue
            opened = await h.call_tool(agent, "terminal_open", {"screen": True})
            sid = str(opened.value["sessionId"])
            await _send(h, agent, sid, **start)
            wrong = 0
            reasons: Counter[str] = Counter()
            for i in range(rounds):
                mark = workdir / f"{needs}-mark{i}"
                value, took = await _send(h, agent, sid, text=f"sleep 0.9; echo {i} > {mark}")
                reasons[value["waitReason"]] += 1
                if value["waitReason"] == "stdin_read" and not mark.exists():
                    wrong += 1
                for _ in range(50):
                    if mark.exists():
                        break
                    await asyncio.sleep(0.1)
            rows.append((label, wrong, reasons))
            await _send(h, agent, sid, **quit_)
            await h.call_tool(agent, "terminal_close", {"sessionId": sid})
    return rows


def _spin(count: int) -> list[subprocess.Popen[bytes]]:
    return [
        subprocess.Popen(["yes"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(count)
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nvim-rounds", type=int, default=0)
    parser.add_argument("--programs", action="store_true")
    parser.add_argument("--partner-rounds", type=int, default=0)
    parser.add_argument("--load", type=int, default=0, help="yes >/dev/null processes")
    args = parser.parse_args(argv)
    spinners = _spin(args.load)
    try:
        with tempfile.TemporaryDirectory(prefix="dsh-threaded-") as tmp:
            if args.nvim_rounds:
                started = time.perf_counter()
                wrong, reasons = asyncio.run(nvim_rounds(args.nvim_rounds, Path(tmp)))
                took = time.perf_counter() - started
                print(
                    f"nvim: {args.nvim_rounds} rounds, load {args.load}: "
                    f"{sum(wrong.values())} wrong {dict(wrong)} in {took:.0f} s"
                )
                print(f"  wait reasons: {dict(sorted(reasons.items()))}")
            if args.programs:
                for label, what, result in asyncio.run(programs(Path(tmp))):
                    print(f"{label:22} {what:22} {result}")
            if args.partner_rounds:
                rows = asyncio.run(partner_rounds(args.partner_rounds, Path(tmp)))
                for label, wrong, reasons in rows:
                    print(
                        f"{label:16} {args.partner_rounds} commands, load {args.load}: "
                        f"{wrong} wrong, {dict(sorted(reasons.items()))}"
                    )
    finally:
        for spinner in spinners:
            spinner.kill()
        for spinner in spinners:
            spinner.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
