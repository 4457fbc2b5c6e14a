"""Screen sessions side by side with line mode and the raw floor, in one run.

    python3 bench/screen.py            # full size: seq 1 2,000,000 (16.9 MB), 3 runs each
    python3 bench/screen.py --quick    # a smoke run

Rows: ``seq`` through one send (MB/s p50, CPU ms per MB, peak RSS growth) for the raw
reader, a line-mode session and a screen session; and a vim keypress round trip in a
screen session (key written → screen updated → ``stdin_read``), p50 over many presses.
Writes ``bench/results/screen.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from _raw import RawDriver
from _scenarios import _reset_peak_rss, _status_kib, seq_bytes
from _stack import stack_config

from dsh_terminal_core.kernel.harness import Harness
from dsh_terminal_core.registry import SendRequest, SpawnRequest

MIB = 1024 * 1024


async def _throughput(send: Any, lines: int, iters: int) -> dict[str, Any]:
    nbytes = seq_bytes(lines)
    await send("seq 1 20000")
    gc.collect()
    _reset_peak_rss()
    peak_before = _status_kib("VmHWM")
    samples: list[float] = []
    cpu = time.process_time()
    for _ in range(iters):
        start = time.perf_counter()
        await send(f"seq 1 {lines}")
        samples.append(time.perf_counter() - start)
    cpu = time.process_time() - cpu
    rates = sorted(nbytes / s / 1e6 for s in samples)
    return {
        "pty_bytes": nbytes,
        "mb_per_s_p50": rates[len(rates) // 2],
        "cpu_ms_per_mb": cpu * 1000 / (nbytes * iters / 1e6),
        "peak_rss_delta_mib": (_status_kib("VmHWM") - peak_before) / 1024,
    }


async def raw_row(lines: int, iters: int) -> dict[str, Any]:
    driver = RawDriver("bench-screen")
    try:
        session = await driver.open()
        return await _throughput(lambda text: driver.send(session, text), lines, iters)
    finally:
        await driver.aclose()


async def stack_row(lines: int, iters: int, *, screen: bool) -> dict[str, Any]:
    config = stack_config(scrollback_max_bytes=4 * MIB, scrollback_lines=1_000_000)
    async with Harness(config=config) as h:
        agent = h.create_agent("bench-screen")
        opened = await h.ctx.terminals.spawn(agent, SpawnRequest(type="shell", screen=screen))
        sid = opened.session_id
        reasons: list[str] = []

        async def send(text: str) -> None:
            op = h.ctx.terminals.start_send(agent, sid, SendRequest(text=text))
            result = await op.done
            reasons.append(str(result.wait_reason))

        row = await _throughput(send, lines, iters)
        row["wait_reasons"] = {r: reasons.count(r) for r in set(reasons)}
        if screen:
            shown = h.ctx.terminals.read_screen(agent, sid).screen.text.split("\n")
            row["last_screen_line"] = shown[-2] if len(shown) > 1 else shown[-1]
        return row


async def vim_keypress(presses: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        config = stack_config()
        config["sandbox-policy"]["workspace_root"] = tmp
        async with Harness(config=config) as h:
            agent = h.create_agent("bench-screen")
            sid = await h.ctx.terminals.spawn(agent, SpawnRequest(type="shell", screen=True))
            session_id = sid.session_id

            async def keys(*items: str) -> Any:
                op = h.ctx.terminals.start_send(
                    agent, session_id, SendRequest(text="", keys=tuple(items))
                )
                return await op.done

            op = h.ctx.terminals.start_send(
                agent, session_id, SendRequest(text="vim -u NONE -N bench.txt")
            )
            await op.done
            await keys("i")
            samples: list[float] = []
            reasons: list[str] = []
            for index in range(presses):
                letter = "abcdefghijklmnopqrstuvwxyz"[index % 26]
                start = time.perf_counter()
                result = await keys(letter)
                samples.append(time.perf_counter() - start)
                reasons.append(str(result.wait_reason))
                assert result.screen is not None and letter in result.screen.text
            await keys("Escape")
            await keys(":q!", "Enter")
    samples.sort()
    return {
        "presses": presses,
        "p50_ms": statistics.median(samples) * 1000,
        "p90_ms": samples[int(len(samples) * 0.9)] * 1000,
        "wait_reasons": {r: reasons.count(r) for r in set(reasons)},
    }


async def main(quick: bool) -> dict[str, Any]:
    lines, iters, presses = (20_000, 1, 10) if quick else (2_000_000, 3, 100)
    results = {
        "raw": await raw_row(lines, iters),
        "line": await stack_row(lines, iters, screen=False),
        "screen": await stack_row(lines, iters, screen=True),
        "vim_keypress": await vim_keypress(presses),
    }
    raw_rate = results["raw"]["mb_per_s_p50"]
    for name in ("line", "screen"):
        results[name]["rate_vs_raw"] = results[name]["mb_per_s_p50"] / raw_rate
    return results


def _print(results: dict[str, Any]) -> None:
    print(f"{'row':<8} {'MB/s p50':>9} {'vs raw':>7} {'CPU ms/MB':>10} {'peak RSS +MiB':>14}")
    for name in ("raw", "line", "screen"):
        row = results[name]
        ratio = f"{row.get('rate_vs_raw', 1.0):.0%}"
        print(
            f"{name:<8} {row['mb_per_s_p50']:>9.1f} {ratio:>7} {row['cpu_ms_per_mb']:>10.1f} "
            f"{row['peak_rss_delta_mib']:>14.1f}"
        )
    vim = results["vim_keypress"]
    print(
        f"vim keypress round trip: p50 {vim['p50_ms']:.2f} ms, p90 {vim['p90_ms']:.2f} ms "
        f"over {vim['presses']} presses, {vim['wait_reasons']}"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    outcome = asyncio.run(main(args.quick))
    _print(outcome)
    out = Path(__file__).parent / "results" / "screen.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(outcome, indent=2) + "\n")
