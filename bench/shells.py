"""bash, zsh and fish side by side: ``echo`` latency and CPU per send (SPEC §32).

One worker opens one session of each shell backend through ``ctx.terminals`` and sends
``echo hi`` in interleaved blocks (which shell goes first rotates), so load and noise hit
the three alike. CPU per send is the worker's own CPU plus the shell's (its process,
read with psutil) over every block, divided by the sends: the harness's part and
the shell's part of one send together. A shell that is not installed is reported missing.
"""

from __future__ import annotations

import os
import shutil
import statistics
import time
from typing import Any

import psutil
from _stack import stack_config

from dsh_terminal_core.kernel.harness import Harness
from dsh_terminal_core.registry import SendRequest, SpawnRequest

__all__ = ["run_shells"]

SHELLS = {"bash": "shell", "zsh": "zsh", "fish": "fish"}


def _cpu(process: psutil.Process) -> float:
    own = os.times()
    times = process.cpu_times()
    return own.user + own.system + times.user + times.system


async def run_shells(
    owner: str, quick: bool, sizes: tuple[int, int, int] | None = None
) -> dict[str, Any]:
    """``sizes``: (blocks, sends per block, warm-up sends) instead of the run's defaults."""
    blocks, per_block, warmup = sizes or ((3, 5, 2) if quick else (20, 50, 30))
    config = stack_config()
    for kind in ("zsh", "fish"):
        config[f"terminal-{kind}"] = dict(config.get("terminal-bash", {}))
    async with Harness(config=config) as h:
        agent = h.create_agent(owner)
        sessions: dict[str, tuple[str, psutil.Process]] = {}
        result: dict[str, Any] = {}
        for name, kind in SHELLS.items():
            if shutil.which(name) is None:
                result[name] = {"missing": True}
                continue
            opened = await h.ctx.terminals.spawn(agent, SpawnRequest(type=kind))
            sid = str(opened.session_id)
            shell = h.ctx.terminals.get_session(agent, sid).shell_pid
            sessions[name] = (sid, psutil.Process(shell))
        latencies: dict[str, list[float]] = {name: [] for name in sessions}
        cpu: dict[str, list[float]] = {name: [] for name in sessions}
        reasons: dict[str, dict[str, int]] = {name: {} for name in sessions}

        async def send(sid: str) -> str:
            op = h.ctx.terminals.start_send(agent, sid, SendRequest(text="echo hi"))
            return str((await op.done).wait_reason)

        for name, (sid, _) in sessions.items():
            for _ in range(warmup):
                await send(sid)
        order = list(sessions)
        for block in range(blocks):
            for name in order[block % len(order) :] + order[: block % len(order)]:
                sid, process = sessions[name]
                before = _cpu(process)
                for _ in range(per_block):
                    started = time.perf_counter()
                    reason = await send(sid)
                    latencies[name].append(time.perf_counter() - started)
                    reasons[name][reason] = reasons[name].get(reason, 0) + 1
                cpu[name].append(_cpu(process) - before)
        for name, (sid, _) in sessions.items():
            await h.ctx.terminals.kill(agent, sid, "benchmark")
            values = sorted(latencies[name])
            result[name] = {
                "sends": len(values),
                "p50_ms": round(statistics.median(values) * 1000, 3),
                "p95_ms": round(values[int(len(values) * 0.95) - 1] * 1000, 3),
                # Summed over the blocks: the clocks tick every 10 ms, coarser than a send.
                "cpu_ms_per_send": round(sum(cpu[name]) / len(values) * 1000, 3),
                "wait_reasons": reasons[name],
            }
        return result
