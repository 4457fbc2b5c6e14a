"""The headless Chromium the secret tests fill the page in leaves no process behind.

However the block ends (normally, by an exception, by cancellation, or after the browser
died under it) every process the browser started is gone afterwards: the ones under this
test process and the crash handlers Chromium hands to init, found by the marker in
their environment. Its profile directory is gone too.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import anyio
import psutil
import pytest

from ..browser import MARKER, alive, headless_page, needs_chromium, processes_of

pytestmark = needs_chromium

BOUND_S = 60


def browser_under_this_process(marker: str) -> psutil.Process:
    """The browser itself: of the processes below the test process, the one with the marker.

    (Its zygotes and renderers lose the marker; its crash handlers carry it but go to init.)
    """
    below = set(psutil.Process().children(recursive=True))
    (browser,) = [p for p in below if p.environ().get(MARKER) == marker]
    return browser


def profile_of(marker: str) -> Path:
    """The browser's profile directory, from its command line."""
    (argument,) = [
        a for a in browser_under_this_process(marker).cmdline() if a.startswith("--user-data-dir=")
    ]
    return Path(argument.split("=", 1)[1])


def assert_all_gone(processes: set[psutil.Process], marker: str, profile: Path) -> None:
    assert processes_of(marker) == set()
    left = [p for p in processes if alive(p)]
    assert left == []
    assert not profile.exists()


async def test_a_block_that_ends_normally_leaves_nothing() -> None:
    marker = uuid.uuid4().hex
    with anyio.fail_after(BOUND_S):
        async with headless_page(marker=marker) as page:
            await page.set_content("<p id=hello>hello</p>")
            assert await page.inner_text("#hello") == "hello"
            seen, profile = processes_of(marker), profile_of(marker)
            assert len(seen) >= 2  # the browser and at least its renderer
    assert_all_gone(seen, marker, profile)


async def test_a_block_that_fails_leaves_nothing_and_keeps_the_failure() -> None:
    marker = uuid.uuid4().hex
    with anyio.fail_after(BOUND_S), pytest.raises(LookupError, match="the test's own"):
        async with headless_page(marker=marker) as page:
            await page.set_content("<p>hello</p>")
            seen, profile = processes_of(marker), profile_of(marker)
            raise LookupError("the test's own failure")
    assert_all_gone(seen, marker, profile)


async def test_a_cancelled_block_leaves_nothing() -> None:
    marker = uuid.uuid4().hex
    with anyio.fail_after(BOUND_S):
        with anyio.CancelScope() as scope:
            async with headless_page(marker=marker) as page:
                await page.set_content("<p>hello</p>")
                seen, profile = processes_of(marker), profile_of(marker)
                scope.cancel()
                await anyio.sleep(BOUND_S)
        assert scope.cancelled_caught
    assert_all_gone(seen, marker, profile)


async def test_a_browser_killed_under_the_block_leaves_nothing() -> None:
    marker = uuid.uuid4().hex
    with anyio.fail_after(BOUND_S):
        async with headless_page(marker=marker) as page:
            await page.set_content("<p>hello</p>")
            seen, profile = processes_of(marker), profile_of(marker)
            async with page.context.expect_event("close"):
                browser_under_this_process(marker).kill()
            with pytest.raises(Exception, match="closed"):
                await page.set_content("<p>again</p>")
    assert_all_gone(seen, marker, profile)
