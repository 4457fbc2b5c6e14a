"""What the watch pages' byte tap costs (SPEC §31), and how fast output reaches a page.

Two harnesses in one process — ``human.replay_bytes`` 0 (no tap) and the default (every
session's bytes retained and followable) — each with one line session, driven through
``call_tool`` in alternating blocks so both see the same machine at the same moments.
Reported: CPU per MB of output (``seq``), echo p50 and CPU per echo, as ratios tap/no-tap (the median
of the per-round ratios; target within 10 %). With ``--page``, also the output-to-page
latency in a real headless Chromium (target 100 ms): from the bytes reaching the
harness to the page's next frame with them in xterm.js's buffer.

    python bench/watch_tap.py [--rounds N] [--page]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from dsh_terminal_core.kernel.harness import Harness

SEQ_LINES = 200_000
ECHOES = 50


def _config(workspace: str, replay_bytes: int | None) -> dict[str, Any]:
    config: dict[str, Any] = {
        "sandbox-policy": {"mode": "danger-full-access", "workspace_root": workspace},
        "terminal-bash": {"scrollback_max_bytes": 4 * 1024 * 1024},
    }
    if replay_bytes is not None:
        config["human"] = {"replay_bytes": replay_bytes}
    return config


async def _block(h: Harness, agent: Any, sid: str) -> tuple[float, float, float, int]:
    """CPU seconds per echo and for one seq, the echo p50 in ms, the seq's output bytes.

    The echoes come first: right after a large output a session's next sends are slower
    for reasons of their own (the scrollback at its cap), which would blur the ratio.
    """
    echoes = []
    cpu = time.process_time()
    for n in range(ECHOES):
        began = time.perf_counter()
        await h.call_tool(agent, "terminal_send", {"sessionId": sid, "text": f"echo {n}"})
        echoes.append((time.perf_counter() - began) * 1000)
    echo_cpu = (time.process_time() - cpu) / ECHOES
    cpu = time.process_time()
    sent = await h.call_tool(
        agent,
        "terminal_send",
        {"sessionId": sid, "text": f"seq 1 {SEQ_LINES}", "timeoutMs": 120_000},
    )
    assert not sent.is_error, sent.text
    cpu = time.process_time() - cpu
    size = sum(len(str(n)) + 2 for n in range(1, SEQ_LINES + 1))
    return echo_cpu, cpu, statistics.median(echoes), size


async def _costs(rounds: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as workspace:
        async with (
            Harness(config=_config(workspace, 0)) as off,
            Harness(config=_config(workspace, None)) as on,
        ):
            runs = []
            for h in (off, on):
                agent = h.create_agent("bench")
                opened = await h.call_tool(agent, "terminal_open", {})
                runs.append((h, agent, opened.value["sessionId"]))
            assert off.ctx.human.tap is None and on.ctx.human.tap is not None
            cpu_ratios, echo_ratios, echo_cpu_ratios = [], [], []
            cpu_mb: dict[str, list[float]] = {"off": [], "on": []}
            for round_ in range(rounds + 1):
                order = runs if round_ % 2 == 0 else runs[::-1]
                got = {}
                for h, agent, sid in order:
                    got[h is on] = await _block(h, agent, sid)
                if round_ == 0:
                    continue  # warm-up
                (ecpu_off, cpu_off, echo_off, size) = got[False]
                (ecpu_on, cpu_on, echo_on, _) = got[True]
                cpu_ratios.append(cpu_on / cpu_off)
                echo_ratios.append(echo_on / echo_off)
                echo_cpu_ratios.append(ecpu_on / ecpu_off)
                cpu_mb["off"].append(cpu_off / (size / 1e6))
                cpu_mb["on"].append(cpu_on / (size / 1e6))
            return {
                "cpu_per_mb_ratio_median": round(statistics.median(cpu_ratios), 3),
                "echo_p50_ratio_median": round(statistics.median(echo_ratios), 3),
                "echo_cpu_ratio_median": round(statistics.median(echo_cpu_ratios), 3),
                "cpu_s_per_mb_off": round(statistics.median(cpu_mb["off"]), 4),
                "cpu_s_per_mb_on": round(statistics.median(cpu_mb["on"]), 4),
                "rounds": rounds,
            }


async def _page_latency(samples: int) -> dict[str, Any]:
    from tests.browser import headless_page, until  # the suite's Chromium, no download

    with tempfile.TemporaryDirectory() as workspace:
        async with Harness(config=_config(workspace, None)) as h:
            agent = h.create_agent("bench")
            sid = (await h.call_tool(agent, "terminal_open", {"screen": True})).value["sessionId"]
            url = (await h.call_tool(agent, "terminal_watch", {"sessionId": sid})).value["url"]
            tapped = h.ctx.human.tap.of(sid)
            latencies = []
            async with headless_page() as page:
                await page.goto(url)
                await until(page, "window.dshTerm")
                for n in range(samples):
                    marker = f"lat-{n}x"
                    at: list[float] = []

                    def seen(chunk: bytes, marker: str = marker, at: list[float] = at) -> None:
                        if not at and marker.encode() in chunk:
                            at.append(time.time() * 1000)

                    await page.evaluate(_OBSERVE, marker)
                    stop = tapped.follow(seen, lambda: None)
                    await h.call_tool(
                        agent, "terminal_send", {"sessionId": sid, "text": f"echo lat-$(({n}+0))x"}
                    )
                    stop()
                    await until(page, f"window.__painted['{marker}']")
                    latencies.append(await page.evaluate(f"window.__painted['{marker}']") - at[0])
            return {
                "page_latency_ms_median": round(statistics.median(latencies), 1),
                "page_latency_ms_p90": round(sorted(latencies)[int(0.9 * (len(latencies) - 1))], 1),
                "page_latency_ms_max": round(max(latencies), 1),
                "samples": samples,
            }


_OBSERVE = """
(marker) => {
  window.__painted = window.__painted || {};
  const t = window.dshTerm;
  const d = t.onWriteParsed(() => {
    const b = t.buffer.active;
    for (let y = 0; y < t.rows; y++) {
      const line = b.getLine(b.viewportY + y);
      if (line && line.translateToString(true).includes(marker)) {
        d.dispose();
        requestAnimationFrame(() => { window.__painted[marker] = Date.now(); });
        return;
      }
    }
  });
}
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--page", action="store_true", help="also measure output to page")
    parser.add_argument("--samples", type=int, default=30)
    args = parser.parse_args()
    print(asyncio.run(_costs(args.rounds)))
    if args.page:
        print(asyncio.run(_page_latency(args.samples)))


if __name__ == "__main__":
    main()
