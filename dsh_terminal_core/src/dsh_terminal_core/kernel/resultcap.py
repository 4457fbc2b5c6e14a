"""Byte caps for model-facing text.

Every text a model sees is bounded in UTF-8 bytes. Metadata (a status line, an id) is
kept whole; the body is cut on a code point boundary and a marker says how much was
dropped. When even the metadata does not fit, the whole text is cut as a last resort.
"""

from __future__ import annotations

from typing import Literal

from .textbounds import utf8_head, utf8_len, utf8_tail

__all__ = ["MAX_RESULT_BYTES", "MIN_CAP_BYTES", "cap_text"]

MIN_CAP_BYTES = 64

# The default bound of one model-facing result (tool text, a job's kept output): 256 KiB,
# far above what a model needs to read at once and far below what would flood it.
MAX_RESULT_BYTES = 256 * 1024


def cap_text(
    text: str,
    max_bytes: int,
    *,
    prefix: str = "",
    suffix: str = "",
    keep: Literal["head", "tail"] = "head",
) -> str:
    """Return ``prefix + body + suffix`` within ``max_bytes`` UTF-8 bytes.

    ``text`` is the body. ``keep="tail"`` keeps the end of the body (recent terminal
    output), ``"head"`` its start. The marker ``[... N bytes truncated ...]`` replaces what
    was cut. Guarantees ``len(result.encode()) <= max_bytes`` and valid code points.
    """
    whole = prefix + text + suffix
    # No byte ever needs counting when every code point fits at its widest (4 bytes);
    # an ASCII text is its own byte count. Only what may not fit is encoded.
    if len(whole) * 4 <= max_bytes or utf8_len(whole) <= max_bytes:
        return whole
    fixed = len(prefix.encode("utf-8", "surrogatepass")) + len(
        suffix.encode("utf-8", "surrogatepass")
    )
    body_bytes = len(text.encode("utf-8", "surrogatepass"))
    # The marker's own length depends on the count it reports; size it for the worst case.
    marker_room = len(f"[... {body_bytes} bytes truncated ...]\n".encode())
    budget = max_bytes - fixed - marker_room
    if budget >= 0:
        if keep == "tail":
            kept, _ = utf8_tail(text, budget)
            dropped = body_bytes - len(kept.encode("utf-8", "surrogatepass"))
            return f"{prefix}[... {dropped} bytes truncated ...]\n{kept}{suffix}"
        kept, _ = utf8_head(text, budget)
        dropped = body_bytes - len(kept.encode("utf-8", "surrogatepass"))
        return f"{prefix}{kept}\n[... {dropped} bytes truncated ...]{suffix}"
    # Metadata alone overflows: keep the start of everything, which holds ids and status.
    kept, _ = utf8_head(whole, max_bytes)
    return kept
