"""The stdin-wait probe on macOS (and any other non-Linux POSIX): declared absent.

macOS exposes no per-thread "blocked in syscall N with these arguments" view without
attaching a debugger, so there is no exact answer to give. Rather than guess from
process state, the probe always answers False; the bash backend then settles on a stable
prompt or on silence instead.
"""

from __future__ import annotations

from .inspector import NullStdinProbe

__all__ = ["MacStdinProbe"]


class MacStdinProbe(NullStdinProbe):
    """Always False: ``input_waiting`` is never claimed on this platform."""
