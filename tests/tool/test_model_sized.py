"""Results sized for a model: head and tail within the budget, the middle paged exactly."""

from __future__ import annotations

import re

from dsh_terminal_core.kernel.harness import Harness
from dsh_tool_terminal.config import DEFAULT_RESULT_BYTES

from ..helpers import full_access

MARKER = re.compile(
    r"\[… (\d+) lines \(\d+ bytes\) omitted: lines (\d+)-(\d+); "
    r"read them with terminal_read offset=(\d+) …\]"
)
BUILD = (
    "echo 'src/a.c:3: error: first thing that broke'; "
    "seq -f 'src/b.c:%g: warning: noise' 6000; echo 'make: *** [all] Error 1'; false"
)


async def test_a_long_build_keeps_its_first_error_and_its_last_line() -> None:
    async with Harness(config=full_access()) as h:
        agent = h.create_agent("a")
        sid = (await h.call_tool(agent, "terminal_open", {})).value["sessionId"]  # type: shell
        sent = await h.call_tool(agent, "terminal_send", {"sessionId": sid, "text": BUILD})
        assert len(sent.text.encode()) <= DEFAULT_RESULT_BYTES
        assert sent.text.startswith("src/a.c:3: error: first thing that broke\n")
        assert sent.text.endswith(
            "make: *** [all] Error 1\n[stdin_read: waiting for input; exit code 1; "
            "output shortened to fit, as marked above]"
        )
        assert sent.value["truncated"] and sent.value["exitCode"] == 1
        lines = sent.value["viewport"].split("\n")
        [marker] = [line for line in lines if line.startswith("[… ")]
        count, begin, end, offset = map(int, MARKER.fullmatch(marker).groups())  # type: ignore[union-attr]
        assert offset == begin and count == end - begin + 1
        before = lines[lines.index(marker) - 1]
        after = lines[lines.index(marker) + 1]

        # Paging the middle from the marker's numbers returns exactly the omitted lines.
        middle: list[str] = []
        at = offset
        while at <= end:
            page = await h.call_tool(
                agent,
                "terminal_read",
                {"sessionId": sid, "offset": at, "count": min(2000, end - at + 1)},
            )
            assert page.value["lineBegin"] == at and not page.is_error
            middle += page.value["text"].split("\n")
            assert len(page.text.encode()) <= DEFAULT_RESULT_BYTES
            at = page.value["lineEnd"] + 1
        assert len(middle) == count
        numbers = [int(line.split(":")[1]) for line in middle]
        assert numbers == list(range(numbers[0], numbers[0] + count))
        assert int(before.split(":")[1]) + 1 == numbers[0]
        assert numbers[-1] + 1 == int(after.split(":")[1])


async def test_a_configured_budget_bounds_sends_and_reads() -> None:
    config = full_access(**{"tool-terminal": {"max_result_bytes": 4096}})
    async with Harness(config=config) as h:
        agent = h.create_agent("a")
        sid = (await h.call_tool(agent, "terminal_open", {"type": "shell"})).value["sessionId"]
        sent = await h.call_tool(
            agent, "terminal_send", {"sessionId": sid, "text": "seq 100000 103000"}
        )
        assert len(sent.text.encode()) <= 4096 and sent.text.startswith("100000\n")
        assert "103000\n[stdin_read" in sent.text and "terminal_read offset=" in sent.text
        page = await h.call_tool(agent, "terminal_read", {"sessionId": sid, "count": 3000})
        assert len(page.text.encode()) <= 4096
        assert page.value["truncated"] and page.value["lineEnd"] < 3000
        assert page.text.endswith(f"[more: terminal_read offset={page.value['lineEnd'] + 1}]")
