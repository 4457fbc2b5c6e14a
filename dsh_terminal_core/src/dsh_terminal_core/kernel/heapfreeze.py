"""Keep the host's long-lived heap out of the cyclic garbage collector's full passes.

Once the plugins are loaded, most of a host's container objects are there for good:
modules, classes, functions, schemas, containers. Python's cyclic collector walks every
one of them again on each full (generation 2) pass, and a full pass comes whenever enough
new objects survived, opening terminals included: over a loaded host that is 10-50 ms
with the event loop stopped, far longer than anything an open does itself. Freezing
moves what is alive at that moment to a permanent generation the collector skips.

Frozen objects are still freed by reference counting; only a reference cycle among them
is never collected, so the heap is collected once just before, and the freeze happens
once per process (later harnesses in the same process add little that lives as long).

The young generation is widened too (:func:`widen_young_generation`). Every send in
flight holds some forty tracked objects (its coroutines, futures, operation, ladder,
buffers) until it settles, so with a thousand terminals busy the interpreter's default
of a collection per 700 new objects ran one every few sends: measured over 20,000 sends
across 1,000 sessions, 443 young and 40 middle collections took 0.44 s of the host's
3.5 s and collected nothing, every one of them walking sends still in flight. A
threshold of 20,000 makes that a collection per few hundred sends; cyclic garbage, what
only the collector frees, waits that much longer.
"""

from __future__ import annotations

import gc
import os

__all__ = ["YOUNG_THRESHOLD", "freeze_loaded_heap", "widen_young_generation"]

YOUNG_THRESHOLD = 20_000
"""New tracked objects between two collections of the young generation."""

_INTERPRETER_DEFAULT = (700, 10, 10)
_frozen_in: int | None = None


def freeze_loaded_heap() -> bool:
    """Collect, then freeze every object alive now; once per process. True if it froze."""
    global _frozen_in
    if _frozen_in == os.getpid():
        return False
    _frozen_in = os.getpid()
    gc.collect()
    gc.freeze()
    return True


def widen_young_generation() -> bool:
    """Raise the young generation's threshold to :data:`YOUNG_THRESHOLD`; True if it did.

    Only while the collector still has the interpreter's default thresholds: a host that
    set its own keeps them. The older generations keep theirs (collected every tenth
    younger collection, as before).
    """
    current = gc.get_threshold()
    if current != _INTERPRETER_DEFAULT:
        return False
    gc.set_threshold(YOUNG_THRESHOLD, current[1], current[2])
    return True
