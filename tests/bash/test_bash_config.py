"""Bash backend config: defaults, and invalid values failing at plugin load."""

from __future__ import annotations

import pytest

from dsh_terminal_bash import BashConfig
from dsh_terminal_core.kernel.errors import ConfigError
from dsh_terminal_core.kernel.harness import Harness


def test_defaults_are_the_production_values() -> None:
    config = BashConfig()
    assert (config.idle_silence_ms, config.handoff_grace_ms, config.timeout_ms) == (
        3000,
        500,
        30000,
    )
    assert (config.rows, config.cols, config.scrollback_lines) == (40, 160, 10000)
    assert config.max_read_bytes == 256 * 1024 and config.scrollback_max_bytes == 4 * 1024 * 1024
    assert config.shell_args == ("--noprofile", "--norc", "-i")


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ({"idle_silence_ms": 0}, "idle_silence_ms must be a positive integer, got 0"),
        ({"timeout_ms": "30"}, "timeout_ms must be a positive integer, got '30'"),
        (
            {"max_read_bytes": 10, "scrollback_max_bytes": 5},
            "max_read_bytes (10) must be <= scrollback_max_bytes (5)",
        ),
        (
            {"handoff_grace_ms": 10, "poll_interval_ms": 50},
            "handoff_grace_ms (10) must be >= poll_interval_ms (50)",
        ),
        ({"shell_path": ""}, "shell_path must be a non-empty string"),
        ({"idle_silence": 5}, "has no config key 'idle_silence'"),
    ],
)
async def test_invalid_config_fails_at_load_with_key_and_rule(
    section: dict[str, object], message: str
) -> None:
    with pytest.raises(ConfigError) as info:
        await Harness(config={"terminal-bash": section}).start()
    assert message in str(info.value)
    assert info.value.plugin == "terminal-bash"
