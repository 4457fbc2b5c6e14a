"""The harness config as a command builds it: a JSON file, then environment, then flags.

The MCP server and the world agent both start from a config file and the sandbox
flags; both read it the same way, here.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

from .errors import DshError

__all__ = [
    "ENV_SANDBOX_MODE",
    "ENV_WORKSPACE_ROOT",
    "SANDBOX_MODES",
    "ConfigFileError",
    "build_config",
]

ENV_SANDBOX_MODE = "DSH_SANDBOX_MODE"
ENV_WORKSPACE_ROOT = "DSH_WORKSPACE_ROOT"
SANDBOX_MODES = ("read-only", "workspace-write", "danger-full-access")


class ConfigFileError(DshError):
    """A bad config file, flag or environment value; the command cannot start."""

    code = "INVALID_CONFIG"


def build_config(
    config_path: str | None,
    sandbox: str | None,
    workspace: str | None,
    environ: Mapping[str, str] | None = None,
) -> dict[str, dict[str, Any]]:
    """Return the harness config: the file's sections, then env, then flags on top.

    The sandbox mode and workspace root land in the ``sandbox-policy`` section; a flag
    wins over its environment variable (``DSH_SANDBOX_MODE``, ``DSH_WORKSPACE_ROOT``),
    and both win over the file. A relative workspace is resolved against the current
    directory, because MCP clients start servers from directories users do not see.

    Raises:
        ConfigFileError: the file is unreadable, not JSON, not an object of objects, or
            the sandbox mode is not one of the three modes.
    """
    environ = os.environ if environ is None else environ
    config = _read_config_file(config_path) if config_path else {}
    policy = dict(config.get("sandbox-policy", {}))
    mode = sandbox or environ.get(ENV_SANDBOX_MODE) or None
    if mode is not None:
        if mode not in SANDBOX_MODES:
            origin = "--sandbox" if sandbox else ENV_SANDBOX_MODE
            raise ConfigFileError(
                f"{origin}={mode!r} is not a sandbox mode; use one of {', '.join(SANDBOX_MODES)}"
            )
        policy["mode"] = mode
    root = workspace or environ.get(ENV_WORKSPACE_ROOT) or None
    if root is not None:
        policy["workspace_root"] = os.path.abspath(os.path.expanduser(root))
    if policy:
        config["sandbox-policy"] = policy
    return config


def _read_config_file(path: str) -> dict[str, dict[str, Any]]:
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except OSError as exc:
        raise ConfigFileError(f"cannot read config file {path!r}: {exc.strerror or exc}") from exc
    except json.JSONDecodeError as exc:
        raise ConfigFileError(f"config file {path!r} is not valid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigFileError(
            f"config file {path!r} must hold a JSON object of plugin sections, "
            f'e.g. {{"terminal-bash": {{"timeout_ms": 60000}}}}'
        )
    for section, value in data.items():
        if not isinstance(value, dict):
            raise ConfigFileError(
                f"config file {path!r}: section {section!r} must be a JSON object, "
                f"got {type(value).__name__}"
            )
    return data
