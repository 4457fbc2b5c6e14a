"""Sandbox policy (what an owner's terminals may write) and its bubblewrap enforcement.

Owns: mode resolution per owner (:mod:`.policy`, plugin ``sandbox-policy``), the
bubblewrap command line (:mod:`.bwrap`, plugin ``sandbox-bwrap``), the cgroup limits per
owner (:mod:`.limits`, plugin ``owner-limits``), the home a confined shell may write to
(:mod:`.home`), and the user's login environment captured under an owner's sandbox for
the shell backends (:mod:`.login`).

May import: the kernel and the provider (the scrubbed child environment).
"""

from .bwrap import BwrapConfig, BwrapSandbox
from .limitconfig import OwnerLimitsConfig
from .limits import LimitPlan, OwnerLimitsService
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
    "LimitPlan",
    "NetworkAccess",
    "OwnerLimitsConfig",
    "OwnerLimitsService",
    "Policy",
    "SandboxMode",
    "SandboxPolicyConfig",
    "SandboxPolicyService",
]
