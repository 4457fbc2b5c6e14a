"""Group MI records into responses, on our side of the byte stream.

``ctx.pty`` hands over complete lines and nothing else; which lines answer which command
is MI's business. A response to the command sent with token ``N`` is every record that
arrived since the previous response, through the result record ``N^...`` and up to the
``(gdb)`` prompt that follows it. Out-of-band records that come after that prompt (a
``*stopped`` once the target halts after ``^running``) stay buffered for the next
:meth:`MiFramer.take_until_stopped` or response.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

from .records import MiRecord, RecordKind, parse_line

__all__ = ["MiFramer"]


class MiFramer:
    """A buffer of parsed records with the two ways of taking them out.

    ``echoes`` are input lines the terminal is expected to echo back (the commands we
    wrote); the first ``OTHER`` line equal to the oldest one is dropped instead of kept.
    """

    def __init__(self) -> None:
        self._records: list[MiRecord] = []
        self._echoes: deque[str] = deque(maxlen=64)

    def expect_echo(self, line: str) -> None:
        self._echoes.append(line)

    def feed(self, lines: Iterable[str]) -> None:
        for line in lines:
            record = parse_line(line)
            if record.kind is RecordKind.OTHER and line in self._echoes:
                self._echoes.remove(line)
                continue
            self._records.append(record)

    @property
    def pending(self) -> list[MiRecord]:
        """Buffered records, oldest first (a copy)."""
        return list(self._records)

    def take_all(self) -> list[MiRecord]:
        """Remove and return every buffered record except prompts."""
        taken, self._records = self._records, []
        return _without_prompts(taken)

    def take_until_prompt(self) -> list[MiRecord] | None:
        """Records through the first prompt (startup banner), or None if none arrived."""
        for index, record in enumerate(self._records):
            if record.kind is RecordKind.PROMPT:
                return self._take(index)
        return None

    def take_response(self, token: int) -> list[MiRecord] | None:
        """The complete response to ``token``, or None while it is incomplete.

        Complete means: the result record carrying ``token`` and then a prompt — except
        after ``^exit``, which gdb never follows with a prompt.
        """
        for index, record in enumerate(self._records):
            if record.kind is not RecordKind.RESULT or record.token != token:
                continue
            if record.record_class == "exit":
                return self._take(index)
            for later in range(index + 1, len(self._records)):
                if self._records[later].kind is RecordKind.PROMPT:
                    return self._take(later)
            return None
        return None

    def take_until_stopped(self) -> list[MiRecord] | None:
        """Records through the next ``*stopped`` (and a prompt right after it), or None."""
        for index, record in enumerate(self._records):
            if record.is_stopped:
                following = index + 1
                if (
                    following < len(self._records)
                    and self._records[following].kind is RecordKind.PROMPT
                ):
                    index = following
                return self._take(index)
        return None

    def _take(self, last: int) -> list[MiRecord]:
        taken = self._records[: last + 1]
        del self._records[: last + 1]
        return _without_prompts(taken)


def _without_prompts(records: list[MiRecord]) -> list[MiRecord]:
    return [r for r in records if r.kind is not RecordKind.PROMPT]
