"""System-prompt sections contributed by plugins and assembled in order."""

from __future__ import annotations

import attrs

from .errors import DshError

__all__ = ["PromptSection", "SystemPrompt"]


@attrs.frozen(kw_only=True)
class PromptSection:
    name: str
    order: int
    text: str


class SystemPrompt:
    """Named sections; :meth:`render` joins them by ``order`` then by insertion."""

    def __init__(self) -> None:
        self._sections: dict[str, PromptSection] = {}

    def section(self, name: str, order: int, text: str) -> None:
        """Add a section; re-adding a name replaces it (a reloaded plugin updates its text)."""
        if not name or not isinstance(order, int):
            raise DshError("a prompt section needs a name and an integer order", "INVALID_ARGUMENT")
        self._sections.pop(name, None)
        self._sections[name] = PromptSection(name=name, order=order, text=text.strip())

    def remove(self, name: str) -> None:
        self._sections.pop(name, None)

    def sections(self) -> list[PromptSection]:
        indexed = list(enumerate(self._sections.values()))
        return [s for _, s in sorted(indexed, key=lambda pair: (pair[1].order, pair[0]))]

    def render(self) -> str:
        return "\n\n".join(s.text for s in self.sections() if s.text)
