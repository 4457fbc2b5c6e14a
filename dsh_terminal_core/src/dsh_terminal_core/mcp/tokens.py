"""Bearer tokens for ``dsh-terminal mcp --http``: where they come from and how one is matched.

A token table is a JSON object mapping each token to the agent identity it stands for,
read from ``--token-file FILE`` or the ``DSH_MCP_TOKENS`` environment variable. Only
SHA-256 digests of the tokens are kept, and a presented token is compared against every
one of them with :func:`hmac.compare_digest`, so neither the length of a token nor which
entry matched (or how far a guess got) shows in the time an answer takes. No message
here ever quotes a token: errors name the entry by its agent id or its position.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import stat
from collections.abc import Mapping

import attrs

from ..kernel.errors import DshError

__all__ = [
    "ENV_TOKENS",
    "MIN_TOKEN_CHARS",
    "TokenError",
    "TokenTable",
    "bearer_token",
    "load_tokens",
]

ENV_TOKENS = "DSH_MCP_TOKENS"
MIN_TOKEN_CHARS = 16
_MAKE_ONE = "python3 -c 'import secrets; print(secrets.token_urlsafe(32))'"


class TokenError(DshError):
    """The token table is missing, unreadable or malformed."""

    code = "INVALID_CONFIG"


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8", "surrogateescape")).digest()


@attrs.frozen
class TokenTable:
    """Token digests and the agent identity each one stands for; ``source`` says where from."""

    entries: tuple[tuple[bytes, str], ...] = attrs.field(repr=False)
    source: str
    warnings: tuple[str, ...] = ()

    @classmethod
    def parse(cls, text: str, source: str, warnings: tuple[str, ...] = ()) -> TokenTable:
        """Read ``{"<token>": "<agent id>", ...}``; every token distinct, every agent id too.

        Raises:
            TokenError: not JSON, not an object, empty, a non-string or empty agent id,
                a token shorter than :data:`MIN_TOKEN_CHARS`, or one agent id under two
                tokens (each token is one identity, so two tokens never share sessions).
        """
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            # The decoder's message quotes no input, only a position.
            raise TokenError(
                f"{source} is not valid JSON ({exc.msg} at line {exc.lineno})"
            ) from None
        if not isinstance(data, dict) or not data:
            raise TokenError(
                f"{source} must be a non-empty JSON object of token -> agent id, "
                f'e.g. {{"<token>": "agent-a"}}'
            )
        entries: list[tuple[bytes, str]] = []
        seen: set[str] = set()
        for position, (token, agent_id) in enumerate(data.items(), start=1):
            where = f"{source}: entry {position}"
            if not isinstance(agent_id, str) or not agent_id.strip():
                raise TokenError(f"{where}: the agent id must be a non-empty string")
            if len(token) < MIN_TOKEN_CHARS or token != token.strip():
                raise TokenError(
                    f"{where} (agent {agent_id!r}): a token needs at least {MIN_TOKEN_CHARS} "
                    f"characters and no surrounding spaces; make one with {_MAKE_ONE}"
                )
            if agent_id in seen:
                raise TokenError(
                    f"{where}: agent {agent_id!r} already has a token; each token is one identity"
                )
            seen.add(agent_id)
            entries.append((_digest(token), agent_id))
        return cls(tuple(entries), source, warnings)

    @property
    def agent_ids(self) -> tuple[str, ...]:
        return tuple(agent_id for _, agent_id in self.entries)

    def identify(self, presented: str) -> str | None:
        """Return the agent id of ``presented``, or ``None``; constant time over all tokens."""
        digest = _digest(presented)
        found: str | None = None
        for known, agent_id in self.entries:
            matched = hmac.compare_digest(digest, known)
            found = agent_id if matched else found
        return found


def bearer_token(authorization: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header value, else ``None``."""
    if authorization is None:
        return None
    scheme, _, token = authorization.strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        return None
    return token


def load_tokens(
    token_file: str | None, environ: Mapping[str, str] | None = None
) -> TokenTable | None:
    """Return the token table from ``token_file``, else from ``DSH_MCP_TOKENS``, else ``None``.

    The file wins over the environment, as flags do elsewhere. A file that other users
    can read is served but reported in ``warnings``.

    Raises:
        TokenError: the file cannot be read, or either source is malformed.
    """
    environ = os.environ if environ is None else environ
    if token_file is not None:
        source = f"token file {token_file!r}"
        try:
            with open(token_file, encoding="utf-8") as handle:
                text = handle.read()
                mode = os.fstat(handle.fileno()).st_mode
        except OSError as exc:
            raise TokenError(f"cannot read {source}: {exc.strerror or exc}") from None
        warnings: tuple[str, ...] = ()
        if stat.S_IMODE(mode) & 0o077:
            warnings = (
                f"{source} is readable by other users (mode {stat.S_IMODE(mode):o}); chmod 600 it",
            )
        return TokenTable.parse(text, source, warnings)
    from_env = environ.get(ENV_TOKENS)
    if from_env is None or not from_env.strip():
        return None
    return TokenTable.parse(from_env, ENV_TOKENS)
