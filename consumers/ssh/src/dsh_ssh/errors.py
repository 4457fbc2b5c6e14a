"""The ssh consumer's error: one class, the stable code says what went wrong."""

from __future__ import annotations

from dsh_terminal_core.kernel.errors import DshError, ErrorCode

__all__ = ["SshError"]


class SshError(DshError):
    """An ssh operation failed; ``code`` is one of the ``SSH_*`` codes and never changes.

    ``SSH_CONNECT``: the host could not be reached (refused, unreachable, timed out, no
    network for this owner). ``SSH_HOST_KEY``: the host's key changed, or is unknown
    under the ``strict`` policy. ``SSH_AUTH``: the server rejected every key, or wants a
    password or passphrase no secret source can give. ``SSH_CONNECTION_LOST``: an open
    session's link is gone. ``SSH_BUSY``: the previous command is still running.
    ``output`` is what the ssh client printed, for the operator.
    """

    code = ErrorCode.SSH_CONNECT

    def __init__(self, message: str, code: str, output: str = "") -> None:
        super().__init__(message, code)
        self.output = output
