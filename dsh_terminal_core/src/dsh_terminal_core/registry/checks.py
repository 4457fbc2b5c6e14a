"""The argument checks the registry applies before it hands a request to a backend.

Each refuses with ``INVALID_ARGUMENT`` (or ``NOT_AT_SECRET_PROMPT``) naming what is wrong,
before anything is spawned, typed or resized: a bad request leaves nothing behind.
"""

from __future__ import annotations

from ..kernel.errors import DshError, TerminalError
from ..kernel.secret import Secret, check_secret_text
from .types import MIN_REQUEST_BYTES, SecretPromptSession, SendRequest, SpawnRequest

__all__ = [
    "MAX_COLS",
    "MAX_NAME_LENGTH",
    "MAX_READ_COUNT",
    "MAX_ROWS",
    "MIN_COLS",
    "MIN_ROWS",
    "check_encodable",
    "check_max_bytes",
    "check_secret_send",
    "check_size",
    "is_int",
    "no_backend",
    "not_at_secret_prompt",
    "service_disposing",
    "validate_spawn",
]

MAX_NAME_LENGTH = 64
MAX_READ_COUNT = 10_000
# Window sizes a terminal program can work in; beyond them a resize is a mistake.
MIN_ROWS, MAX_ROWS = 2, 1000
MIN_COLS, MAX_COLS = 10, 1000


def check_max_bytes(value: object) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < MIN_REQUEST_BYTES:
        raise TerminalError(
            f"max_bytes must be an integer >= {MIN_REQUEST_BYTES} or None", "INVALID_ARGUMENT"
        )


def validate_spawn(request: SpawnRequest) -> None:
    if not isinstance(request, SpawnRequest):
        raise TerminalError("expected a SpawnRequest", "INVALID_ARGUMENT")
    if not isinstance(request.type, str) or not request.type:
        raise TerminalError("type must be a non-empty string", "INVALID_ARGUMENT")
    name = request.name
    if name is not None and (
        not isinstance(name, str)
        or not name
        or len(name) > MAX_NAME_LENGTH
        or not name.isprintable()
    ):
        raise TerminalError(
            f"name must be a non-empty printable string of at most {MAX_NAME_LENGTH} characters",
            "INVALID_ARGUMENT",
        )
    if request.cwd is not None and not isinstance(request.cwd, str):
        raise TerminalError("cwd must be a string", "INVALID_ARGUMENT")
    opened_by = request.opened_by
    if opened_by is not None and (
        not isinstance(opened_by, str)
        or not opened_by
        or len(opened_by) > MAX_NAME_LENGTH
        or not opened_by.isprintable()
    ):
        raise TerminalError(
            f"opened_by must be a non-empty printable string of at most {MAX_NAME_LENGTH} "
            "characters, or None",
            "INVALID_ARGUMENT",
        )
    if not isinstance(request.screen, bool):
        raise TerminalError("screen must be a boolean", "INVALID_ARGUMENT")
    if request.rows is not None or request.cols is not None:
        check_size(request.rows, request.cols, partial=True)


def check_size(rows: object, cols: object, *, partial: bool = False) -> None:
    """Refuse a window size outside what terminals and their programs handle."""
    for name, value, low, high in (
        ("rows", rows, MIN_ROWS, MAX_ROWS),
        ("cols", cols, MIN_COLS, MAX_COLS),
    ):
        if partial and value is None:
            continue
        if not is_int(value) or not low <= value <= high:  # type: ignore[operator]
            raise TerminalError(
                f"{name} must be an integer from {low} to {high}", "INVALID_ARGUMENT"
            )


def not_at_secret_prompt(session_id: str, session: object) -> TerminalError:
    if not isinstance(session, SecretPromptSession):
        return TerminalError(
            f"session {session_id} cannot prove a hidden-input prompt (its backend session "
            f"{type(session).__name__} does not provide hidden_prompt()); nothing was sent",
            "NOT_AT_SECRET_PROMPT",
        )
    return TerminalError(
        f"session {session_id} is not waiting at a hidden-input (password) prompt; "
        "nothing was sent. Send the command that asks for the secret first, and send the "
        "secret once the result says inputHidden=true",
        "NOT_AT_SECRET_PROMPT",
    )


def check_secret_send(session: object, session_id: str, request: SendRequest) -> None:
    if not isinstance(request.secret, Secret):
        raise TerminalError("secret must be a Secret", "INVALID_ARGUMENT")
    if request.text or not request.submit:
        raise TerminalError(
            "a send carries either text or a secret, not both (the secret is followed by "
            "Enter); nothing was sent",
            "INVALID_ARGUMENT",
        )
    try:
        check_secret_text(request.secret)
    except DshError as exc:
        raise TerminalError(exc.message, exc.code) from None
    if not isinstance(session, SecretPromptSession) or session.hidden_prompt() is None:
        raise not_at_secret_prompt(session_id, session)


def check_encodable(text: str) -> None:
    """Refuse text the terminal cannot receive: a lone surrogate has no UTF-8 encoding.

    JSON allows such strings (``"\\ud800"``); left to the write, the send would type
    nothing and then report a silence as if a command were running.
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise TerminalError(
            f"text is not valid Unicode: lone surrogate {text[exc.start]!r} at index "
            f"{exc.start}; nothing was sent",
            "INVALID_ARGUMENT",
        ) from None


def is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


# Backend types whose distribution is known, so a missing one can be named: the operator
# who installs packages can act on "install X"; "registered types: none" helps nobody.
_KNOWN_BACKEND_DISTRIBUTIONS = {"shell": "dsh-terminal-bash"}


def no_backend(kind: str, registered: list[str]) -> TerminalError:
    """``NO_BACKEND``, naming the distribution an operator installs for a known type."""
    shown = ", ".join(sorted(registered)) or "none"
    message = f"no terminal backend of type {kind!r} (registered types: {shown})"
    distribution = _KNOWN_BACKEND_DISTRIBUTIONS.get(kind)
    if distribution is not None:
        message += (
            f"; the {kind!r} backend comes from the {distribution} distribution, which is not "
            f"installed or not loaded: the operator installs it (pip install {distribution}) "
            "and restarts the harness"
        )
    return TerminalError(message, "NO_BACKEND")


def service_disposing() -> TerminalError:
    """``SERVICE_DISPOSING``: the registry is shutting down."""
    return TerminalError(
        "the terminal service is shutting down; no new sessions can be opened",
        "SERVICE_DISPOSING",
    )
