"""Config of the ``owner-limits`` plugin: what each owner's shells may take together.

Each limit is ``None`` (the protective default, applied where the host allows and
skipped with a warning where it does not), an explicit value (then required: an open
fails with ``LIMITS_UNAVAILABLE`` when the host cannot enforce it), or ``"max"`` (no
limit). ``cgroups = "require"`` makes the defaults and the cgroup teardown required too;
``"off"`` uses no cgroups at all.
"""

from __future__ import annotations

import re
from typing import Literal

import attrs

__all__ = [
    "DEFAULT_BASE_CPU_WEIGHT",
    "DEFAULT_CPU_WEIGHT",
    "DEFAULT_MEMORY_PERCENT",
    "DEFAULT_PIDS_MAX",
    "DEFAULT_RUNAWAY_CPU_PERCENT",
    "OwnerLimitsConfig",
    "host_memory_bytes",
    "memory_bytes",
]

DEFAULT_MEMORY_PERCENT = 50
"""An owner's shells may hold half of the host's memory together (``memory.max``)."""
DEFAULT_PIDS_MAX = 4096
"""An owner's shells may run this many processes and threads together (``pids.max``)."""
DEFAULT_CPU_WEIGHT = 100
"""Each owner's share of a busy CPU: equal between owners (``cpu.weight``, v1 shares 1024)."""
DEFAULT_RUNAWAY_CPU_PERCENT = 10
"""A session that trips a limit as a runaway does (a fork bomb at the process limit, a
hog the kernel kills for memory) is held to this share of one CPU until it calms down:
a fork bomb's bursts of hundreds of waking processes otherwise delay every other owner
(see :mod:`.limitwatch`)."""
DEFAULT_BASE_CPU_WEIGHT = 400
"""The weight of all owners together against the harness's other cgroups (and, on a v1
host whose harness runs in the root cgroup, against each other process there): four
ordinary processes' worth, so an owner's parallel work is not squeezed to one process's
share on a busy host, while a runaway owner cannot outweigh the harness more than 4:1."""

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(?:I?B)?\s*$", re.IGNORECASE)
_PERCENT = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*%\s*$")
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
_MIN_MEMORY = 16 << 20


def _check_memory(_inst: object, _attribute: object, value: int | str | None) -> None:
    if value is None or value == "max":
        return
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ValueError(f"memory_max must be bytes, a size such as '2G', a share such as "
                         f"'50%', or 'max'; got {value!r}")
    memory_bytes(value, total=1 << 40)  # raises ValueError when malformed


def _check_pids(_inst: object, _attribute: object, value: int | str | None) -> None:
    if value is None or value == "max":
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 16:
        raise ValueError(f"pids_max must be an integer of at least 16, or 'max'; got {value!r}")


def _check_weight(_inst: object, attribute: attrs.Attribute[int | None], value: int | None) -> None:
    if value is None and attribute.name == "cpu_weight":
        return
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 10000:
        raise ValueError(f"{attribute.name} must be an integer from 1 to 10000; got {value!r}")


def _check_percent(_inst: object, _attribute: object, value: int | None) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 100:
        raise ValueError(
            f"runaway_cpu_percent must be an integer from 1 to 100 (percent of one CPU), or "
            f"null for no cap; got {value!r}"
        )


def _check_parent(_inst: object, _attribute: object, value: str | None) -> None:
    if value is None:
        return
    if not isinstance(value, str) or not value.strip("/") or ".." in value.split("/"):
        raise ValueError(
            f"parent must be a cgroup path: absolute such as '/dsh.slice' (as "
            f"/proc/self/cgroup writes it) or relative to the harness's own cgroup; "
            f"got {value!r}"
        )


def _check_interval(_inst: object, _attribute: object, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 50:
        raise ValueError(f"watch_interval_ms must be an integer of at least 50; got {value!r}")


@attrs.frozen(kw_only=True)
class OwnerLimitsConfig:
    """Config of the ``owner-limits`` plugin (SPEC §29): cgroup limits per owner.

    ``memory_max``: bytes, ``"2G"``, ``"50%"`` of the host's memory, or ``"max"``;
    ``pids_max``: processes and threads, or ``"max"``; ``cpu_weight``: 1–10000, the v2
    scale (100 is an equal share; v1 ``cpu.shares`` = weight × 1024 / 100). ``None``
    means the default (:data:`DEFAULT_MEMORY_PERCENT` %, :data:`DEFAULT_PIDS_MAX`,
    :data:`DEFAULT_CPU_WEIGHT`), best effort.

    ``cgroups``: ``"auto"`` (explicit limits required, defaults best effort),
    ``"require"`` (everything required, the cgroup teardown included) or ``"off"``.
    ``parent``: the existing cgroup the harness nests its own under, in every tree (default:
    its own cgroup; a relative path is taken below its own cgroup);
    ``kill_with``: how a session's cgroup is emptied (``"auto"``: ``cgroup.kill`` where
    cgroup v2 is mounted, else the v1 freezer). ``watch_interval_ms``: how often the
    limit counters are read to tell an owner that a limit was enforced.
    ``base_cpu_weight``: the CPU weight of the harness's cgroup of owners, all owners
    together (:data:`DEFAULT_BASE_CPU_WEIGHT`). ``runaway_cpu_percent``: the share of one
    CPU a session is held to once it trips a limit as a runaway does
    (:data:`DEFAULT_RUNAWAY_CPU_PERCENT`; None: never capped).
    """

    cgroups: Literal["auto", "require", "off"] = attrs.field(
        default="auto", validator=attrs.validators.in_(("auto", "require", "off"))
    )
    memory_max: int | str | None = attrs.field(default=None, validator=_check_memory)
    pids_max: int | str | None = attrs.field(default=None, validator=_check_pids)
    cpu_weight: int | None = attrs.field(default=None, validator=_check_weight)
    parent: str | None = attrs.field(default=None, validator=_check_parent)
    kill_with: Literal["auto", "cgroup.kill", "freezer"] = attrs.field(
        default="auto", validator=attrs.validators.in_(("auto", "cgroup.kill", "freezer"))
    )
    watch_interval_ms: int = attrs.field(default=1000, validator=_check_interval)
    base_cpu_weight: int = attrs.field(default=DEFAULT_BASE_CPU_WEIGHT, validator=_check_weight)
    runaway_cpu_percent: int | None = attrs.field(
        default=DEFAULT_RUNAWAY_CPU_PERCENT, validator=_check_percent
    )


def memory_bytes(value: int | str, *, total: int) -> int:
    """Bytes for a configured memory limit; ``total`` is what a percentage is of.

    Raises:
        ValueError: a malformed value, or one below 16 MiB (a shell could not start).
    """
    if isinstance(value, int):
        size = value
    elif match := _PERCENT.match(value):
        share = float(match.group(1))
        if not 0 < share <= 100:
            raise ValueError(f"memory_max share must be above 0% and at most 100%; got {value!r}")
        size = int(total * share / 100)
    elif match := _SIZE.match(value):
        size = int(float(match.group(1)) * _UNITS[match.group(2).upper()])
    else:
        raise ValueError(
            f"memory_max must be bytes, a size such as '2G', a share such as '50%', or "
            f"'max'; got {value!r}"
        )
    if size < _MIN_MEMORY:
        raise ValueError(f"memory_max must be at least 16M; got {value!r}")
    return size


def host_memory_bytes() -> int:
    """The host's memory (``MemTotal``), 0 when unknown."""
    try:
        with open("/proc/meminfo", encoding="ascii") as file:
            for line in file:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0
