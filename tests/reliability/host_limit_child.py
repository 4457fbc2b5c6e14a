"""Run by ``test_host_limits``: a harness in a process whose open-file limit is low.

    python host_limit_child.py LIMIT OWNER MODE BATCH DEEP

Sets ``RLIMIT_NOFILE`` (soft and hard) to ``LIMIT`` before anything is imported, builds a
harness with every plugin (``MODE``: ``danger-full-access`` or ``workspace-write``), then
opens sessions through ``terminal_open``, ``BATCH`` at once, until one is refused, tries
once more, checks the sessions already open still answer a send, disposes the owner and
prints what it saw as one JSON object.

``DEEP`` 1 sets the provider's descriptor headroom to nothing, so the opens run into the
limit itself, wherever in an open it bites. The open sessions then have no descriptor
left for the looks a proven settle takes (nor has this script for reading ``/proc``), so
the newest session is closed before anything else is checked.
"""

from __future__ import annotations

import resource
import sys

LIMIT = int(sys.argv[1])
resource.setrlimit(resource.RLIMIT_NOFILE, (LIMIT, LIMIT))

import asyncio  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402

from dsh_terminal_bash.census import shells_of  # noqa: E402
from dsh_terminal_core.kernel.harness import Harness  # noqa: E402
from dsh_terminal_core.provider import hostlimits  # noqa: E402

OWNER, MODE, BATCH, DEEP = sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5] == "1"
MAX_OPENS = 400


def _sessions_of(pids: list[int]) -> dict[int, int]:
    """POSIX session of each pid still there."""
    found = {}
    for pid in pids:
        try:
            found[pid] = os.getsid(pid)
        except OSError:
            continue
    return found


async def main() -> dict[str, Any]:
    if DEEP:
        hostlimits.DESCRIPTOR_HEADROOM = 0  # type: ignore[misc]
        hostlimits.DESCRIPTORS_PER_OPEN = 0  # type: ignore[misc]
    out: dict[str, Any] = {"limit": resource.getrlimit(resource.RLIMIT_NOFILE)}
    with tempfile.TemporaryDirectory() as workspace:
        config = {
            "sandbox-policy": {"mode": MODE, "workspace_root": workspace},
            "terminals": {"max_sessions_per_owner": MAX_OPENS + 8},
        }
        async with Harness(config=config) as h:
            agent = h.create_agent(OWNER)
            opened: list[dict[str, Any]] = []
            refusals: list[str] = []
            while len(opened) < MAX_OPENS and not refusals:
                batch = await asyncio.gather(
                    *(h.call_tool(agent, "terminal_open", {"type": "shell"}) for _ in range(BATCH))
                )
                for result in batch:
                    if result.is_error:
                        refusals.append(result.text)
                    else:
                        opened.append(result.value)
            # One more on its own: refused too, or (fewer opens in flight need less
            # room) opened like any other.
            again = await h.call_tool(agent, "terminal_open", {"type": "shell"})
            if again.is_error:
                refusals.append(again.text)
            else:
                opened.append(again.value)
            if DEEP and opened:
                newest = opened.pop()
                closed = await h.call_tool(
                    agent, "terminal_close", {"sessionId": newest["sessionId"]}
                )
                out["closed_newest"] = closed.text if closed.is_error else "closed"
            out["opened"] = len(opened)
            out["refusals"] = refusals
            listed = await h.call_tool(agent, "terminal_list", {})
            out["listed"] = sorted(s["sessionId"] for s in listed.value["sessions"])
            out["ids"] = sorted(v["sessionId"] for v in opened)
            # Every process of the owner belongs to an open session: nothing of the
            # refused opens is left (a shell leads its terminal's POSIX session).
            leaders = {int(v["pid"]) for v in opened}
            marked = shells_of(OWNER)
            out["marked"] = len(marked)
            out["strays"] = sorted(
                pid for pid, sid in _sessions_of(marked).items() if sid not in leaders
            )
            answers = []
            for value in opened:
                sid = value["sessionId"]
                token = f"still-{sid}"
                sent = await h.call_tool(
                    agent, "terminal_send", {"sessionId": sid, "text": f"echo {token}"}
                )
                got = sent.value or {}
                answers.append(
                    {
                        "token": token,
                        "error": sent.text if sent.is_error else None,
                        "waitReason": got.get("waitReason"),
                        "viewport": got.get("viewport"),
                    }
                )
            out["answers"] = answers
            began = time.perf_counter()
            await agent.dispose()
            out["dispose_s"] = time.perf_counter() - began
            deadline = time.monotonic() + 5
            left = shells_of(OWNER)
            while left and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
                left = shells_of(OWNER)
            out["left_after_dispose"] = left
    return out


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main())))
