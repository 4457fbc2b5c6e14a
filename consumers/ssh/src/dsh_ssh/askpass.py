"""Answering the ssh client's password and passphrase prompts from the harness's secrets.

The client is started with ``SSH_ASKPASS`` naming a small helper and
``SSH_ASKPASS_REQUIRE=force``: every prompt it would show goes to the helper instead of
the terminal. The helper sends the prompt to a unix socket this module serves inside
the owner's private (0700) control directory and prints what comes back. A login
password answers a ``password`` prompt and a key passphrase a ``passphrase`` prompt,
each at most once per login (a second ask means the first was refused, and is refused
too); anything else gets no answer, so the client fails and the login is ``SSH_AUTH``.
The secret goes harness → helper → client: never through the terminal, its scrollback,
a log line or an error text.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import shutil
import sys

import attrs

from dsh_terminal_core.secrets import Secret

__all__ = ["Askpass", "LoginSecrets"]

_HELPER = """#!{python}
import socket, sys
with socket.socket(socket.AF_UNIX) as s:
    s.connect({socket_path!r})
    s.sendall((sys.argv[1] if len(sys.argv) > 1 else "").encode() + b"\\n")
    s.shutdown(socket.SHUT_WR)
    answer = b""
    while chunk := s.recv(4096):
        answer += chunk
if not answer:
    sys.exit(1)
sys.stdout.buffer.write(answer + b"\\n")
"""


@attrs.frozen(kw_only=True)
class LoginSecrets:
    """The secrets one login may use: the account's password and the key's passphrase."""

    password: Secret | None = attrs.field(default=None, repr=False)
    passphrase: Secret | None = attrs.field(default=None, repr=False)

    def __bool__(self) -> bool:
        return self.password is not None or self.passphrase is not None


class Askpass:
    """The helper and its socket for one login; ``env()`` is what the client needs."""

    def __init__(self, directory: str, answers: LoginSecrets) -> None:
        token = secrets.token_hex(8)
        self._socket_path = os.path.join(directory, f"askpass-{token}.sock")
        self._helper_path = os.path.join(directory, f"askpass-{token}")
        self._answers = answers
        self._used: set[str] = set()
        self._server: asyncio.AbstractServer | None = None

    async def start(self) -> None:
        self._server = await asyncio.start_unix_server(self._answer, self._socket_path)
        os.chmod(self._socket_path, 0o600)
        python = shutil.which("python3") or sys.executable
        fd = os.open(self._helper_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o700)
        with os.fdopen(fd, "w") as helper:
            helper.write(_HELPER.format(python=python, socket_path=self._socket_path))

    def env(self) -> dict[str, str]:
        return {"SSH_ASKPASS": self._helper_path, "SSH_ASKPASS_REQUIRE": "force"}

    async def _answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            prompt = (await reader.readline()).decode("utf-8", "replace").lower()
            kind = "passphrase" if "passphrase" in prompt else "password"
            secret = self._answers.passphrase if kind == "passphrase" else self._answers.password
            if "passphrase" not in prompt and "password" not in prompt:
                secret = None
            if secret is not None and kind not in self._used:
                self._used.add(kind)
                writer.write(secret.reveal().encode("utf-8"))
                await writer.drain()
        except (OSError, ValueError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def aclose(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.close()
            with contextlib.suppress(Exception):
                await server.wait_closed()
        for path in (self._socket_path, self._helper_path):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
