"""The parts of the owner limits that need no cgroup: config validation, memory sizes,
reading a host's cgroup layout from its mount table (v2, v1, hybrid, a container's view),
and an owner's limit marks read from its files.
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
        {"runaway_cpu_percent": 0},
        {"runaway_cpu_percent": 101},
        {"runaway_cpu_percent": "10%"},
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


def _files(directory: Path, **values: str) -> tuple[int, str]:
    directory.mkdir(exist_ok=True)
    for name, value in values.items():
        (directory / name.replace("__", ".")).write_text(f"{value}\n")
    return 1, str(directory)


@pytest.mark.parametrize(
    ("memory", "pids", "reached"),
    [
        # Far below both limits: the sessions need not be read.
        ({"memory__max_usage_in_bytes": str(100 << 20)}, {"pids__peak": "10"}, (False, False)),
        # A peak within a huge page and a batch of the limit counts as reached.
        ({"memory__max_usage_in_bytes": str((512 << 20) - (3 << 20))}, {"pids__peak": "63"},
         (True, False)),
        ({"memory__max_usage_in_bytes": str(200 << 20)}, {"pids__peak": "64"}, (False, True)),
        # Memory + swap met its own limit first.
        ({"memory__max_usage_in_bytes": str(200 << 20),
          "memory__memsw__limit_in_bytes": str(512 << 20),
          "memory__memsw__max_usage_in_bytes": str(512 << 20)}, {"pids__peak": "1"},
         (True, False)),
        # A kernel without the peaks: read the sessions, as without marks.
        ({}, {}, (True, True)),
    ],
)
def test_an_owners_marks_say_whether_a_limit_can_have_been_met(
    tmp_path: Path, memory: dict[str, str], pids: dict[str, str], reached: tuple[bool, bool]
) -> None:
    limits = {"memory__limit_in_bytes": str(512 << 20)}
    group = CgroupGroup(
        dirs=(str(tmp_path),),
        kill_method="signal",
        memory_dir=_files(tmp_path / "memory", **limits, **memory),
        pids_dir=_files(tmp_path / "pids", pids__max="64", **pids),
    )
    marks = group.marks()
    assert (marks.memory_reached, marks.pids_reached) == reached
    assert marks.pids_max == 64


def test_unlimited_owners_never_reach_a_mark(tmp_path: Path) -> None:
    group = CgroupGroup(
        dirs=(str(tmp_path),),
        kill_method="signal",
        memory_dir=(2, _files(tmp_path / "m", memory__max="max", memory__peak="999")[1]),
        pids_dir=_files(tmp_path / "p", pids__max="max", pids__peak="5000"),
    )
    marks = group.marks()
    assert (marks.memory_reached, marks.pids_reached, marks.pids_max) == (False, False, None)
