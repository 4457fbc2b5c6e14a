"""The tool-argument check on the send path: the compiled subset against fastjsonschema.

```
python3 bench/argcheck.py            # 200,000 checks per tool and engine, best of 5
```

Every tool call checks its arguments before the tool runs. The registry compiles each
schema once into a predicate (:mod:`dsh_terminal_core.kernel.schemacheck`, the subset of
JSON Schema tool schemas use) and asks the full ``jsonschema`` validator only for what
the predicate does not accept. SPEC §20 says to use a maintained validator compiled once
per schema, ``fastjsonschema``, unless it is measured slower on the send path than the
subset. This measures both on the same valid arguments, in the same process, for the
tools a model calls most; the ratio is what to compare between machines.
"""

from __future__ import annotations

import argparse
import asyncio
import timeit
from collections.abc import Mapping
from typing import Any

import fastjsonschema

from dsh_terminal_core.kernel.harness import Harness
from dsh_terminal_core.kernel.schemacheck import compile_check

CALLS: dict[str, dict[str, Any]] = {
    "terminal_send": {"sessionId": "pty-1", "text": "echo hi", "timeoutMs": 30000},
    "terminal_read": {"sessionId": "pty-1", "offset": 1, "count": 200},
    "pty_send": {"id": "pty-1", "data": "print(1)"},
    "job_output": {"jobId": "job-1", "wait": True},
}


async def _parameters() -> dict[str, Mapping[str, Any]]:
    async with Harness() as h:
        return {name: h.ctx.tools.get(name).parameters for name in CALLS}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checks", type=int, default=200_000)
    args = parser.parse_args()
    parameters = asyncio.run(_parameters())
    print(f"{'tool':<15} {'subset µs':>10} {'fastjsonschema µs':>18} {'ratio':>6}")
    for name, call in CALLS.items():
        schema = parameters[name]
        subset = compile_check(schema)
        compiled = fastjsonschema.compile(dict(schema))
        assert subset is not None and subset(call), name
        compiled(call)
        n = args.checks
        t_subset = min(timeit.repeat(lambda c=call, f=subset: f(c), number=n, repeat=5)) / n * 1e6
        t_fast = min(timeit.repeat(lambda c=call, f=compiled: f(c), number=n, repeat=5)) / n * 1e6
        print(f"{name:<15} {t_subset:>10.2f} {t_fast:>18.2f} {t_fast / t_subset:>6.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
