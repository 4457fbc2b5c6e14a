"""The audit log: one JSON line per tool call, appended before the result is returned.

Every call through the harness (in-process ``Harness.call_tool``, MCP over stdio and
over HTTP) passes through :meth:`~dsh_terminal_core.kernel.tools.ToolRegistry.call`,
which tells its observers of each finished call; :meth:`AuditLog.record` is one. A line
is ``{ts, agent, identity?, tool, sessionId?, args, outcome: {isError, code?,
waitReason?, exitCode?}, durationMs}``.

What ``args`` never hold (:func:`redact_args`): a secret value. A value under a key
that names one (``secret`` as a string, ``password``, ``passphrase``, ``token``,
``apiKey``, ``credential`` and keys ending so) is ``"[secret]"``; so is a
:class:`~dsh_terminal_core.kernel.secret.Secret`. Names of secrets are kept, since an
auditor needs them and they are not values: ``terminal_send``'s ``secret: {name}`` (and
its ``ask`` reason), ``ssh_open``'s ``passwordSecret``/``passphraseSecret`` (any
camel-case ``...Secret`` key). ``text`` is kept: the harness cannot know that what a
model typed at a hidden prompt was a secret, which is why secrets are sent as
``secret`` instead. Every string is cut at 4 KiB.
"""

from __future__ import annotations

import json
import logging
import os
import re
import stat
import time
from collections.abc import Mapping
from typing import Any

import attrs

from ..kernel.errors import ErrorCode
from ..kernel.secret import Secret
from ..kernel.tools import ToolCall
from .cast import SECRET_SHOWN

__all__ = ["MAX_STRING_BYTES", "AuditConfig", "AuditLog", "audit_entry", "redact_args"]

log = logging.getLogger(__name__)

MAX_STRING_BYTES = 4096
_OPEN_FLAGS = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)
# Keys whose string value is a secret value (compared lower-case, without _ and -).
_VALUE_KEYS = frozenset(
    {"secret", "password", "passwd", "passphrase", "pass", "token", "apikey", "privatekey"}
)
_VALUE_SUFFIXES = ("password", "passphrase", "token", "apikey", "credential", "credentials")
_NAME_KEY = re.compile(r"[a-z0-9]Secret$")  # passwordSecret: the name of a secret


def _absolute(value: object) -> object:
    if isinstance(value, str) and value:
        return os.path.abspath(os.path.expanduser(value))
    return value


def open_audit_file(path: str) -> int:
    """Open ``path`` for appending (created 0600, in a directory created 0700 if missing);
    refuse a file others may read.

    Raises ``ValueError`` naming the path when it cannot be opened or is shared.
    """
    try:
        parent = os.path.dirname(path)
        if not os.path.lexists(parent):
            os.makedirs(parent, mode=0o700)
        fd = os.open(path, _OPEN_FLAGS, 0o600)
    except OSError as exc:
        raise ValueError(
            f"audit file {path!r} cannot be opened for appending: {exc.strerror or exc}"
        ) from None
    info = os.fstat(fd)
    problem = None
    if not stat.S_ISREG(info.st_mode):
        problem = "is not a regular file"
    elif info.st_mode & 0o077:
        problem = (
            f"is readable by group or others (mode {stat.S_IMODE(info.st_mode):o}); make it "
            "private with chmod 600"
        )
    if problem is not None:
        os.close(fd)
        raise ValueError(f"audit file {path!r} {problem}")
    return fd


def _appendable(_inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is None:
        return
    if not isinstance(value, str) or not value:
        raise ValueError(f"{attribute.name} must be a file path or null, got {value!r}")
    os.close(open_audit_file(value))


@attrs.frozen(kw_only=True)
class AuditConfig:
    """Config of the ``audit`` plugin: ``file``, the JSON-lines log (unset: off)."""

    file: str | None = attrs.field(default=None, converter=_absolute, validator=_appendable)


class AuditLog:
    """Appends one line per call to the configured file; :meth:`close` closes it.

    The line is written with one ``write`` on an ``O_APPEND`` descriptor, on the
    event loop, before the result goes back: a few hundred bytes into the page cache.
    A write that fails (a full disk) is logged and the call's result still returned.
    """

    def __init__(self, config: AuditConfig) -> None:
        if config.file is None:
            raise ValueError("an AuditLog needs audit.file")
        self.path = config.file
        self._fd: int | None = open_audit_file(config.file)
        self._failing = False

    def record(self, call: ToolCall) -> None:
        """Append ``call``'s line; never raises."""
        fd = self._fd
        if fd is None:
            return
        line = _encode(audit_entry(call, time.time()))
        try:
            os.write(fd, line)
        except OSError as exc:
            if not self._failing:
                log.error("cannot append to the audit log %s: %s", self.path, exc.strerror)
            self._failing = True
            return
        self._failing = False

    def close(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)


def audit_entry(call: ToolCall, now: float) -> dict[str, Any]:
    """The audit line of ``call`` as a dict, in the documented key order."""
    began = now - call.duration_s
    entry: dict[str, Any] = {
        "ts": _timestamp(began),
        "agent": call.exec_.agent.id,
    }
    if call.exec_.identity is not None:
        entry["identity"] = call.exec_.identity
    entry["tool"] = call.name
    value = call.result.value if call.result is not None else None
    session_id = _session_id(call.name, call.args, value)
    if session_id is not None:
        entry["sessionId"] = session_id
    entry["args"] = redact_args(call.args)
    failed = call.result is None or call.result.is_error
    outcome: dict[str, Any] = {"isError": failed}
    if failed:
        outcome["code"] = call.code or ErrorCode.INTERNAL
    if isinstance(value, Mapping):
        for key in ("waitReason", "exitCode"):
            found = value.get(key)
            if found is not None:
                outcome[key] = found
    entry["outcome"] = outcome
    entry["durationMs"] = round(call.duration_s * 1000, 3)
    return entry


# The seconds part of the newest timestamp, formatted: it changes once a second.
_SECOND: list[Any] = [None, ""]


def _timestamp(moment: float) -> str:
    second = int(moment)
    if _SECOND[0] != second:
        _SECOND[:] = [second, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))]
    return f"{_SECOND[1]}.{int(moment * 1000) % 1000:03d}Z"


def redact_args(args: object) -> Any:
    """``args`` with every secret value ``"[secret]"`` and every string cut at 4 KiB."""
    if isinstance(args, dict) and all(_plain(k, v) for k, v in args.items()):
        return args  # nothing to hide or cut: the usual call, taken as it is
    return _redact(args, None)


def _plain(key: object, value: object) -> bool:
    """A value that redaction would return unchanged (a 1,024-character string fits 4 KiB)."""
    if isinstance(value, str):
        return len(value) <= MAX_STRING_BYTES // 4 and not _holds_value(str(key))
    return value is None or isinstance(value, bool | int | float)


def _redact(value: object, key: str | None) -> Any:
    if isinstance(value, Secret):
        return SECRET_SHOWN
    if isinstance(value, str):
        return SECRET_SHOWN if key is not None and _holds_value(key) else _cut(value)
    if isinstance(value, bool | int | float) or value is None:
        return value
    if isinstance(value, Mapping):
        return {_cut(str(k)): _redact(v, str(k)) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_redact(v, key) for v in value]
    return _cut(str(value))


_VERDICTS: dict[str, bool] = {}


def _holds_value(key: str) -> bool:
    verdict = _VERDICTS.get(key)
    if verdict is None:
        folded = key.lower().replace("_", "").replace("-", "")
        verdict = _NAME_KEY.search(key) is None and (
            folded in _VALUE_KEYS or folded.endswith(_VALUE_SUFFIXES)
        )
        if len(_VERDICTS) < 4096:  # argument names are few; a flood of new ones is not kept
            _VERDICTS[key] = verdict
    return verdict


def _cut(text: str) -> str:
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= MAX_STRING_BYTES:
        return text
    note = f"…[cut: {len(data)} bytes]"
    keep = MAX_STRING_BYTES - len(note.encode("utf-8"))
    return data[:keep].decode("utf-8", "ignore") + note


def _session_id(tool: str, args: object, value: object) -> str | None:
    # The pty_* tools name a session ``id``; every other tool says ``sessionId``.
    keys = ("sessionId", "id") if tool.startswith("pty_") else ("sessionId",)
    for source in (args, value):
        if isinstance(source, Mapping):
            for key in keys:
                found = source.get(key)
                if isinstance(found, str) and found:
                    return found
    return None


_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=str)
_ASCII_ENCODER = json.JSONEncoder(separators=(",", ":"), default=str)


def _encode(entry: dict[str, Any]) -> bytes:
    text = _ENCODER.encode(entry)
    try:
        return (text + "\n").encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate in the arguments: escape it
        return (_ASCII_ENCODER.encode(entry) + "\n").encode("ascii")
