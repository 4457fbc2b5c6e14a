"""Once the plugins are loaded, the harness keeps the loaded heap out of the collector's
full passes: once per process, and not at all for a host that manages the collector."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

_PROGRAM = textwrap.dedent(
    """
    import asyncio, gc, json, sys
    from dsh_terminal_core.harness import Harness
    from dsh_terminal_core.heapfreeze import freeze_loaded_heap

    async def main():
        freeze = sys.argv[1] == "on"
        counts = [gc.get_freeze_count()]
        for _ in range(2):
            async with Harness(freeze_heap=freeze):
                counts.append(gc.get_freeze_count())
        garbage = []
        garbage.append(garbage)  # a cycle made after the freeze is still collected
        del garbage
        collected = gc.collect()
        again = freeze_loaded_heap()  # False once this process froze
        print(json.dumps({"counts": counts, "collected": collected, "again": again}))

    asyncio.run(main())
    """
)


def _run(mode: str) -> dict[str, object]:
    out = subprocess.run(
        [sys.executable, "-c", _PROGRAM, mode],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    result: dict[str, object] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


@pytest.mark.parametrize("mode", ["on", "off"])
def test_the_loaded_heap_is_frozen_once_per_process_unless_the_host_says_no(mode: str) -> None:
    result = _run(mode)
    before, first, second = result["counts"]  # type: ignore[misc]
    assert before == 0
    if mode == "on":
        assert first > 1000  # modules, classes, functions, containers of every plugin
        assert second > 1000
        assert result["again"] is False  # frozen once for the process, not per harness
    else:
        assert first == second == 0
        assert result["again"] is True  # nothing froze it before
    assert result["collected"] >= 1
