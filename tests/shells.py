"""Run a suite once per shell backend: bash (type ``shell``), zsh and fish (SPEC §32.4).

A module takes part by importing :func:`each_shell` (an autouse fixture, so every test
of the module runs for each shell, and :func:`tests.helpers.open_shell` opens that
shell). A test that holds for other shells than :data:`DEFAULT_SHELLS` says so with
``@pytest.mark.shells(...)`` and is skipped, naming why, for the others. :func:`syntax`
gives the few commands whose spelling differs between the shells.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator

import pytest

from . import helpers

#: The shells a run covers; ``DSH_TEST_SHELLS=shell`` narrows a run to bash (the world
#: run of the readiness suites does, to keep its time: tests/worlds/test_world_stdio.py).
SHELLS = tuple(os.environ.get("DSH_TEST_SHELLS", "shell,zsh,fish").split(","))
#: Where a test names no shells: all three (a test that holds for fewer says so).
DEFAULT_SHELLS = ("shell", "zsh", "fish")
_PROGRAM = {"shell": "bash", "zsh": "zsh", "fish": "fish"}

# Spellings that differ: a subshell exiting with a status, and the status of the last command.
_EXIT = {"shell": "(exit {0})", "zsh": "(exit {0})", "fish": "sh -c 'exit {0}'"}
_STATUS = {"shell": "$?", "zsh": "$?", "fish": "$status"}


_LOOP = {"shell": "while :; do :; done", "zsh": "while :; do :; done", "fish": "while true; end"}


def busy_loop() -> str:
    """An endless loop of builtins in the current shell's syntax (no command is forked)."""
    return _LOOP[helpers.shell_type]


def exit_with(code: int) -> str:
    """A command that only sets the last status to ``code``, in the current shell's syntax."""
    return _EXIT[helpers.shell_type].format(code)


def status_var() -> str:
    """The current shell's spelling of the last command's status."""
    return _STATUS[helpers.shell_type]


_NESTED = {"shell": ("bash --norc", "bash"), "zsh": ("zsh", "zsh -d"), "fish": ("fish", "fish")}


def nested(plain: bool = False) -> str:
    """A command starting the current shell again inside the session: one that keeps the
    user's rc files out, or (``plain``) the bare program."""
    return _NESTED[helpers.shell_type][1 if plain else 0]


# The status a line of builtins leaves when a Ctrl-C stops it: bash's 130; zsh's 130 too
# (its TRAPINT), or 1 when the signal lands inside a builtin's write, which then fails;
# fish's 130 comes from its protocol's SIGINT handler (docs/shells.md).
_INTERRUPTED = {"shell": (130,), "zsh": (130, 1), "fish": (130,)}


def interrupted_codes() -> tuple[int, ...]:
    """The exit codes the current shell reports for a line a Ctrl-C stopped in a builtin."""
    return _INTERRUPTED[helpers.shell_type]


# Every shell runs a flow's full rounds (fish's sends settle as fast as the others' since
# its helper threads are declared: docs/shells.md).
_ROUND_SHARE = {"shell": 1, "zsh": 1, "fish": 1}


def rounds(full: int) -> int:
    """How many of a flow's ``full`` rounds the current shell runs (at least 5)."""
    return max(5, full // _ROUND_SHARE[helpers.shell_type])


def current() -> str:
    return helpers.shell_type


@pytest.fixture(autouse=True, params=SHELLS)
def each_shell(request: pytest.FixtureRequest) -> Iterator[str]:
    """Open every shell of the test as ``request.param``; skip where that shell is missing
    or the test is marked for other shells only."""
    kind = request.param
    marker = request.node.get_closest_marker("shells")
    kinds = marker.args if marker is not None else DEFAULT_SHELLS
    if kind not in kinds:
        pytest.skip(f"runs for {', '.join(kinds)} only")
    if shutil.which(_PROGRAM[kind]) is None:
        pytest.skip(f"{_PROGRAM[kind]} is not installed (scripts/install.sh --test installs it)")
    helpers.shell_type = kind
    try:
        yield kind
    finally:
        helpers.shell_type = "shell"
