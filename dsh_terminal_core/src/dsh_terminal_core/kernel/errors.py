"""Error types with stable codes.

Every error a caller can act on carries a ``code`` that never changes between releases;
tool results render it as ``error [CODE]: message``.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum

__all__ = [
    "BackendCleanupError",
    "ConfigError",
    "DisposeError",
    "DshError",
    "ErrorCode",
    "InvalidArgument",
    "OperationCancelled",
    "PluginLoadError",
    "SandboxUnavailable",
    "TerminalError",
    "ToolNotFound",
    "UnsupportedPlatform",
    "owner_not_live",
]


class ErrorCode(StrEnum):
    """Every stable error code, in one place.

    Members are strings, so ``exc.code == "NO_SESSION"`` and ``exc.code ==
    ErrorCode.NO_SESSION`` agree, and a code renders as its bare name in
    ``error [CODE]: message``. A new code is added here and documented in
    ``docs/reference.md``; the documentation test fails until both are done.
    """

    # Arguments, tools and cancellation.
    INVALID_ARGUMENT = "INVALID_ARGUMENT"
    UNKNOWN_TOOL = "UNKNOWN_TOOL"
    INTERNAL = "INTERNAL"
    CANCELLED = "CANCELLED"
    UNSUPPORTED = "UNSUPPORTED"
    # Plugin host and services.
    PLUGIN_LOAD = "PLUGIN_LOAD"
    INVALID_CONFIG = "INVALID_CONFIG"
    DUPLICATE_SERVICE = "DUPLICATE_SERVICE"
    NO_SERVICE = "NO_SERVICE"
    DUPLICATE_TOOL = "DUPLICATE_TOOL"
    DISPOSE_FAILED = "DISPOSE_FAILED"
    RELOAD_UNSUPPORTED = "RELOAD_UNSUPPORTED"
    UNSUPPORTED_PLATFORM = "UNSUPPORTED_PLATFORM"
    # Session registry.
    DUPLICATE_BACKEND = "DUPLICATE_BACKEND"
    NO_BACKEND = "NO_BACKEND"
    DUPLICATE_NAME = "DUPLICATE_NAME"
    SESSION_LIMIT = "SESSION_LIMIT"
    NO_SESSION = "NO_SESSION"
    FOREIGN_SESSION = "FOREIGN_SESSION"
    OWNER_NOT_LIVE = "OWNER_NOT_LIVE"
    SERVICE_DISPOSING = "SERVICE_DISPOSING"
    SEND_ACTIVE = "SEND_ACTIVE"
    SESSION_CLOSED = "SESSION_CLOSED"
    SESSION_EXITED = "SESSION_EXITED"
    SPAWN_FAILED = "SPAWN_FAILED"
    HOST_LIMIT = "HOST_LIMIT"
    HUMAN_CONTROL = "HUMAN_CONTROL"
    BACKEND_CLEANUP = "BACKEND_CLEANUP"
    # Terminal processes.
    TEARDOWN_FAILED = "TEARDOWN_FAILED"
    TERMINAL_CLOSED = "TERMINAL_CLOSED"
    NO_FOREGROUND = "NO_FOREGROUND"
    # Sandbox.
    SANDBOX_UNAVAILABLE = "SANDBOX_UNAVAILABLE"
    SANDBOX_MODE_LOCKED = "SANDBOX_MODE_LOCKED"
    LIMITS_UNAVAILABLE = "LIMITS_UNAVAILABLE"
    # Jobs.
    NO_JOB = "NO_JOB"
    FOREIGN_JOB = "FOREIGN_JOB"
    NO_JOBS_SERVICE = "NO_JOBS_SERVICE"
    # Secrets.
    NO_SECRET = "NO_SECRET"
    SECRET_DECLINED = "SECRET_DECLINED"
    NOT_AT_SECRET_PROMPT = "NOT_AT_SECRET_PROMPT"
    # Consumers.
    GDB_MI = "GDB_MI"
    SSH_CONNECT = "SSH_CONNECT"
    SSH_HOST_KEY = "SSH_HOST_KEY"
    SSH_AUTH = "SSH_AUTH"
    SSH_CONNECTION_LOST = "SSH_CONNECTION_LOST"
    SSH_BUSY = "SSH_BUSY"
    # Execution worlds.
    WORLD_UNAVAILABLE = "WORLD_UNAVAILABLE"


class DshError(Exception):
    """Base of every error this project raises on purpose; ``code`` is stable."""

    code: str = ErrorCode.INTERNAL

    def __init__(self, message: str, code: str | None = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code

    @property
    def message(self) -> str:
        return str(self.args[0]) if self.args else ""


class PluginLoadError(DshError):
    """The harness could not start: a plugin is missing, misconfigured or cyclic."""

    code = ErrorCode.PLUGIN_LOAD

    def __init__(self, message: str, plugin: str | None = None) -> None:
        super().__init__(message)
        self.plugin = plugin


class ConfigError(PluginLoadError):
    """A plugin's configuration has an unknown key or an invalid value."""

    code = ErrorCode.INVALID_CONFIG

    def __init__(self, message: str, plugin: str, key: str | None = None) -> None:
        super().__init__(message, plugin)
        self.key = key


class InvalidArgument(DshError, ValueError):
    """A caller passed an argument that does not satisfy the contract."""

    code = ErrorCode.INVALID_ARGUMENT


class ToolNotFound(DshError, LookupError):
    """No tool of that name is registered."""

    code = ErrorCode.UNKNOWN_TOOL


class OperationCancelled(DshError):
    """The caller cancelled the operation (the default cancellation reason)."""

    code = ErrorCode.CANCELLED


class UnsupportedPlatform(DshError):
    """The operation needs an OS facility this platform does not have."""

    code = ErrorCode.UNSUPPORTED_PLATFORM


class TerminalError(DshError):
    """A session operation was refused; ``code`` says why and never changes.

    ``advice`` is the part of the message that names what to do next with which tool
    (``terminal_list shows the open ones``). It is kept apart from the fact (``fact``)
    because the registry serves several surfaces: a surface whose tools differ (the
    ``pty_*`` tools) gives the same refusal with its own advice (:meth:`advised`).
    """

    def __init__(self, message: str, code: str, *, advice: str | None = None) -> None:
        super().__init__(f"{message}; {advice}" if advice else message, code)
        self.fact = message
        self.advice = advice

    def advised(self, advice: str) -> TerminalError:
        """The same refusal (code and fact) with ``advice`` in place of this one's."""
        return TerminalError(self.fact, self.code, advice=advice)


class SandboxUnavailable(TerminalError):
    """A confined sandbox mode was asked for but cannot be provided on this machine."""

    def __init__(self, message: str) -> None:
        super().__init__(message, ErrorCode.SANDBOX_UNAVAILABLE)


class BackendCleanupError(TerminalError):
    """A backend could not tear a session down; kept for the owner's later disposal."""

    def __init__(self, message: str, cause: BaseException | None = None) -> None:
        super().__init__(message, ErrorCode.BACKEND_CLEANUP)
        self.cause = cause


class DisposeError(DshError):
    """One or more dispose effects failed; ``errors`` holds each failure in run order."""

    code = ErrorCode.DISPOSE_FAILED

    def __init__(self, message: str, errors: Sequence[BaseException]) -> None:
        detail = "; ".join(f"{type(e).__name__}: {e}" for e in errors)
        super().__init__(f"{message}: {detail}" if detail else message)
        self.errors = tuple(errors)


def owner_not_live(owner: object) -> TerminalError:
    """The refusal every layer gives an owner that is disposed or being disposed."""
    return TerminalError(
        f"{owner!r} is disposed; it cannot open terminal sessions", ErrorCode.OWNER_NOT_LIVE
    )
