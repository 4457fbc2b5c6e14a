"""The HTTP server's parts on their own: token table, bind address, identity leases and reaping."""

from __future__ import annotations

import asyncio
import hmac
import json
import socket
from pathlib import Path

import pytest

from dsh_terminal_core.kernel.agents import Agent
from dsh_terminal_core.kernel.errors import DshError
from dsh_terminal_core.mcp.http import _bind, is_loopback, parse_bind, resolve_http_options
from dsh_terminal_core.mcp.identities import Identities
from dsh_terminal_core.mcp.server import McpServerError
from dsh_terminal_core.mcp.tokens import TokenError, TokenTable, bearer_token, load_tokens

A = "tok-a-0123456789abcdef"
B = "tok-b-fedcba9876543210"


# -- tokens ----------------------------------------------------------------------------


def test_a_token_names_its_identity_and_nothing_else_does() -> None:
    table = TokenTable.parse(json.dumps({A: "agent-a", B: "agent-b"}), "test")
    assert table.identify(A) == "agent-a"
    assert table.identify(B) == "agent-b"
    for wrong in ("", A[:-1], A + "x", A.upper(), " " + A, B[:8]):
        assert table.identify(wrong) is None
    assert A not in repr(table) and B not in repr(table)


def test_every_token_is_compared_whether_or_not_one_matches(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    table = TokenTable.parse(json.dumps({A: "agent-a", B: "agent-b", A + "c": "agent-c"}), "t")
    calls: list[tuple[int, int]] = []
    real = hmac.compare_digest

    def counting(x: bytes, y: bytes) -> bool:
        calls.append((len(x), len(y)))
        return real(x, y)

    monkeypatch.setattr(hmac, "compare_digest", counting)
    for presented in (A, B, "no-such-token-at-all", "x"):
        calls.clear()
        table.identify(presented)
        # Three comparisons of equal-length digests, whatever the token's length.
        assert calls == [(32, 32)] * 3


def test_bearer_header_parsing() -> None:
    assert bearer_token(f"Bearer {A}") == A
    assert bearer_token(f"bearer   {A} ") == A
    for value in (None, "", "Bearer", "Bearer ", f"Basic {A}", A):
        assert bearer_token(value) is None


@pytest.mark.parametrize(
    ("table", "needle"),
    [
        ("[]", "non-empty JSON object"),
        ("{}", "non-empty JSON object"),
        ("{not json", "not valid JSON"),
        (json.dumps({A: ""}), "agent id must be a non-empty string"),
        (json.dumps({A: 3}), "agent id must be a non-empty string"),
        (json.dumps({"short-one": "a"}), "at least 16 characters"),
        (json.dumps({f" {A}": "a"}), "no surrounding spaces"),
        (json.dumps({A: "same", B: "same"}), "each token is one identity"),
    ],
)
def test_malformed_tables_are_refused_without_quoting_a_token(table: str, needle: str) -> None:
    with pytest.raises(TokenError, match=needle) as caught:
        TokenTable.parse(table, "DSH_MCP_TOKENS")
    assert caught.value.code == "INVALID_CONFIG"
    for token in (A, B, "short-one"):
        assert token not in str(caught.value)


def test_the_file_wins_over_the_environment_and_loose_modes_are_reported(tmp_path: Path) -> None:
    env = {"DSH_MCP_TOKENS": json.dumps({B: "from-env"})}
    assert load_tokens(None, {}) is None
    from_env = load_tokens(None, env)
    assert from_env is not None and from_env.agent_ids == ("from-env",)
    file = tmp_path / "tokens.json"
    file.write_text(json.dumps({A: "from-file"}))
    file.chmod(0o600)
    from_file = load_tokens(str(file), env)
    assert from_file is not None and from_file.agent_ids == ("from-file",)
    assert from_file.warnings == ()
    file.chmod(0o644)
    loose = load_tokens(str(file), env)
    assert loose is not None and "readable by other users" in loose.warnings[0]
    with pytest.raises(TokenError, match="cannot read token file"):
        load_tokens(str(tmp_path / "missing"), env)


# -- address and the auth rule ---------------------------------------------------------


def test_bind_addresses() -> None:
    assert (parse_bind("127.0.0.1:0").host, parse_bind("127.0.0.1:0").port) == ("127.0.0.1", 0)
    v6 = parse_bind("[::1]:8080")
    assert (v6.host, v6.port, v6.url(9)) == ("::1", 8080, "http://[::1]:9/mcp")
    assert parse_bind("localhost:80").url() == "http://localhost:80/mcp"
    for bad in ("127.0.0.1", ":80", "host:", "host:http", "host:70000", "::1:80"):
        with pytest.raises(McpServerError):
            parse_bind(bad)


async def test_accepted_connections_have_nagle_off() -> None:
    """asyncio sets TCP_NODELAY only on sockets whose proto says TCP; without it each
    two-part response waits ~40 ms for the client's delayed ACK."""
    listener = _bind(parse_bind("127.0.0.1:0"))
    nodelay: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    def on_connect(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        nodelay.set_result(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
        writer.close()

    server = await asyncio.start_server(on_connect, sock=listener)
    async with server:
        _, writer = await asyncio.open_connection(*listener.getsockname()[:2])
        assert await nodelay == 1
        writer.close()
        await writer.wait_closed()


def test_loopback_is_every_resolved_address_being_loopback() -> None:
    for host in ("127.0.0.1", "127.8.9.10", "::1", "localhost"):
        assert is_loopback(host), host
    for host in ("0.0.0.0", "::", "10.0.0.1", "192.168.1.2", "no-such-host.invalid"):
        assert not is_loopback(host), host


def test_the_auth_rule(tmp_path: Path) -> None:
    env = {"DSH_MCP_TOKENS": json.dumps({A: "agent-a"})}
    served = resolve_http_options("0.0.0.0:8080", None, False, 3600, env)
    assert served.tokens is not None and served.tokens.identify(A) == "agent-a"
    assert resolve_http_options("127.0.0.1:0", None, True, 3600, {}).tokens is None
    refusals = [
        (("0.0.0.0:0", None, False, 3600, {}), "refusing to serve"),
        (("127.0.0.1:0", None, False, 3600, {}), "refusing to serve"),
        (("0.0.0.0:0", None, True, 3600, env), "only allowed on a loopback"),
        (("[::]:0", None, True, 3600, {}), "only allowed on a loopback"),
        (("127.0.0.1:0", str(tmp_path / "t"), True, 3600, {}), "contradict"),
        (("127.0.0.1:0", None, True, 0, {}), "positive number"),
        (("127.0.0.1:0", None, True, float("nan"), {}), "positive number"),
    ]
    for args, needle in refusals:
        with pytest.raises(McpServerError, match=needle):
            resolve_http_options(*args)


# -- identities ------------------------------------------------------------------------


class _Gated:
    """Agents whose dispose waits on a gate, so a reconnect can land mid-reap."""

    def __init__(self) -> None:
        self.made: list[Agent] = []
        self.gate = asyncio.Event()
        self.disposing = asyncio.Event()

    def create(self, agent_id: str) -> Agent:
        agent = Agent(agent_id)

        async def held() -> None:
            self.disposing.set()
            await self.gate.wait()

        agent.on_dispose(held)
        self.made.append(agent)
        return agent


async def test_connections_of_one_identity_share_its_agent() -> None:
    gated = _Gated()
    gated.gate.set()
    identities = Identities(gated.create, 3600)
    first, second = identities.lease("a"), identities.lease("a")
    other = identities.lease("b")
    assert first.agent is second.agent and other.agent is not first.agent
    assert identities.connected("a") == 2
    first.release()
    first.release()  # idempotent
    assert identities.connected("a") == 1
    await identities.close()
    assert all(agent.disposed for agent in gated.made)
    with pytest.raises(DshError) as caught:
        identities.lease("a")
    assert caught.value.code == "SERVICE_DISPOSING"


async def test_a_reconnect_before_the_ttl_keeps_the_agent_repeatedly() -> None:
    for _ in range(50):
        gated = _Gated()
        gated.gate.set()
        identities = Identities(gated.create, 1e-6)
        lease = identities.lease("a")
        lease.release()
        # Same tick as the release: the expiry timer has not run, so it is stopped.
        again = identities.lease("a")
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert again.agent is lease.agent and again.agent.live
        again.release()
        await identities.close()


async def test_a_reconnect_during_a_reap_gets_a_fresh_agent_repeatedly() -> None:
    for _ in range(50):
        gated = _Gated()
        identities = Identities(gated.create, 1e-6)
        old = identities.lease("a")
        old.release()
        await gated.disposing.wait()  # the reap has started and is held at the gate
        fresh = identities.lease("a")
        assert fresh.agent is not old.agent
        assert not old.agent.live and fresh.agent.live
        gated.gate.set()
        fresh.release()
        await identities.close()
        assert old.agent.disposed and fresh.agent.disposed


async def test_an_identity_with_an_open_connection_is_never_reaped() -> None:
    gated = _Gated()
    gated.gate.set()
    identities = Identities(gated.create, 1e-6)
    held = identities.lease("a")
    brief = identities.lease("a")
    brief.release()
    for _ in range(20):
        await asyncio.sleep(0)
    assert held.agent.live and not gated.disposing.is_set()
    held.release()
    await gated.disposing.wait()
    assert identities.connected("a") == 0
    await identities.close()
    assert held.agent.disposed
