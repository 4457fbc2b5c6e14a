"""The watch page as a real terminal (SPEC §31), in a real headless Chromium.

One browser and one screen session carry every check, in the order a person meets
them: colours at the right cells, the cursor where the screen session says it is, a
resize, the latency from output to page, vim and htop drawn as the screen model has
them, and a person's keys (as xterm.js encodes them) round-tripping through a control
link. Screenshots go to ``test-artifacts/browser/`` (or ``$DSH_TEST_ARTIFACTS``).
"""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from dsh_terminal_core.human.assets import load as load_assets
from dsh_terminal_core.kernel.agents import Agent
from dsh_terminal_core.kernel.harness import Harness

from ..browser import TERM_CELL, TERM_ROWS, artifact, headless_page, needs_chromium, until
from ..helpers import call_value, full_access, needs

pytestmark = [
    needs_chromium,
    pytest.mark.skipif(
        load_assets() is None, reason="the browser assets are not installed (scripts/install.sh)"
    ),
]

BOUND_S = 150

# Marks, in the page, when each awaited text is first in the terminal's buffer (parsed)
# and then painted (the next animation frame), as Date.now() in ms.
_OBSERVE = """
(wanted) => {
  window.__seen = window.__seen || {};
  const t = window.dshTerm;
  const check = () => {
    const b = t.buffer.active;
    let text = "";
    for (let y = 0; y < t.rows; y++) {
      const line = b.getLine(b.viewportY + y);
      if (line) text += line.translateToString(true) + "\\n";
    }
    for (const w of wanted) if (!(w in window.__seen) && text.includes(w)) {
      window.__seen[w] = {parsed: Date.now()};
      requestAnimationFrame(() => { window.__seen[w].painted = Date.now(); });
    }
  };
  t.onWriteParsed(check);
  check();
}
"""


def _model(h: Harness, agent: Agent, sid: str) -> dict[str, Any]:
    read = h.ctx.terminals.read_screen(agent, sid)
    rows = read.screen.text.split("\n")
    rows += [""] * (read.rows - len(rows))
    return {
        "rows": [row.rstrip() for row in rows[: read.rows]],
        "cursor": list(read.screen.cursor),
        "alternate": read.screen.alternate,
        "cols": read.cols,
        "size": read.rows,
    }


async def _page_matches_model(page: Any, h: Harness, agent: Agent, sid: str) -> dict[str, Any]:
    """Wait until the page's terminal shows what the screen model has; the last model."""
    seen: dict[str, Any] = {}
    model: dict[str, Any] = {}
    try:
        with anyio.fail_after(20):
            while True:
                model = _model(h, agent, sid)
                seen = await page.evaluate(TERM_ROWS)
                seen["rows"] = [row.rstrip() for row in seen["rows"]]
                if seen == model:
                    return model
                await anyio.sleep(0.05)
    except TimeoutError:
        assert seen == model  # shows the difference
        raise


async def test_the_watch_page_is_the_sessions_own_terminal(tmp_path: Path) -> None:
    with anyio.fail_after(BOUND_S):
        async with Harness(config=full_access(str(tmp_path))) as h:
            agent = h.create_agent("a")
            opened = await call_value(
                h, agent, "terminal_open", {"screen": True, "rows": 24, "cols": 80}
            )
            sid = opened["sessionId"]

            async def send(**args: Any) -> dict[str, Any]:
                return await call_value(h, agent, "terminal_send", {"sessionId": sid, **args})

            await send(text=r"printf 'A \e[31mRED\e[0m B \e[1;42mGRN\e[0m\n'")
            link = await call_value(h, agent, "terminal_watch", {"sessionId": sid, "control": True})
            async with headless_page() as page:
                await page.goto(link["url"])
                assert await page.get_attribute("#mode", "data-mode") == "terminal"
                await until(page, "window.dshTerm")

                # The retained output replayed: the page is the screen model, cursor too.
                model = await _page_matches_model(page, h, agent, sid)
                row = next(i for i, text in enumerate(model["rows"]) if text.startswith("A RED"))
                col = model["rows"][row].index("RED")
                for x in range(col, col + 3):
                    cell = await page.evaluate(TERM_CELL, [row, x])
                    assert cell["fg"] == 1 and cell["fgPalette"] and cell["bg"] is None, cell
                green = model["rows"][row].index("GRN")
                cell = await page.evaluate(TERM_CELL, [row, green])
                assert cell["bg"] == 2 and cell["bgPalette"] and cell["bold"], cell
                for x in (col - 1, col + 3, green + 3):  # the colours stop where they should
                    cell = await page.evaluate(TERM_CELL, [row, x])
                    assert cell["fg"] is None and cell["bg"] is None, (x, cell)
                # And the browser paints them: xterm's DOM renderer marks the cells' colour.
                painted = await page.evaluate(
                    """() => [...document.querySelectorAll('#terminal .xterm-rows span')]
                         .filter((s) => s.textContent.includes('RED'))
                         .map((s) => s.className).join(' ')"""
                )
                assert "xterm-fg-1" in painted, painted
                await page.screenshot(path=str(artifact("terminal-colours.png")))

                # A resize reaches the page; the page stays the model.
                await call_value(
                    h, agent, "terminal_resize", {"sessionId": sid, "rows": 30, "cols": 100}
                )
                await until(page, "window.dshTerm.cols === 100 && window.dshTerm.rows === 30")
                await send(text="echo resized")
                await _page_matches_model(page, h, agent, sid)

                # Output to page: from the bytes reaching the harness to the page's paint.
                tapped = h.ctx.human.tap.of(sid)
                latencies: list[float] = []
                for n in range(5):
                    marker = f"lat-{n}x"
                    at: list[float] = []

                    def on_bytes(chunk: bytes, marker: str = marker, at: list[float] = at) -> None:
                        if not at and marker.encode() in chunk:
                            at.append(time.time() * 1000)

                    await page.evaluate(_OBSERVE, [marker])
                    stop = tapped.follow(on_bytes, lambda: None)
                    await send(text=f"echo lat-$(({n}+0))x")
                    stop()
                    await until(
                        page, f"window.__seen['{marker}'] && window.__seen['{marker}'].painted"
                    )
                    shown = await page.evaluate(f"window.__seen['{marker}']")
                    latencies.append(shown["painted"] - at[0])
                figures = {
                    "samples_ms": latencies,
                    "median_ms": statistics.median(latencies),
                    "max_ms": max(latencies),
                }
                artifact("latency.json").write_text(json.dumps(figures, indent=1))
                print(f"output-to-page latency (ms): {figures}")

                # vim on the alternate screen, as the screen model draws it.
                if await _have("vim"):
                    vim = await send(text="vim -u NONE -N notes.txt")
                    assert vim["screen"]["alternate"] is True
                    model = await _page_matches_model(page, h, agent, sid)
                    assert model["alternate"]
                    await page.screenshot(path=str(artifact("terminal-vim.png")))

                    # A person's keys, as xterm.js encodes them (vim's cursor-key mode too).
                    await page.click("#take-control")
                    await until(page, "document.body.dataset.control === 'person'")
                    await page.click("#terminal")
                    posted: list[str] = []
                    page.on(
                        "request",
                        lambda r: (
                            posted.append(json.loads(r.post_data or "{}").get("data", ""))
                            if r.url.endswith("/keys")
                            else None
                        ),
                    )
                    # Queries in the output are the harness's to answer, never the page's.
                    await page.evaluate(
                        "new Promise((done) => window.dshTerm.write("
                        "'\\x1b[6n\\x1b[c\\x1b[>c\\x1b[?1$p\\x1b]11;?\\x07', done))"
                    )
                    await page.keyboard.type("iabc")
                    await page.keyboard.press("ArrowLeft")
                    await page.keyboard.type("X")
                    await page.keyboard.press("Escape")
                    with anyio.fail_after(10):
                        while "abXc" not in _model(h, agent, sid)["rows"][0]:
                            await anyio.sleep(0.05)
                    await _page_matches_model(page, h, agent, sid)
                    # Exactly the keys, as xterm.js encodes them: Left in vim's cursor-key
                    # mode is ESC O D.
                    assert "".join(posted) == "iabc\x1bODX\x1b", posted
                    await page.keyboard.type(":wq")
                    await page.keyboard.press("Enter")
                    with anyio.fail_after(10):
                        while _model(h, agent, sid)["alternate"]:
                            await anyio.sleep(0.05)
                    await page.click("#hand-back")
                    await until(page, "document.body.dataset.control === 'agent'")
                    assert (tmp_path / "notes.txt").read_text() == "abXc\n"
                    await _page_matches_model(page, h, agent, sid)

                if await _have("htop"):
                    await send(text="htop -d 100")
                    model = await _page_matches_model(page, h, agent, sid)
                    assert model["alternate"]
                    await page.screenshot(path=str(artifact("terminal-htop.png")))
                    quit_ = await send(keys=["q"])
                    assert quit_["waitReason"] == "stdin_read"
                    await _page_matches_model(page, h, agent, sid)

                # A page opened after older output was cut: drawn from the screen model.
                if await _have("vim"):
                    await _late_page_matches_model(page, tmp_path)


async def _late_page_matches_model(page: Any, tmp_path: Path) -> None:
    config = full_access(str(tmp_path), human={"replay_bytes": 4096})
    async with Harness(config=config) as h:
        agent = h.create_agent("b")
        opened = await call_value(
            h, agent, "terminal_open", {"screen": True, "rows": 24, "cols": 80}
        )
        sid = opened["sessionId"]
        await call_value(h, agent, "terminal_send", {"sessionId": sid, "text": "seq 1 5000"})
        await call_value(
            h, agent, "terminal_send", {"sessionId": sid, "text": "vim -u NONE -N late.txt"}
        )
        assert h.ctx.human.tap.of(sid).dropped > 0
        link = await call_value(h, agent, "terminal_watch", {"sessionId": sid})
        await page.goto(link["url"])
        await until(page, "window.dshTerm")
        assert (await _page_matches_model(page, h, agent, sid))["alternate"]
        assert await page.is_visible("#cut")
        await page.screenshot(path=str(artifact("terminal-late-replay.png")))
        await call_value(h, agent, "terminal_send", {"sessionId": sid, "keys": [":q!", "Enter"]})


async def _have(program: str) -> bool:
    return not needs(program).args[0]
