"""The randomized readiness stress with its oracle, at a size that fits the suite.

The full-size run (at least 5,000 settlements) is a command of its own, with its figure
in the README: ``python3 tests/reliability/oracle.py --ops 5000 --seed 1``.
"""

from __future__ import annotations

from .oracle import run_oracle


async def test_randomized_flows_never_settle_wrongly() -> None:
    report = await run_oracle(operations=240, seed=20261130, streams=4)
    print("FIGURE oracle", report.as_dict())
    assert report.operations >= 240
    assert report.wrong == 0, report.failures
    assert report.unexpected == 0, report.failures
    # Every kind of flow ran.
    assert set(report.kinds) >= {"plain", "timeout", "cancel", "wait", "background"}
