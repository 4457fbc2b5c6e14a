"""What a model is shown of line-session behaviours SPEC §27 names, one row each.

Prints a table of observed values for the installed code (or whatever ``PYTHONPATH``
puts first, to compare with an older checkout). Not timed: behaviour, not speed.

    python3 bench/line_fidelity.py [--mode workspace-write|danger-full-access]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import tempfile
from pathlib import Path
from typing import Any

from dsh_terminal_core import Harness


async def _send(h: Harness, agent: Any, sid: str, **args: Any) -> dict[str, Any]:
    result = await h.call_tool(agent, "terminal_send", {"sessionId": sid, **args})
    return dict(result.value) if not result.is_error else {"error": result.text}


async def _open(h: Harness, agent: Any) -> str:
    return str((await h.call_tool(agent, "terminal_open", {"type": "shell"})).value["sessionId"])


async def run(mode: str) -> list[tuple[str, Any]]:
    rows: list[tuple[str, Any]] = []
    casts = Path(tempfile.mkdtemp(prefix="dsh-fidelity-"))
    config = {
        "sandbox-policy": {"mode": mode},
        "recording": {"dir": str(casts), "max_bytes": 65536},
    }
    async with Harness(config=config) as h:
        agent = h.create_agent("fidelity")
        sid = await _open(h, agent)
        await _send(h, agent, sid, text="stty -echo; cat")
        rows.append(
            (
                "`stty -echo; cat`, then `abcdé`",
                (await _send(h, agent, sid, text="abcdé"))["viewport"],
            )
        )
        await h.call_tool(agent, "terminal_signal", {"sessionId": sid, "signal": "SIGINT"})
        await _send(h, agent, sid)
        await _send(h, agent, sid, text="stty echo")
        await _send(h, agent, sid, text='read -s pw; echo "$pw"')
        rows.append(
            (
                '`read -s pw; echo "$pw"`, then the value',
                (await _send(h, agent, sid, text="value-42"))["viewport"],
            )
        )
        progress = await _send(h, agent, sid, text=r"printf '\rX 0%%\r\rX Done\r\r\n'")
        rows.append(("`printf '\\rX 0%%\\r\\rX Done\\r\\r\\n'`", progress["viewport"]))
        flood = await _send(h, agent, sid, text="seq 1 100000")
        hint = re.search(r"\[… .* …\]", flood["viewport"])
        rows.append(("`seq 1 100000`: the hint", hint.group(0) if hint else None))
        offset = re.search(r"offset=(\d+)", hint.group(0) if hint else "")
        if offset:
            page = await h.call_tool(
                agent,
                "terminal_read",
                {"sessionId": sid, "offset": int(offset.group(1)), "count": 3},
            )
            rows.append(("... that offset read back (3 lines)", page.value["text"]))
        for command in ("kill -KILL $$", "exit 137"):
            other = await _open(h, agent)
            ended = await _send(h, agent, other, text=command)
            rows.append((f"`{command}`: sessionStatus", ended["sessionStatus"]))
        rec = await _open(h, agent)
        await _send(h, agent, rec, text="seq 1 300000")
        await h.call_tool(agent, "terminal_close", {"sessionId": rec})
    sizes = sorted(p.stat().st_size for p in casts.glob("*.cast"))
    rows.append(("capped recordings (max_bytes 65536): file sizes", sizes))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mode", default="workspace-write")
    args = parser.parse_args()
    for name, value in asyncio.run(run(args.mode)):
        print(f"| {name} | {json.dumps(value, ensure_ascii=False)} |")


if __name__ == "__main__":
    main()
