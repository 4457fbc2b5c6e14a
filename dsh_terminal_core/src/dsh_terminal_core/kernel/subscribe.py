"""One way to add a listener to a list and hand back the function that takes it out.

Sessions, scrollbacks, agents, cancellation tokens, the provider and the registry all
keep lists of callbacks with removers; they share this so every remover behaves alike:
it takes out exactly the entry it added, once, so a second call cannot remove the same
callback added again since (a list may hold one callback twice).

The remover is one small object, not a closure: every send subscribes to its caller's
cancellation token twice, and a closure over three variables is five objects the
garbage collector traverses for as long as the send is in flight (with a thousand sends
in flight, those passes were a quarter of the harness's CPU).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

__all__ = ["Remover", "subscribe"]

_T = TypeVar("_T")


class Remover(Generic[_T]):
    """Takes ``listener`` out of ``listeners`` when called; harmless to call twice."""

    __slots__ = ("_listener", "_listeners")

    def __init__(self, listeners: list[_T], listener: _T) -> None:
        self._listeners: list[_T] | None = listeners
        self._listener = listener

    def __call__(self) -> None:
        listeners, self._listeners = self._listeners, None
        if listeners is not None and self._listener in listeners:
            listeners.remove(self._listener)


def subscribe(listeners: list[_T], listener: _T) -> Callable[[], None]:
    """Append ``listener`` to ``listeners``; return its remover (harmless to call twice)."""
    listeners.append(listener)
    return Remover(listeners, listener)
