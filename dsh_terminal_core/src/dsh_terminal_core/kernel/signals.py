"""The signals a caller may send to a terminal's foreground group, in one place.

The registry validates names against :data:`ALLOWED_SIGNALS` (and the terminal tools
offer them as an enum); the provider maps the same names to numbers.
"""

from __future__ import annotations

import signal

__all__ = ["ALLOWED_SIGNALS", "FOREGROUND_SIGNALS"]

ALLOWED_SIGNALS: tuple[str, ...] = ("SIGINT", "SIGTERM", "SIGKILL", "SIGTSTP", "SIGHUP")

FOREGROUND_SIGNALS: dict[str, signal.Signals] = {
    name: signal.Signals[name]
    for name in ALLOWED_SIGNALS
    if hasattr(signal, name)  # all of them on POSIX; importable elsewhere
}
