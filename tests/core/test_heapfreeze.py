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


_THRESHOLDS = textwrap.dedent(
    """
    import asyncio, gc, json, sys
    from dsh_terminal_core.kernel.harness import Harness

    async def main():
        mode = sys.argv[1]
        if mode == "host-set":
            gc.set_threshold(1234, 5, 6)
        before = gc.get_threshold()
        async with Harness(freeze_heap=mode != "off"):
            during = gc.get_threshold()
        print(json.dumps({"before": before, "during": during}))

    asyncio.run(main())
    """
)


@pytest.mark.parametrize("mode", ["default", "host-set", "off"])
def test_the_young_generation_is_widened_only_from_the_interpreter_default(mode: str) -> None:
    out = subprocess.run(
        [sys.executable, "-c", _THRESHOLDS, mode],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    result = json.loads(out.stdout.strip().splitlines()[-1])
    if mode == "default":
        assert result["before"] == [700, 10, 10]
        assert result["during"] == [20_000, 10, 10]
    else:  # a host's own thresholds, or a host that manages the collector, are kept
        assert result["during"] == result["before"]
