"""A randomized stress of the readiness ladder, checked by an oracle.

Each stream drives one shell through a seeded random mix of the flows agents run:
plain sends, sends that outlive their time budget, ``SIGINT``, cancels a few loop turns
after the send started, waits without typing, type-ahead while a command still runs,
background jobs. Every foreground command prints a unique token and ends with its own
exit code, so the oracle knows, for every settlement, which exit codes and which tokens
a correct answer may carry. A *wrong settlement* is a ``stdin_read`` with an exit code
the oracle rules out, without its command's token when that command must have finished,
or with a token of a command it cannot belong to.

Run at full size from the repository root (the figure in the README)::

    python3 tests/reliability/oracle.py --ops 5000 --seed 1

The same seed gives the same sequence of operations; timing on a loaded machine decides
which of the allowed outcomes each racy step takes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import re
import sys
import time
from collections import Counter
from typing import Any

import attrs

from dsh_terminal_core.kernel.agents import Agent
from dsh_terminal_core.kernel.errors import TerminalError
from dsh_terminal_core.kernel.harness import Harness
from dsh_terminal_core.registry import SendRequest, SendResult, SpawnRequest, WaitReason

__all__ = ["OracleReport", "run_oracle", "without_cut_echo"]

_TOKEN = re.compile(r"\bfg-\d+-\d+\b")
# bash's job notice is ``[1]+  Done ...``; zsh's ``[1]  + done ...``; fish's
# ``fish: Job 1, 'sh -c ...' has ended``.
_BACKGROUND_NOISE = re.compile(
    r"\bbg-\d+-\d+\b|^\[\d+\][+-]? +Done|^\[\d+\] +[+-]? *done\b|^fish: Job \d+, |^dsh> $"
)
_STDIN = WaitReason.STDIN_READ
_PROMPT = "dsh> "


def without_cut_echo(viewport: str, typed: str, *, bare: bool = False) -> str:
    """``viewport`` without the echo of ``typed`` that a cancel cut short.

    A cancel that lands while bash is part-way through reading its line flushes the
    unread rest; bash echoed the part it read, and the interrupt that drops that part
    from its line editor prints ``^C`` right behind it. That echo ends anywhere, even
    inside the line's own token (``echo fg-0-7^C`` of ``echo fg-0-773``), so it is
    taken out before tokens are counted. Only a line that is exactly a prefix of
    ``typed`` (after the prompt, if the line shows one) followed by ``^C`` is; with
    ``bare`` (zsh, whose line editor prints no ``^C``), also a whole line that is one:
    the output of these commands never starts as their command line does.
    """
    kept = []
    for line in viewport.split("\n"):
        echoed, interrupt, rest = line.partition("^C")
        echoed = echoed.removeprefix(_PROMPT)
        if echoed and (interrupt or bare) and typed.startswith(echoed):
            line = interrupt + rest
        kept.append(line)
    return "\n".join(kept)


@attrs.define
class OracleReport:
    """What a run did and what it found wrong."""

    seed: int
    operations: int = 0
    wrong: int = 0
    unexpected: int = 0
    kinds: Counter[str] = attrs.field(factory=Counter)
    failures: list[str] = attrs.field(factory=list)
    elapsed_s: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "seed": self.seed,
            "operations": self.operations,
            "wrong_settlements": self.wrong,
            "unexpected_wait_reasons": self.unexpected,
            "kinds": dict(sorted(self.kinds.items())),
            "elapsed_s": round(self.elapsed_s, 1),
            "failures": self.failures[:20],
        }


@attrs.define
class _Stream:
    """One shell and what the oracle knows about it."""

    index: int
    rng: random.Random
    harness: Harness
    agent: Agent
    session_id: str
    report: OracleReport
    serial: int = 0
    # Exit codes the shell's $? may hold at its next (or current) prompt.
    status: frozenset[int] = frozenset({0})
    # fish: what its own ``$status`` may hold. Its marker says 130 after a Ctrl-C at the
    # prompt until the next command runs, without changing ``$status``; a line that only
    # starts a background job leaves ``$status`` alone, so its marker shows it again.
    held: frozenset[int] = frozenset({0})
    # A command that outlived its budget and may still be running: (token, exit code).
    pending: tuple[str, int] | None = None
    # Tokens that may still show up late (interrupted or finished commands).
    stray: set[str] = attrs.field(factory=set)
    # The shell's line editor echoes a line a cancel cut short without ``^C`` (zsh, fish).
    bare_cut_echo: bool = False
    # fish: no ``( ... )`` subshells; a status comes from ``sh -c 'exit N'``.
    fish: bool = False
    # Also SIGINT the shell itself while it idles at its prompt.
    idle_sigint: bool = False
    # How long the last send took to settle (reported with a failure).
    elapsed_ms: float = 0.0

    def token(self) -> str:
        self.serial += 1
        return f"fg-{self.index}-{self.serial}"

    def exit_with(self, code: int) -> str:
        """A command that leaves ``code`` as the last status, in the shell's syntax."""
        return f"sh -c 'exit {code}'" if self.fish else f"(exit {code})"

    async def send(
        self, text: str, *, submit: bool = True, timeout_ms: int | None = None
    ) -> SendResult:
        request = SendRequest(text=text, submit=submit, timeout_ms=timeout_ms)
        started = time.monotonic()
        op = self.harness.ctx.terminals.start_send(self.agent, self.session_id, request)
        result: SendResult = await op.done
        self.elapsed_ms = (time.monotonic() - started) * 1000
        return result

    def judge(
        self,
        kind: str,
        result: SendResult,
        *,
        reason: WaitReason = _STDIN,
        codes: frozenset[int],
        own: str | None = None,
        must_end_with_own: bool = False,
        allowed: frozenset[str] = frozenset(),
        typed: str | None = None,
    ) -> None:
        """Count one settlement as right, wrong or unexpected.

        ``typed`` is the line of a cancelled send, whose echo the cancel may cut short.
        """
        self.report.operations += 1
        self.report.kinds[kind] += 1
        problems: list[str] = []
        # Background output right after a prompt leaves no prompt as the tail: then the
        # honest answer is the silence tier.
        quiet_after_background = (
            result.wait_reason is WaitReason.INFERRED_IDLE
            and reason is _STDIN
            and _BACKGROUND_NOISE.search(result.viewport) is not None
        )
        if result.wait_reason is not reason and not quiet_after_background:
            self.report.unexpected += 1
            problems.append(f"wait reason {result.wait_reason.value}, expected {reason.value}")
        if result.wait_reason is _STDIN:
            if result.exit_code is not None and result.exit_code not in codes:
                problems.append(f"exit code {result.exit_code}, allowed {sorted(codes)}")
            shown = (
                result.viewport
                if typed is None
                else without_cut_echo(result.viewport, typed, bare=self.bare_cut_echo)
            )
            tokens = set(_TOKEN.findall(shown))
            foreign = tokens - allowed - ({own} if own else set())
            if foreign:
                problems.append(f"tokens of other commands {sorted(foreign)}")
            if must_end_with_own and own is not None:
                # Background jobs may print, and bash may report them, after it.
                lines = [
                    line
                    for line in result.viewport.split("\n")
                    if line.strip() and not _BACKGROUND_NOISE.search(line)
                ]
                if not lines or lines[-1] != own:
                    problems.append(f"output does not end with its own token {own}")
            if "command not found" in result.viewport:
                problems.append("part of a line ran as a command")
            if any(p.startswith(("exit code", "tokens", "output", "part")) for p in problems):
                self.report.wrong += 1
        if problems:
            self.report.failures.append(
                f"stream {self.index} op {self.report.kinds[kind]} {kind}: "
                + "; ".join(problems)
                + (f" (own {own})" if own else "")
                + f" | after {self.elapsed_ms:.0f} ms | viewport {result.viewport[-160:]!r}"
            )


async def _plain(s: _Stream) -> None:
    own, code = s.token(), s.rng.choice((0, 0, 1, 2, 3, 42))
    lines = s.rng.choice((0, 0, 0, 1, 50, 2000))
    text = f"seq 1 {lines} >/dev/null; " if lines > 1000 else (f"seq 1 {lines}; " if lines else "")
    result = await s.send(f"{text}echo {own}; {s.exit_with(code)}")
    s.judge(
        "plain",
        result,
        codes=frozenset({code}),
        own=own,
        must_end_with_own=True,
        allowed=frozenset(s.stray),
    )
    s.status = frozenset({code})
    s.held = s.status


async def _slow(s: _Stream) -> None:
    own, code = s.token(), s.rng.choice((0, 4, 5))
    seconds = s.rng.uniform(0.3, 0.6)
    budget = s.rng.randint(20, 150)
    result = await s.send(
        f"sleep {seconds:.3f}; echo {own}; {s.exit_with(code)}", timeout_ms=budget
    )
    s.judge(
        "timeout",
        result,
        reason=WaitReason.TIMEOUT,
        codes=frozenset(),
        own=own,
        allowed=frozenset(s.stray),
    )
    s.pending = (own, code)
    s.status = frozenset({code})
    s.held = s.status


async def _wait(s: _Stream) -> None:
    allowed = set(s.stray)
    if s.pending is not None:
        allowed.add(s.pending[0])
        s.stray.add(s.pending[0])
    result = await s.send("", submit=False, timeout_ms=10_000)
    s.judge("wait", result, codes=s.status, allowed=frozenset(allowed))
    s.pending = None
    if result.exit_code is not None:
        s.status = frozenset({result.exit_code})


async def _sigint(s: _Stream) -> None:
    try:
        await s.harness.ctx.terminals.signal(s.agent, s.session_id, "SIGINT")
    except TerminalError as exc:
        if exc.code != "NO_FOREGROUND":
            raise
        # An interrupted command's group, still exiting, owned the foreground between
        # the look and the signal (a SIGINT right after another one): nobody got it.
        s.report.kinds["sigint-missed"] += 1
        return
    s.report.kinds["sigint"] += 1
    if s.pending is not None:
        s.stray.add(s.pending[0])
    # Interrupted, or (if it had just finished) the prompt interrupted: 130 either way,
    # unless the old prompt is still the one on screen.
    s.status = s.status | {130}
    s.held = s.held | {130}
    s.pending = None


async def _type_ahead(s: _Stream) -> None:
    assert s.pending is not None
    s.stray.add(s.pending[0])
    own, code = s.token(), s.rng.choice((0, 6, 7))
    result = await s.send(f"echo {own}; {s.exit_with(code)}")
    s.judge(
        "type-ahead",
        result,
        codes=frozenset({code}),
        own=own,
        must_end_with_own=True,
        allowed=frozenset(s.stray),
    )
    s.pending = None
    s.status = frozenset({code})
    s.held = s.status


async def _cancel(s: _Stream) -> None:
    own, code = s.token(), s.rng.choice((0, 8))
    seconds = s.rng.choice((0, 0.05, 0.2, 5))
    typed = f"sleep {seconds}; echo {own}; {s.exit_with(code)}"
    request = SendRequest(text=typed)
    op = s.harness.ctx.terminals.start_send(s.agent, s.session_id, request)
    for _ in range(s.rng.randint(0, 4)):
        await asyncio.sleep(0)
    if s.rng.random() < 0.3:
        await asyncio.sleep(s.rng.uniform(0, 0.03))
    await op.cancel()
    result: SendResult = await op.done
    s.stray.add(own)
    s.judge(
        "cancel",
        result,
        codes=frozenset({130, code}),
        own=own,
        allowed=frozenset(s.stray),
        typed=typed,
    )
    s.status = (
        frozenset({result.exit_code}) if result.exit_code is not None else s.status | {130, code}
    )
    # fish's own status: the line's (it may have finished before the SIGINT, which then
    # found fish at its prompt: the marker says 130), 130 (interrupted) or as it was.
    s.held = s.held | s.status | {130, code}


async def _background(s: _Stream) -> None:
    job = f"sleep 0.0{s.rng.randint(1, 9)}; echo bg-{s.index}-{s.serial}"
    result = await s.send(f"sh -c '{job}' &" if s.fish else f"({job}) &")
    # Starting a background job sets bash's and zsh's status to 0; fish leaves its
    # ``$status`` as the line before left it (``false; sleep 1 &; echo $status``: 1).
    # Its marker may also still be the 130 of a Ctrl-C the line ran after.
    codes = s.held | s.status if s.fish else frozenset({0})
    s.judge("background", result, codes=codes, allowed=frozenset(s.stray))
    s.status = codes if result.exit_code is None else frozenset({result.exit_code})
    s.held = codes if s.fish else s.status


async def _step(s: _Stream) -> None:
    roll = s.rng.random()
    if s.pending is not None:
        if roll < 0.4:
            await _wait(s)
        elif roll < 0.7:
            await _sigint(s)
        else:
            await _type_ahead(s)
        return
    if s.idle_sigint and roll >= 0.94:
        await _sigint(s)  # the shell itself, idle at its prompt (see docs/reliability.md's gap)
        return
    if roll < 0.58:
        await _plain(s)
    elif roll < 0.73:
        await _slow(s)
    elif roll < 0.83:
        await _cancel(s)
    elif roll < 0.91:
        await _background(s)
    else:
        await _wait(s)


async def _run_stream(
    index: int,
    seed: int,
    operations: int,
    report: OracleReport,
    idle_sigint: bool,
    world: list[str] | None = None,
    shell: str = "shell",
) -> None:
    config: dict[str, Any] = {"sandbox-policy": {"mode": "danger-full-access"}}
    if world is not None:
        config["worlds"] = {"worlds": {"w": {"command": world}}}
    async with Harness(config=config) as h:
        agent = h.create_agent(f"oracle-{index}")
        spawned = await h.ctx.terminals.spawn(
            agent, SpawnRequest(type=shell, world="w" if world is not None else None)
        )
        stream = _Stream(
            index=index,
            rng=random.Random(seed * 1000 + index),
            harness=h,
            agent=agent,
            session_id=spawned.session_id,
            report=report,
            idle_sigint=idle_sigint,
            bare_cut_echo=shell in ("zsh", "fish"),
            fish=shell == "fish",
        )
        start = report.operations
        while report.operations - start < operations and len(report.failures) < 50:
            before = stream.report.operations
            await _step(stream)
            if stream.report.operations == before:
                continue  # a signal alone is not a settlement
        await agent.dispose()


async def run_oracle(
    *,
    operations: int,
    seed: int,
    streams: int = 4,
    idle_sigint: bool = False,
    world: list[str] | None = None,
    shell: str = "shell",
) -> OracleReport:
    """Run ``operations`` settlements over ``streams`` concurrent shells; return the report.

    ``idle_sigint`` adds SIGINTs to the shell itself while it idles at its prompt.
    ``world`` is the command of an execution world (SPEC §21) to run the shells in.
    ``shell`` is the backend type: ``shell`` (bash), ``zsh`` or ``fish`` (whose commands
    set a status with ``sh -c 'exit N'`` and background ``sh -c '...' &``).
    """
    started = time.monotonic()
    parts = [OracleReport(seed=seed) for _ in range(streams)]
    share = [operations // streams + (1 if i < operations % streams else 0) for i in range(streams)]
    await asyncio.gather(
        *(
            _run_stream(i, seed, share[i], parts[i], idle_sigint, world, shell)
            for i in range(streams)
        )
    )
    total = OracleReport(seed=seed, elapsed_s=time.monotonic() - started)
    for part in parts:
        total.operations += part.operations
        total.wrong += part.wrong
        total.unexpected += part.unexpected
        total.kinds.update(part.kinds)
        total.failures.extend(part.failures)
    return total


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ops", type=int, default=5000, help="settlements to check")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--streams", type=int, default=4, help="concurrent shells")
    parser.add_argument(
        "--idle-sigint", action="store_true", help="also SIGINT the shell idle at its prompt"
    )
    parser.add_argument(
        "--shell",
        choices=("shell", "zsh", "fish"),
        default="shell",
        help="backend type (bash: shell)",
    )
    parser.add_argument(
        "--world",
        nargs=argparse.REMAINDER,
        help="run the shells in the execution world this command starts (the rest of argv)",
    )
    args = parser.parse_args(argv)
    report = asyncio.run(
        run_oracle(
            operations=args.ops,
            seed=args.seed,
            streams=args.streams,
            idle_sigint=args.idle_sigint,
            world=args.world or None,
            shell=args.shell,
        )
    )
    print(json.dumps(report.as_dict(), indent=2))
    return 1 if report.wrong or report.unexpected else 0


if __name__ == "__main__":
    sys.exit(main())
