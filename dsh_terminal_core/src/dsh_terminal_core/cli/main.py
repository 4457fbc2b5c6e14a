"""The ``dsh-terminal`` command: ``plugins``, ``demo``, ``mcp``, ``env``, ``attach``, ``play``, ``audit``."""

from __future__ import annotations

import argparse
import asyncio
import enum
import importlib.metadata
import sys
from collections.abc import Sequence

import attrs

from ..kernel.errors import DshError
from ..kernel.harness import Harness
from ..mcp.profiles import TOOL_PROFILES

__all__ = ["main"]

_DISTRIBUTIONS = ("dsh-terminal-core", "dsh-terminal-bash", "dsh-tool-terminal", "dsh-pty-session")


async def _plugins_report() -> str:
    async with Harness() as harness:
        by_plugin: dict[str | None, list[str]] = {}
        for name in harness.ctx.tools.names():
            by_plugin.setdefault(harness.ctx.tools.get(name).plugin, []).append(name)
        by_backend: dict[str | None, list[str]] = {}
        if harness.ctx.has("terminals"):
            for kind, origin in harness.ctx.terminals.backend_origins().items():
                by_backend.setdefault(origin, []).append(kind)
        lines = [f"{len(harness.plugins)} plugins loaded (entry-point group 'dsh.plugins'):", ""]
        for plugin in harness.plugins:
            info = plugin.info
            lines.append(f"{info.name}  —  {info.description}")
            lines.append(f"  from:     {plugin.source}")
            lines.append(f"  provides: {', '.join(info.provides) or '-'}")
            injects = list(info.inject) + [f"{k} (optional)" for k in info.optional_inject]
            lines.append(f"  injects:  {', '.join(injects) or '-'}")
            if info.config is not None:
                keys = ", ".join(f"{a.name}={_shown(a.default)}" for a in attrs.fields(info.config))
                lines.append(f"  config:   {keys}")
            backends = by_backend.get(info.name, [])
            if backends:
                lines.append(f"  registers backend: {', '.join(backends)}")
            lines.append(f"  tools:    {', '.join(by_plugin.get(info.name, [])) or '-'}")
            lines.append("")
        unattributed = by_backend.get(None, [])
        if unattributed:
            lines.append(f"backends registered outside a plugin: {', '.join(unattributed)}")
        lines.append("harness built-ins: ctx.tools, ctx.system_prompt")
        return "\n".join(lines)


def _shown(default: object) -> str:
    if isinstance(default, enum.Enum):
        return repr(default.value)
    if isinstance(default, attrs.Factory):  # type: ignore[arg-type]
        return "(computed)"
    return repr(default)


def _version_report() -> str:
    """``dsh-terminal <core version>`` and then each installed distribution's version."""
    lines = []
    for distribution in _DISTRIBUTIONS:
        try:
            version = importlib.metadata.version(distribution)
        except importlib.metadata.PackageNotFoundError:
            version = "not installed"
        lines.append(f"  {distribution} {version}")
    core = lines[0].split()[-1] if "not installed" not in lines[0] else "unknown"
    return "\n".join([f"dsh-terminal {core}", *lines])


def _add_http_arguments(mcp: argparse.ArgumentParser) -> None:
    http = mcp.add_argument_group("streamable HTTP (instead of stdio)")
    http.add_argument(
        "--http",
        metavar="HOST:PORT",
        help="serve at http://HOST:PORT/mcp ([::1]:PORT for IPv6; port 0 picks a free one)",
    )
    http.add_argument(
        "--token-file",
        metavar="FILE",
        help="JSON object of bearer token -> agent id (else env DSH_MCP_TOKENS)",
    )
    http.add_argument(
        "--no-auth",
        action="store_true",
        help="serve without tokens, as one identity; refused unless HOST is loopback",
    )
    http.add_argument(
        "--idle-ttl-s",
        type=float,
        metavar="N",
        help="close an identity's sessions N s after its last disconnect (default 3600)",
    )


def _audit_report(path: str, agent: str | None, session: str | None, since: str | None) -> int:
    """Print the audit log at ``path`` as a table; 2 when it cannot be read."""
    from ..records.audit_view import audit_table, parse_since, read_audit

    try:
        moment = parse_since(since) if since is not None else None
    except ValueError:
        print(f"dsh-terminal audit: --since {since!r} is not an ISO 8601 time", file=sys.stderr)
        return 2
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            found = read_audit(handle, agent=agent, session=session, since=moment)
    except OSError as exc:
        print(f"dsh-terminal audit: cannot read {path}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    print(audit_table(found.entries))
    if found.unreadable:
        print(f"({found.unreadable} lines were not audit entries)", file=sys.stderr)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="dsh-terminal", description="Persistent PTY terminals for AI agents."
    )
    parser.add_argument(
        "--version", action="store_true", help="show the installed distributions' versions"
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands.add_parser(
        "plugins", help="list discovered plugins, what they provide and their tools"
    )
    demo = commands.add_parser("demo", help="a narrated tour of the terminal tools on this machine")
    demo.add_argument(
        "--sandbox",
        choices=["auto", "read-only", "workspace-write", "danger-full-access"],
        default="auto",
        help=(
            "sandbox mode (auto: workspace-write when bubblewrap works, "
            "else danger-full-access, said aloud)"
        ),
    )
    mcp = commands.add_parser("mcp", help="serve every tool over MCP (stdio, or --http)")
    mcp.add_argument("--config", help="JSON file with plugin config sections")
    mcp.add_argument(
        "--sandbox",
        choices=["read-only", "workspace-write", "danger-full-access"],
        help="sandbox mode for the connection's agent (env DSH_SANDBOX_MODE)",
    )
    mcp.add_argument("--workspace", help="workspace root (env DSH_WORKSPACE_ROOT; default: cwd)")
    mcp.add_argument(
        "--tools",
        choices=list(TOOL_PROFILES),
        help=(
            "tool profile (SPEC §30.1): dsh (default; every tool), codex (exec_command, "
            "write_stdin) or claude (Bash, TaskOutput, TaskStop); overrides the config file"
        ),
    )
    _add_http_arguments(mcp)
    attach = commands.add_parser(
        "attach", help="attach this terminal to a watch link, like tmux attach (SPEC §22)"
    )
    attach.add_argument("url", help="a link from terminal_watch or terminal_ask_human")
    world = commands.add_parser(
        "world",
        help="the world agent: PTYs where the work runs, for a harness elsewhere (SPEC §21)",
    )
    world.add_argument(
        "--stdio",
        action="store_true",
        help="speak the world protocol on stdin/stdout (what kubectl exec -i or ssh -T start)",
    )
    world.add_argument("--config", help="JSON file with plugin config sections")
    world.add_argument(
        "--sandbox",
        choices=["read-only", "workspace-write", "danger-full-access"],
        help="the world's default sandbox mode (a harness's open names its own)",
    )
    world.add_argument("--workspace", help="the world's workspace root (default: cwd)")
    world.add_argument(
        "--socket",
        metavar="PATH",
        help="with --stdio: relay to the daemon at PATH; with serve: listen there",
    )
    world.add_argument(
        "--lease-s",
        type=float,
        default=600,
        metavar="S",
        help="serve: keep a session S seconds after its harness is gone (default 600)",
    )
    world.add_argument("mode", nargs="?", choices=["serve"], help="serve: run the daemon")
    play = commands.add_parser(
        "play", help="play a session's recording (.cast) in the browser (SPEC §31)"
    )
    play.add_argument("file", metavar="FILE", help="an asciicast file of the recording plugin")
    play.add_argument("--audit", metavar="AUDIT", help="an audit log to link to moments")
    env = commands.add_parser(
        "env", help="show the login environment a backend captures for its sessions (SPEC §32)"
    )
    env.add_argument("--config", help="JSON file with plugin config sections")
    env.add_argument(
        "--sandbox",
        choices=["read-only", "workspace-write", "danger-full-access"],
        help="the sandbox mode the login shell runs under (env DSH_SANDBOX_MODE)",
    )
    env.add_argument("--workspace", help="workspace root (env DSH_WORKSPACE_ROOT; default: cwd)")
    env.add_argument("--type", dest="kind", metavar="TYPE", help="only this terminal type")
    env.add_argument(
        "--values", action="store_true", help="show the variables' values (never a secret's)"
    )
    audit = commands.add_parser("audit", help="print an audit log (the audit plugin's file)")
    audit.add_argument("file", metavar="FILE", help="the audit log, one JSON line per call")
    audit.add_argument("--agent", metavar="A", help="only calls by agent A")
    audit.add_argument("--session", metavar="S", help="only calls about session S")
    audit.add_argument("--since", metavar="ISO", help="only calls at or after this time (UTC)")
    args = parser.parse_args(argv)
    if args.version:
        print(_version_report())
        return 0
    if args.command is None:
        parser.print_help()
        return 0
    if args.command == "mcp" and args.http is None:
        for flag, given in (
            ("--token-file", args.token_file is not None),
            ("--no-auth", args.no_auth),
            ("--idle-ttl-s", args.idle_ttl_s is not None),
        ):
            if given:
                parser.error(f"{flag} applies only with --http HOST:PORT")

    if args.command == "audit":
        return _audit_report(args.file, args.agent, args.session, args.since)
    try:
        if args.command == "plugins":
            print(asyncio.run(_plugins_report()))
            return 0
        if args.command == "demo":
            from .demo import run_demo

            return asyncio.run(run_demo(args.sandbox))
        if args.command == "play":
            from .play import play as play_recording

            return play_recording(args.file, args.audit)
        if args.command == "env":
            from .env import env_report

            report, status = asyncio.run(
                env_report(
                    args.config, args.sandbox, args.workspace, values=args.values, kind=args.kind
                )
            )
            print(report, file=sys.stdout if status != 2 else sys.stderr)
            return status
        if args.command == "attach":
            from .attach import attach as attach_to

            return attach_to(args.url)
        if args.command == "world":
            from ..worlds import serve as worlds

            if args.mode == "serve":
                if args.socket is None or args.stdio:
                    parser.error("world serve needs --socket PATH (and no --stdio)")
                return worlds.serve_socket(
                    args.socket, args.config, args.sandbox, args.workspace, lease_s=args.lease_s
                )
            if not args.stdio:
                parser.error("world needs --stdio, or serve --socket PATH")
            if args.socket is not None:
                return worlds.relay_stdio(args.socket)
            return worlds.serve_stdio(args.config, args.sandbox, args.workspace)
        if args.command == "mcp":
            if args.http is not None:
                from ..mcp.http import DEFAULT_IDLE_TTL_S, serve_http

                return serve_http(
                    args.config,
                    args.sandbox,
                    args.workspace,
                    address=args.http,
                    token_file=args.token_file,
                    no_auth=args.no_auth,
                    idle_ttl_s=DEFAULT_IDLE_TTL_S if args.idle_ttl_s is None else args.idle_ttl_s,
                    tools=args.tools,
                )
            from ..mcp.server import serve

            return serve(
                config_path=args.config,
                sandbox=args.sandbox,
                workspace=args.workspace,
                tools=args.tools,
            )
    except DshError as exc:
        print(f"dsh-terminal: error [{exc.code}]: {exc.message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0  # the reader (e.g. `| head`) went away; nothing left to say
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
