"""One way to add a listener to a list and hand back the function that takes it out.

Sessions, scrollbacks, agents, cancellation tokens, the provider and the registry all
keep lists of callbacks with removers; they share this so every remover behaves alike:
it takes out exactly the entry it added, once, so a second call cannot remove the same
callback added again since (a list may hold one callback twice).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

__all__ = ["subscribe"]

_T = TypeVar("_T")


def subscribe(listeners: list[_T], listener: _T) -> Callable[[], None]:
    """Append ``listener`` to ``listeners``; return its remover (harmless to call twice)."""
    listeners.append(listener)
    removed = False

    def remove() -> None:
        nonlocal removed
        if removed:
            return
        removed = True
        if listener in listeners:
            listeners.remove(listener)

    return remove
