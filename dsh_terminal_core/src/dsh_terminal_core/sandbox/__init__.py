"""Sandbox policy (what an owner's terminals may write) and its bubblewrap enforcement."""

from .bwrap import BwrapConfig, BwrapSandbox
from .policy import Policy, SandboxMode, SandboxPolicyConfig, SandboxPolicyService

__all__ = [
    "BwrapConfig",
    "BwrapSandbox",
    "Policy",
    "SandboxMode",
    "SandboxPolicyConfig",
    "SandboxPolicyService",
]
