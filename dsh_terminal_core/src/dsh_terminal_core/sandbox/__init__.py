"""Sandbox policy (what an owner's terminals may write) and its bubblewrap enforcement."""

from .bwrap import BwrapConfig, BwrapSandbox
from .policy import (
    NetworkAccess,
    Policy,
    SandboxMode,
    SandboxPolicyConfig,
    SandboxPolicyService,
)

__all__ = [
    "BwrapConfig",
    "BwrapSandbox",
    "NetworkAccess",
    "Policy",
    "SandboxMode",
    "SandboxPolicyConfig",
    "SandboxPolicyService",
]
