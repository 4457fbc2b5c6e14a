"""Sandbox policy: which confinement each owner's terminals run under.

The policy is deliberately separate from the mechanism (:mod:`.bwrap`): a backend asks
the policy *what* an owner may touch and asks the sandbox *how* to enforce it. The
deployment default is safe (``workspace-write`` over the current directory); running
unconfined has to be chosen by name.

The mode fence lives here because only the policy knows an owner's effective mode. A
persistent shell started under one mode keeps that confinement for its whole life, so
letting the mode change underneath it would make the reported policy a lie; the change
is refused until the owner's sessions are closed.
"""

from __future__ import annotations

import enum
import os
import weakref
from collections.abc import Callable

import attrs

from ..agents import Agent
from ..errors import TerminalError

__all__ = ["Policy", "SandboxMode", "SandboxPolicyConfig", "SandboxPolicyService"]

ActivityProbe = Callable[[Agent], bool]


class SandboxMode(enum.StrEnum):
    """How much of the filesystem a sandboxed terminal may write."""

    READ_ONLY = "read-only"
    WORKSPACE_WRITE = "workspace-write"
    DANGER_FULL_ACCESS = "danger-full-access"


_ALLOWED = ", ".join(repr(m.value) for m in SandboxMode)


def _to_mode(value: SandboxMode | str) -> SandboxMode:
    """Convert a config or tool string to a mode; ``ValueError`` names the allowed values."""
    if isinstance(value, SandboxMode):
        return value
    if isinstance(value, str):
        try:
            return SandboxMode(value)
        except ValueError:
            pass
    raise ValueError(f"sandbox mode must be one of {_ALLOWED}; got {value!r}")


def _check_absolute(_inst: object, attribute: attrs.Attribute[str], value: str) -> None:
    if not os.path.isabs(value):
        raise ValueError(f"{attribute.name} must be an absolute path; got {value!r}")


def _to_workspace_root(value: str | None) -> str | None:
    """Resolve a configured workspace root, refusing what cannot be bound into a sandbox.

    The path is resolved with ``realpath`` so the bind mount and the reported policy name
    the same directory the kernel will see, whatever symlinks led there.
    """
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise ValueError(f"workspace_root must be a non-empty string; got {value!r}")
    if not os.path.isabs(value):
        raise ValueError(f"workspace_root must be an absolute path; got {value!r}")
    if not os.path.isdir(value):
        raise ValueError(f"workspace_root {value!r} does not exist or is not a directory")
    return os.path.realpath(value)


@attrs.frozen
class Policy:
    """The confinement one owner's terminals get: a mode and the writable workspace."""

    mode: SandboxMode = attrs.field(converter=_to_mode)
    workspace_root: str = attrs.field(validator=_check_absolute)

    @property
    def confined(self) -> bool:
        """True when a sandbox must wrap the shell (every mode but danger-full-access)."""
        return self.mode is not SandboxMode.DANGER_FULL_ACCESS


@attrs.frozen(kw_only=True)
class SandboxPolicyConfig:
    """Config of the ``sandbox-policy`` plugin.

    ``mode`` is the deployment default for every owner without an override.
    ``workspace_root`` is the directory ``workspace-write`` may modify and where shells
    start; ``None`` means the current directory when the service is created.
    """

    mode: SandboxMode = attrs.field(default=SandboxMode.WORKSPACE_WRITE, converter=_to_mode)
    workspace_root: str | None = attrs.field(default=None, converter=_to_workspace_root)


class SandboxPolicyService:
    """Resolve each owner's policy and guard mode changes with the mode fence.

    Overrides are keyed by the :class:`Agent` object itself (identity, weakly held), so a
    second agent with the same id never inherits another's mode and a dropped agent
    leaves nothing behind. ``forget`` removes an override explicitly at owner disposal.
    """

    def __init__(
        self, config: SandboxPolicyConfig | None = None, activity: ActivityProbe | None = None
    ) -> None:
        config = config if config is not None else SandboxPolicyConfig()
        root = config.workspace_root
        if root is None:
            root = os.path.realpath(os.getcwd())
        self._default = Policy(config.mode, root)
        self._overrides: weakref.WeakKeyDictionary[Agent, SandboxMode] = weakref.WeakKeyDictionary()
        self._activity = activity

    @property
    def default(self) -> Policy:
        """The deployment default every owner without an override gets."""
        return self._default

    def set_activity_probe(self, probe: ActivityProbe | None) -> None:
        """Install the check "does this owner have open or in-flight sessions?".

        The terminal registry provides it (``has_owner_activity``); it is wired after
        construction because the registry is created after the policy. Without a probe
        the fence has nothing to consult and every change is allowed.
        """
        self._activity = probe

    def resolve(self, owner: Agent) -> Policy:
        """Return ``owner``'s effective policy: its override, else the deployment default."""
        mode = self._overrides.get(owner)
        if mode is None or mode is self._default.mode:
            return self._default
        return Policy(mode, self._default.workspace_root)

    def set_mode(self, owner: Agent, mode: SandboxMode | str) -> Policy:
        """Override ``owner``'s mode and return its new effective policy.

        Raises :class:`TerminalError` ``INVALID_ARGUMENT`` for an unknown mode, and
        ``SANDBOX_MODE_LOCKED`` when the effective mode would change while the owner has
        a persistent session open or being created (those shells keep the confinement
        they started with). Re-asserting the current effective mode always succeeds.
        """
        try:
            new_mode = _to_mode(mode)
        except ValueError as exc:
            raise TerminalError(str(exc), "INVALID_ARGUMENT") from exc
        current = self.resolve(owner).mode
        if new_mode is not current and self._activity is not None and self._activity(owner):
            raise TerminalError(
                f"cannot change sandbox mode from {current.value} to {new_mode.value} while "
                "persistent terminal sessions are open or being created; close them first",
                "SANDBOX_MODE_LOCKED",
            )
        self._overrides[owner] = new_mode
        return self.resolve(owner)

    def forget(self, owner: Agent) -> None:
        """Drop ``owner``'s override (at owner disposal); harmless when there is none."""
        self._overrides.pop(owner, None)
