"""The remover ``subscribe`` hands back: it takes out exactly the entry it added, once."""

from __future__ import annotations

from collections.abc import Callable

from dsh_terminal_core.kernel.cancel import Cancellation
from dsh_terminal_core.kernel.subscribe import subscribe


def _listener(_reason: BaseException) -> None:
    return None


def test_a_remover_takes_out_its_entry_once() -> None:
    listeners: list[Callable[[BaseException], None]] = []
    first = subscribe(listeners, _listener)
    second = subscribe(listeners, _listener)  # the same callback twice: two entries
    assert listeners == [_listener, _listener]
    first()
    first()  # a second call does not take out the entry the other remover owns
    assert listeners == [_listener]
    second()
    assert listeners == []
    second()
    assert listeners == []


def test_a_remover_after_the_list_let_go_of_its_entry_does_nothing() -> None:
    listeners: list[Callable[[BaseException], None]] = []
    remove = subscribe(listeners, _listener)
    listeners.clear()
    other = subscribe(listeners, print)
    remove()
    assert listeners == [print]
    other()
    assert listeners == []


def test_a_forgotten_callback_is_not_called_on_cancel() -> None:
    token = Cancellation()
    seen: list[str] = []
    forget = token.on_cancel(lambda reason: seen.append("forgotten"))
    token.on_cancel(lambda reason: seen.append(str(reason)))
    forget()
    token.cancel(RuntimeError("stop"))
    assert seen == ["stop"]
