"""Error types with stable codes.

Every error a caller can act on carries a ``code`` that never changes between releases;
tool results render it as ``error [CODE]: message``.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = [
    "BackendCleanupError",
    "ConfigError",
    "DisposeError",
    "DshError",
    "InvalidArgument",
    "OperationCancelled",
    "PluginLoadError",
    "SandboxUnavailable",
    "TerminalError",
    "ToolNotFound",
    "UnsupportedPlatform",
]


class DshError(Exception):
    """Base of every error this project raises on purpose; ``code`` is stable."""

    code: str = "INTERNAL"

    def __init__(self, message: str, code: str | None = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code

    @property
    def message(self) -> str:
        return str(self.args[0]) if self.args else ""


class PluginLoadError(DshError):
    """The harness could not start: a plugin is missing, misconfigured or cyclic."""

    code = "PLUGIN_LOAD"

    def __init__(self, message: str, plugin: str | None = None) -> None:
        super().__init__(message)
        self.plugin = plugin


class ConfigError(PluginLoadError):
    """A plugin's configuration has an unknown key or an invalid value."""

    code = "INVALID_CONFIG"

    def __init__(self, message: str, plugin: str, key: str | None = None) -> None:
        super().__init__(message, plugin)
        self.key = key


class InvalidArgument(DshError, ValueError):
    """A caller passed an argument that does not satisfy the contract."""

    code = "INVALID_ARGUMENT"


class ToolNotFound(DshError, LookupError):
    """No tool of that name is registered."""

    code = "UNKNOWN_TOOL"


class OperationCancelled(DshError):
    """The caller cancelled the operation (the default cancellation reason)."""

    code = "CANCELLED"


class UnsupportedPlatform(DshError):
    """The operation needs an OS facility this platform does not have."""

    code = "UNSUPPORTED_PLATFORM"


class TerminalError(DshError):
    """A session operation was refused; ``code`` says why and never changes."""

    def __init__(self, message: str, code: str) -> None:
        super().__init__(message, code)


class SandboxUnavailable(TerminalError):
    """A confined sandbox mode was asked for but cannot be provided on this machine."""

    def __init__(self, message: str) -> None:
        super().__init__(message, "SANDBOX_UNAVAILABLE")


class BackendCleanupError(TerminalError):
    """A backend could not tear a session down; kept for the owner's later disposal."""

    def __init__(self, message: str, cause: BaseException | None = None) -> None:
        super().__init__(message, "BACKEND_CLEANUP")
        self.cause = cause


class DisposeError(DshError):
    """One or more dispose effects failed; ``errors`` holds each failure in run order."""

    code = "DISPOSE_FAILED"

    def __init__(self, message: str, errors: Sequence[BaseException]) -> None:
        detail = "; ".join(f"{type(e).__name__}: {e}" for e in errors)
        super().__init__(f"{message}: {detail}" if detail else message)
        self.errors = tuple(errors)
