"""``ctx.secrets``: answers a secret's name from its sources, in order.

The sources: the configured environment variables, the configured user-only file, then
every ``dsh_secret_source`` hook implementation of the harness's plugin manager. The
value itself is a :class:`~dsh_terminal_core.kernel.secret.Secret`, which never prints;
a person at an MCP client is asked through the call's ``SecretAsker`` instead
(URL-mode elicitation, :mod:`dsh_terminal_core.mcp.secret_page`).
"""

from __future__ import annotations

import inspect
import json
import os
import stat
from collections.abc import Mapping
from typing import Any

import attrs
import pluggy

from ..kernel.agents import Agent
from ..kernel.config import positive_int
from ..kernel.errors import DshError
from ..kernel.secret import Secret

__all__ = ["SecretsConfig", "SecretsService", "read_secret_file"]


def read_secret_file(path: str) -> dict[str, str]:
    """Load the JSON object of ``name -> value`` at ``path``, refusing a shared file.

    The file must be a regular file readable by its owner only (no group or other
    permission bits), and hold one JSON object of string values. Errors name the file
    and never quote its content.
    """
    path = os.path.expanduser(path)
    try:
        info = os.stat(path)
    except OSError as exc:
        raise ValueError(f"secrets file {path!r} cannot be read: {exc.strerror}") from None
    if not stat.S_ISREG(info.st_mode):
        raise ValueError(f"secrets file {path!r} is not a regular file")
    if info.st_mode & 0o077:
        raise ValueError(
            f"secrets file {path!r} is readable by group or others (mode "
            f"{stat.S_IMODE(info.st_mode):o}); make it private with chmod 600"
        )
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        kind = type(exc).__name__
        raise ValueError(f"secrets file {path!r} is not a readable JSON file ({kind})") from None
    if not isinstance(data, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in data.items()
    ):
        raise ValueError(f"secrets file {path!r} must hold one JSON object of string values")
    return data


def _env_mapping(_inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and k and isinstance(v, str) and v for k, v in value.items()
    ):
        raise ValueError(
            f"{attribute.name} must map secret names to environment variable names, got {value!r}"
        )


def _secret_file(_inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is None:
        return
    if not isinstance(value, str) or not value:
        raise ValueError(f"{attribute.name} must be a path or null, got {value!r}")
    read_secret_file(value)


@attrs.frozen(kw_only=True)
class SecretsConfig:
    """Config of the ``secrets`` plugin.

    ``env`` maps a secret name to the environment variable holding it (read at each
    use, so a rotated value is picked up); ``file`` is a JSON object of name → value
    that only its owner may read, checked at startup and read again at each use.
    ``page_valid_ms`` is how long the one-time page asking a person at an MCP client
    for a secret accepts its submission (five minutes).
    """

    env: Mapping[str, str] = attrs.field(factory=dict, validator=_env_mapping)
    file: str | None = attrs.field(default=None, validator=_secret_file)
    page_valid_ms: int = attrs.field(default=300_000, validator=positive_int)


class SecretsService:
    """``ctx.secrets``: named secrets from the environment, a private file and hooks."""

    def __init__(self, config: SecretsConfig, plugin_manager: pluggy.PluginManager) -> None:
        self._config = config
        self._pm = plugin_manager

    @property
    def page_valid_ms(self) -> int:
        return self._config.page_valid_ms

    async def lookup(self, name: str, owner: Agent) -> Secret | None:
        """The secret called ``name`` for ``owner``, or None when no source has it.

        Sources in order: the ``env`` mapping, the ``file``, then the
        ``dsh_secret_source`` hook implementations (the first non-None answer wins; an
        implementation may return an awaitable).
        """
        variable = self._config.env.get(name)
        if variable is not None:
            value = os.environ.get(variable)
            if value:
                return Secret(value)
        if self._config.file is not None:
            try:
                value = read_secret_file(self._config.file).get(name)
            except ValueError as exc:
                raise DshError(str(exc), "NO_SECRET") from None
            if value:
                return Secret(value)
        return await self._from_hooks(name, owner)

    async def _from_hooks(self, name: str, owner: Agent) -> Secret | None:
        answers = self._pm.hook.dsh_secret_source(name=name, owner=owner)
        found: Secret | None = None
        for answer in answers:
            if found is not None:
                if inspect.iscoroutine(answer):
                    answer.close()
                continue
            value = await answer if inspect.isawaitable(answer) else answer
            if isinstance(value, Secret):
                found = value
            elif isinstance(value, str) and value:
                found = Secret(value)
        return found
