"""The parts of the owner limits that need no cgroup: config validation, memory sizes, and
reading a host's cgroup layout from its mount table (v2, v1, hybrid, a container's view).
The limits themselves, with real cgroups and processes: tests/reliability/test_owner_limits.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dsh_terminal_core.kernel.errors import ConfigError, TerminalError
from dsh_terminal_core.kernel.harness import Harness
from dsh_terminal_core.provider import CgroupGroup, LocalTerminalProvider, TerminalSpawnSpec
from dsh_terminal_core.provider.cgroupfs import discover
from dsh_terminal_core.sandbox import OwnerLimitsConfig
from dsh_terminal_core.sandbox.limitconfig import memory_bytes


@pytest.mark.parametrize(
    "section",
    [
        {"memory_max": "lots"},
        {"memory_max": "0%"},
        {"memory_max": "150%"},
        {"memory_max": 1024},
        {"memory_max": True},
        {"pids_max": 3},
        {"pids_max": "4096"},
        {"cpu_weight": 0},
        {"cpu_weight": 10001},
        {"parent": "../escape"},
        {"parent": "/"},
        {"cgroups": "maybe"},
        {"kill_with": "prayer"},
        {"watch_interval_ms": 1},
        {"base_cpu_weight": 0},
        {"memory": "1G"},
    ],
)
async def test_bad_config_is_refused_with_a_stable_code(section: dict[str, Any]) -> None:
    with pytest.raises(ConfigError) as caught:
        async with Harness(config={"owner-limits": section}):
            pass
    assert caught.value.code == "INVALID_CONFIG"
    assert caught.value.plugin == "owner-limits"


def test_good_config_values() -> None:
    config = OwnerLimitsConfig(memory_max="512M", pids_max="max", cpu_weight=50, parent="outer")
    assert (config.memory_max, config.pids_max, config.parent) == ("512M", "max", "outer")
    assert memory_bytes("512M", total=0) == 512 << 20
    assert memory_bytes("1.5G", total=0) == 3 << 29
    assert memory_bytes("25%", total=8 << 30) == 2 << 30
    assert memory_bytes(64 << 20, total=0) == 64 << 20



def _host(tmp_path: Path, mounts: str, membership: str) -> Any:
    (tmp_path / "mountinfo").write_text(mounts)
    (tmp_path / "cgroup").write_text(membership)
    return discover(str(tmp_path / "mountinfo"), str(tmp_path / "cgroup"))


def test_hybrid_layout_takes_controllers_from_v1_and_tracking_from_the_unified_tree(
    tmp_path: Path,
) -> None:
    mounts = (
        "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
        "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
        "37 31 0:34 / /sys/fs/cgroup/freezer rw,relatime - cgroup cgroup rw,freezer\n"
        "39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids\n"
        "40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd\n"
        "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n"
    )
    membership = "9:name=systemd:/\n8:pids:/\n6:freezer:/\n4:memory:/job/7\n1:cpu:/\n0::/\n"
    host = _host(tmp_path, mounts, membership)
    assert host.layout == "hybrid"
    assert host.serving("memory").own == "/sys/fs/cgroup/memory/job/7"
    assert host.serving("pids").version == 1
    assert host.unified is not None and host.unified.own == "/sys/fs/cgroup/unified/"
    assert "freezer" in host.legacy


def test_v2_only_and_a_container_that_mounts_part_of_the_tree(tmp_path: Path) -> None:
    mounts = "30 25 0:26 /kubepods/pod1 /sys/fs/cgroup rw - cgroup2 cgroup2 rw,nsdelegate\n"
    host = _host(tmp_path, mounts, "0::/kubepods/pod1/app\n")
    assert host.layout == "v2"
    assert host.unified is not None and host.unified.own == "/sys/fs/cgroup/app"
    assert host.legacy == {}
    # A cgroup outside what the mount shows cannot be reached: no tree.
    assert _host(tmp_path, mounts, "0::/elsewhere\n").layout == "none"


def test_combined_v1_controllers_are_matched_by_their_set(tmp_path: Path) -> None:
    mounts = "33 31 0:30 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpuacct,cpu\n"
    host = _host(tmp_path, mounts, "3:cpu,cpuacct:/user.slice\n")
    assert host.layout == "v1"
    assert host.serving("cpu").own == "/sys/fs/cgroup/cpu,cpuacct/user.slice"
    assert host.serving("memory") is None


@pytest.mark.parametrize("spawner", ["fork-server", "in-process"])
async def test_a_child_that_cannot_join_its_cgroup_never_runs(
    tmp_path: Path, spawner: str
) -> None:
    """The child joins before it execs: a cgroup it cannot join fails the spawn, with
    nothing started (a directory that is no cgroup stands in for a vanished one)."""
    gone = tmp_path / "no-such-cgroup"
    group = CgroupGroup(dirs=(str(gone),), kill_method="signal")
    provider = LocalTerminalProvider(spawner=spawner)  # type: ignore[arg-type]
    marker = tmp_path / "ran"
    spec = TerminalSpawnSpec(argv=["/bin/sh", "-c", f"touch {marker}"], cgroup=group)
    with pytest.raises(TerminalError) as caught:
        await provider.spawn_terminal(spec)
    assert caught.value.code == "LIMITS_UNAVAILABLE"
    assert "no-such-cgroup" in caught.value.message
    assert not marker.exists()
