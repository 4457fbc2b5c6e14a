"""A real headless Chromium for tests, driven by Playwright: the system's browser, no download.

Playwright (async API) launches the Chromium found on PATH through ``executable_path``,
so ``playwright install`` is never run and nothing is fetched at test time. Without a
``chromium`` on PATH, or without the ``playwright`` package, the tests marked
``needs_chromium`` are skipped.

``headless_page()`` yields a page in a fresh browser. However the test ends (it passes,
fails, times out or is cancelled) it closes the browser and the Playwright driver, and
then proves that no process of the browser is left: neither the renderers and helpers
under this test process nor the crash handlers that Chromium detaches to init, which the
suite's own leak check cannot see but which carry a marker put in the browser's
environment. A survivor is killed, and fails the test if nothing else did. The browser's
profile, its temporary files (``TMPDIR``) and the driver's artifacts live in a directory
of the block's own, removed at the end, so a browser that died leaves no files either.
"""

from __future__ import annotations

import contextlib
import importlib.util
import inspect
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import psutil
import pytest

if TYPE_CHECKING:
    from playwright.async_api import Page

CHROMIUM = shutil.which("chromium")
HAVE_PLAYWRIGHT = importlib.util.find_spec("playwright") is not None

needs_chromium = pytest.mark.skipif(
    CHROMIUM is None or not HAVE_PLAYWRIGHT,
    reason="needs chromium on PATH and the playwright package",
)

MARKER = "DSH_TEST_BROWSER"
"""Environment variable that every browser started here carries, set to its own value."""

TIMEOUT_S = 30.0
"""Bound on launching and on each page action (Playwright's own default)."""

CLOSE_BOUND_S = 15.0
"""Bound on each closing step; cancellation of the test does not cut it short."""

GONE_BOUND_S = 5.0
"""How long the browser's processes have to exit after it was closed."""


def processes_of(marker: str) -> set[psutil.Process]:
    """Live processes of the browser started with ``marker``: those carrying it, and their children.

    The browser and its crash handlers keep the marker; its zygote and renderers do not,
    but they are children of the browser.
    """
    found: set[psutil.Process] = set()
    for process in psutil.process_iter():
        try:
            if process.environ().get(MARKER) == marker and alive(process):
                found.add(process)
                found.update(p for p in process.children(recursive=True) if alive(p))
        except psutil.Error:
            continue
    return found


def alive(process: psutil.Process) -> bool:
    """Running and not a zombie; a pid reused by another process counts as gone."""
    try:
        return bool(process.is_running() and process.status() != psutil.STATUS_ZOMBIE)
    except psutil.Error:
        return False


def _describe(processes: Iterable[psutil.Process]) -> list[str]:
    described = []
    for process in processes:
        try:
            described.append(f"{process.pid} {process.name()}")
        except psutil.Error:
            described.append(str(process.pid))
    return sorted(described)


@contextlib.asynccontextmanager
async def headless_page(*, marker: str | None = None) -> AsyncIterator[Page]:
    """A page in a fresh headless system Chromium; nothing of the browser outlives the block.

    ``marker`` (a fresh one by default) is put in the browser's environment, so a test
    can look for its processes with :func:`processes_of`. ``page.context.new_page()``
    opens more pages in the same browser.
    """
    from playwright.async_api import async_playwright

    assert CHROMIUM is not None, "mark the test with needs_chromium"
    marker = marker or uuid.uuid4().hex
    seen: set[psutil.Process] = set()
    with tempfile.TemporaryDirectory(
        prefix="dsh-test-browser-", ignore_cleanup_errors=True
    ) as scratch:
        playwright = await async_playwright().start()
        try:
            context = await playwright.chromium.launch_persistent_context(
                os.path.join(scratch, "profile"),
                executable_path=CHROMIUM,
                headless=True,
                env={**os.environ, MARKER: marker, "TMPDIR": scratch},
                timeout=TIMEOUT_S * 1000,
                **_artifacts_in(scratch),
            )
            try:
                seen |= processes_of(marker)
                page = context.pages[0] if context.pages else await context.new_page()
                context.set_default_timeout(TIMEOUT_S * 1000)
                yield page
            finally:
                with anyio.CancelScope(shield=True):
                    seen |= processes_of(marker)  # the renderers started since the launch
                    with anyio.move_on_after(CLOSE_BOUND_S):
                        await context.close()
        finally:
            with anyio.CancelScope(shield=True):
                try:
                    seen |= processes_of(marker)
                    with anyio.move_on_after(CLOSE_BOUND_S):
                        await playwright.stop()
                finally:
                    left = await _outlived(seen | processes_of(marker))
    assert not left, f"the browser left processes running: {_describe(left)}"


def _artifacts_in(scratch: str) -> dict[str, Any]:
    """Where the driver keeps downloads and traces: ``scratch`` too, where Playwright lets it.

    (Since Playwright 1.61. Otherwise the driver makes its own directory in the system's
    temporary directory, which it can miss removing when the browser died under it.)
    """
    from playwright.async_api import BrowserType

    parameters = inspect.signature(BrowserType.launch_persistent_context).parameters
    return (
        {"artifacts_dir": os.path.join(scratch, "artifacts")}
        if "artifacts_dir" in parameters
        else {}
    )


async def _outlived(processes: set[psutil.Process]) -> list[psutil.Process]:
    """The ``processes`` still alive once they were given time to exit; those are killed."""
    deadline = time.monotonic() + GONE_BOUND_S
    while (left := [p for p in processes if alive(p)]) and time.monotonic() < deadline:
        await anyio.sleep(0.05)
    for process in left:
        with contextlib.suppress(psutil.Error):
            process.kill()
    return left


ARTIFACTS = Path(
    os.environ.get("DSH_TEST_ARTIFACTS")
    or Path(__file__).resolve().parent.parent / "test-artifacts"
)
"""Where browser tests leave screenshots and measurements (ignored by git)."""


def artifact(name: str) -> Path:
    """A path under :data:`ARTIFACTS`/browser for ``name``, its directory made."""
    where = ARTIFACTS / "browser"
    where.mkdir(parents=True, exist_ok=True)
    return where / name


# The page's terminal (xterm.js) as tests read it: the active buffer's visible rows, its
# cursor, which buffer is active, and one cell's colours.
TERM_ROWS = """() => {
  const t = window.dshTerm, b = t.buffer.active, rows = [];
  for (let y = 0; y < t.rows; y++) {
    const line = b.getLine(b.viewportY + y);
    rows.push(line ? line.translateToString(true) : "");
  }
  return {rows: rows, cursor: [b.cursorY, b.cursorX], alternate: b.type === "alternate",
          cols: t.cols, size: t.rows};
}"""

TERM_CELL = """([y, x]) => {
  const b = window.dshTerm.buffer.active, cell = b.getLine(b.viewportY + y).getCell(x);
  return {chars: cell.getChars(), fg: cell.isFgDefault() ? null : cell.getFgColor(),
          bg: cell.isBgDefault() ? null : cell.getBgColor(), bold: cell.isBold() !== 0,
          fgPalette: cell.isFgPalette(), bgPalette: cell.isBgPalette()};
}"""


async def until(page: Page, expression: str, timeout_s: float = 20.0) -> None:
    """Wait until ``expression`` is true in the page (the pages' CSP forbids eval, which
    ``wait_for_function`` needs; ``evaluate`` goes through the debugger protocol)."""
    with anyio.fail_after(timeout_s):
        while not await page.evaluate(f"() => Boolean({expression})"):
            await anyio.sleep(0.02)
