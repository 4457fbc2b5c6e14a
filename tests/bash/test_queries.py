"""A line session's own answers to cursor-position and device-attribute queries."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_terminal_bash.queries import DA1_REPLY, DA2_REPLY, LineQueries


def test_cpr_reports_the_last_row_and_the_column_the_line_reached() -> None:
    queries = LineQueries(rows=30, cols=100)
    assert queries.feed(b"done\r\nabc\x1b[6n") == b"\x1b[30;4R"
    assert queries.feed(b"\x1b[1mde\x1b[0m\x1b[?6n") == b"\x1b[?30;6;1R"


def test_device_attributes_primary_and_secondary() -> None:
    queries = LineQueries(rows=24, cols=80)
    assert queries.feed(b"\x1b[c\x1b[0c\x1b[>c\x1b[>0c") == DA1_REPLY * 2 + DA2_REPLY * 2


def test_a_query_split_across_chunks_is_answered_once_complete() -> None:
    queries = LineQueries(rows=24, cols=80)
    assert queries.feed(b"ab\x1b") == b""
    assert queries.feed(b"[") == b""
    assert queries.feed(b"6") == b""
    assert queries.feed(b"n") == b"\x1b[24;3R"


def test_a_resize_changes_the_reported_row() -> None:
    queries = LineQueries(rows=24, cols=80)
    queries.resize(40, 120)
    assert queries.feed(b"\x1b[6n") == b"\x1b[40;1R"


def test_output_without_queries_costs_no_reply() -> None:
    queries = LineQueries(rows=24, cols=80)
    assert queries.feed(b"plain text\r\n\x1b[32mgreen\x1b[0m\r\n") == b""


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(max_size=40), max_size=30))
def test_any_bytes_in_any_pieces_give_well_formed_replies(chunks: list[bytes]) -> None:
    queries = LineQueries(rows=24, cols=80)
    for chunk in chunks:
        reply = queries.feed(chunk)
        assert reply == b"" or reply.startswith(b"\x1b[")
