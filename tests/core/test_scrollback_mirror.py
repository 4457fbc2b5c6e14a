"""A scrollback fed what another one observed reads exactly as that one (SPEC §21 mirror)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_terminal_core.registry.scrollback import Scrollback
from dsh_terminal_core.registry.types import ReadResult

# Text as the sanitizer hands it over: newlines, backspaces, wide and plain characters.
CHUNKS = st.lists(
    st.text(alphabet=st.sampled_from([*"ab \n\b\r", "é", "語"]), max_size=40),
    max_size=60,
)


def _state(scrollback: Scrollback) -> tuple[object, ...]:
    reads: list[ReadResult] = [
        scrollback.read(offset, count, max_bytes)
        for offset in (1, scrollback.first_line + 1, max(1, scrollback.total_lines - 2))
        for count, max_bytes in ((5, 10_000), (500, 64))
    ]
    return (
        scrollback.total_lines,
        scrollback.first_line,
        scrollback.open_line,
        scrollback.open_line_number,
        scrollback.retained_bytes,
        scrollback.dropped,
        scrollback.lines_since(0),
        scrollback.tail_text(100),
        tuple(reads),
    )


@settings(max_examples=300, deadline=None)
@given(chunks=CHUNKS, max_lines=st.integers(1, 12), max_bytes=st.integers(1, 200))
def test_the_observed_appends_rebuild_the_same_scrollback(
    chunks: list[str], max_lines: int, max_bytes: int
) -> None:
    source = Scrollback(max_lines=max_lines, max_bytes=max_bytes)
    mirror = Scrollback(max_lines=max_lines, max_bytes=max_bytes)
    seen: list[str] = []
    source.observe(seen.append)
    for chunk in chunks:
        source.append(chunk)
        for text in seen:
            mirror.append(text)
        seen.clear()
        assert _state(mirror) == _state(source)


@settings(max_examples=300, deadline=None)
@given(
    before=CHUNKS,
    after=CHUNKS,
    max_lines=st.integers(1, 12),
    max_bytes=st.integers(1, 200),
)
def test_a_mirror_started_from_an_image_stays_equal(
    before: list[str], after: list[str], max_lines: int, max_bytes: int
) -> None:
    # What a session printed before the mirror existed arrives as one image; then the
    # observed appends follow.
    source = Scrollback(max_lines=max_lines, max_bytes=max_bytes)
    for chunk in before:
        source.append(chunk)
    mirror = Scrollback.from_image(source.image(), max_lines=max_lines, max_bytes=max_bytes)
    assert _state(mirror) == _state(source)
    source.observe(mirror.append)
    for chunk in after:
        source.append(chunk)
        assert _state(mirror) == _state(source)


def test_a_removed_observer_sees_nothing_more() -> None:
    source = Scrollback()
    seen: list[str] = []
    remove = source.observe(seen.append)
    source.append("one\n")
    remove()
    remove()  # harmless twice
    source.append("two\n")
    assert seen == ["one\n"]
