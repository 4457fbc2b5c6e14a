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
"""

from __future__ import annotations

import gc
import os

__all__ = ["freeze_loaded_heap"]

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
