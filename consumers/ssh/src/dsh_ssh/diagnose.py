"""What the OpenSSH client's own words mean: the stable code for a failed login."""

from __future__ import annotations

import re

from dsh_terminal_core.kernel.errors import ErrorCode

__all__ = ["SECRET_PROMPT", "classify"]

# A prompt that waits on its own line for a secret. The client is told to ask for no
# password, so this is a key passphrase (or a server's keyboard-interactive question).
SECRET_PROMPT = re.compile(
    r"(?i:passphrase|password|verification code|one-time|pin)[^\n]*:\s*$"
    r"|\(yes/no(/\[fingerprint\])?\)\?\s*$"
)

_HOST_KEY = re.compile(
    r"Host key verification failed|REMOTE HOST IDENTIFICATION HAS CHANGED"
    r"|host key is known for .* you have requested strict checking"
    r"|Host key for .* has changed|\(yes/no"
)
_AUTH = re.compile(
    r"Permission denied|Too many authentication failures|No more authentication methods"
    r"|Authentication failed",
    re.IGNORECASE,
)


def classify(output: str) -> ErrorCode:
    """The code for a login that ended with ``output`` and no ready line.

    Host-key trouble wins over the rest (a changed key also ends in a refusal), then
    authentication; anything else — refused, unreachable, timed out, unresolvable,
    closed during the handshake — is a connection failure.
    """
    if _HOST_KEY.search(output):
        return ErrorCode.SSH_HOST_KEY
    if _AUTH.search(output):
        return ErrorCode.SSH_AUTH
    return ErrorCode.SSH_CONNECT
