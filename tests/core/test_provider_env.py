"""The child environment: credentials and host markers never reach the terminal."""

from __future__ import annotations

import asyncio
import os

import pytest

from dsh_terminal_core.provider import (
    LocalTerminalProvider,
    TerminalSpawnSpec,
    child_environment,
    is_scrubbed_name,
)


@pytest.mark.parametrize(
    "name",
    [
        "GITHUB_TOKEN",
        "github_token",
        "AWS_SECRET_ACCESS_KEY",
        "OPENAI_API_KEY",
        "PGPASSWORD",
        "MyKeyring",
        "client_secret",
        "DSH_SESSION_ID",
        "DSH_SHELL",
    ],
)
def test_credential_shaped_and_host_names_are_scrubbed(name: str) -> None:
    assert is_scrubbed_name(name)


@pytest.mark.parametrize("name", ["PATH", "HOME", "LANG", "TERM", "dsh_lowercase", "XDSH_X"])
def test_ordinary_names_are_kept(name: str) -> None:
    assert not is_scrubbed_name(name)


def test_overrides_apply_after_scrubbing() -> None:
    base = {"PATH": "/bin", "API_TOKEN": "t", "DSH_SHELL": "1", "KEEP": "k"}
    env = child_environment({"DSH_SHELL": "2", "EXTRA": "x"}, base=base)
    assert env == {"PATH": "/bin", "KEEP": "k", "DSH_SHELL": "2", "EXTRA": "x"}
    assert base["API_TOKEN"] == "t"  # the source is never mutated


def test_the_host_environment_is_read_as_it_is_now(monkeypatch: pytest.MonkeyPatch) -> None:
    # Scrubbing the host's environment is remembered between opens; every change made
    # through os.environ must still show at the next one.
    monkeypatch.setenv("DSH_TEST_ADDED", "x")  # a host marker: never inherited
    monkeypatch.setenv("ENV_PROBE_ONE", "1")
    first = child_environment()
    assert first["ENV_PROBE_ONE"] == "1" and "DSH_TEST_ADDED" not in first
    first["ENV_PROBE_ONE"] = "changed by the caller"  # a fresh dict each time
    assert child_environment()["ENV_PROBE_ONE"] == "1"
    monkeypatch.setenv("ENV_PROBE_ONE", "2")
    monkeypatch.setenv("ENV_PROBE_TWO", "new")
    monkeypatch.setenv("LATE_API_TOKEN", "secret")
    second = child_environment()
    assert (second["ENV_PROBE_ONE"], second["ENV_PROBE_TWO"]) == ("2", "new")
    assert "LATE_API_TOKEN" not in second
    monkeypatch.delenv("ENV_PROBE_TWO")
    assert "ENV_PROBE_TWO" not in child_environment()
    assert child_environment() == {
        name: value for name, value in os.environ.items() if not is_scrubbed_name(name)
    }


async def test_secrets_are_absent_from_a_real_child(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FOO_TOKEN", "leak-1")
    monkeypatch.setenv("my_api_key", "leak-2")
    monkeypatch.setenv("DB_PASSWORD", "leak-3")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "leak-4")
    monkeypatch.setenv("DSH_SESSION_ID", "leak-5")
    monkeypatch.setenv("HARMLESS_VALUE", "kept-1")
    provider = LocalTerminalProvider()
    process = await provider.spawn_terminal(
        TerminalSpawnSpec(argv=["env"], env={"GIVEN": "kept-2"})
    )
    output = bytearray()
    process.set_output_handler(output.extend)
    try:
        status = await asyncio.wait_for(process.done, 10)
        assert status.exit_code == 0
        text = output.decode()
        assert "leak-" not in text
        assert "HARMLESS_VALUE=kept-1" in text
        assert "GIVEN=kept-2" in text
    finally:
        await process.terminate()
