"""``dsh-terminal world``: the world agent on stdio, as a daemon on a socket, or a relay.

``world --stdio`` runs the agent on its stdin and stdout. ``world serve --socket PATH``
runs a daemon whose sessions outlive any one connection (each kept for its lease when
its harness goes); the socket is created 0600 in a 0700 directory, and a connection
whose peer is another user (``SO_PEERCRED``) is refused. ``world --stdio --socket PATH``
relays its stdio to that daemon byte for byte, parsing nothing, so the hello is end to
end whatever the relay's version: what ``kubectl exec -i POD -- dsh-terminal world
--stdio --socket /run/dsh/world.sock`` starts. When the daemon ends the stream, the relay
looks whether anything still listens there, and says on stderr when nothing does: the
harness reads those last words and ends the sessions at once, where starting the relay
again (a whole interpreter, most of a second) only to hear the same would hold them.

This is what ``kubectl exec -i POD -- dsh-terminal world --stdio``, ``docker exec -i``
and ``ssh -T HOST dsh-terminal world --stdio`` start. The protocol owns the two
descriptors: they are duplicated for it and fd 1 then points at stderr, so a stray print
or a child that inherits stdout cannot corrupt the stream. A TTY on stdin is refused at
once: a terminal in between (``-it``) rewrites bytes the protocol needs intact.

The agent is a harness with exactly the plugins a world needs — the local provider, the
sandbox policy and bubblewrap, the session registry and the bash backend — and no tools.
When the connection ends, every session it opened is torn down and the command returns.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import importlib.metadata
import logging
import os
import signal
import socket
import stat
import sys
from collections.abc import Mapping
from typing import Any

from ..kernel.configfile import ConfigFileError, build_config
from ..kernel.errors import DshError
from ..kernel.harness import Harness
from ..kernel.plugins import ENTRY_POINT_GROUP
from .agent import WorldAgent
from .connection import Connection
from .frames import DEFAULT_MAX_FRAME
from .eventloop import run_loop
from .handoff import handoff_path, offer, peer_allowed, serve_handoffs, wait_out
from .wire import over_pipes, serve_unix

__all__ = ["WORLD_PLUGINS", "relay_stdio", "serve_socket", "serve_stdio", "world_plugins"]

log = logging.getLogger("dsh_terminal_core.worlds")

#: The plugins a world agent loads, by entry-point name: the full local stack, no tools.
WORLD_PLUGINS = (
    "subprocess-local",
    "sandbox-policy",
    "sandbox-bwrap",
    "terminals",
    "terminal-bash",
)

#: How long the relay waits for a daemon to answer when it looks whether one still does.
_PROBE_S = 1.0

TTY_REFUSED = (
    "dsh-terminal world: stdin is a terminal; the world protocol needs a byte channel: "
    "use `kubectl exec -i`, `docker exec -i` or `ssh -T`, without -t"
)


#: Shell backends loaded as well where they are installed in the world (each is a
#: distribution of its own beside the bash backend): ``type: "zsh"`` / ``"fish"`` there.
WORLD_SHELLS = ("terminal-zsh", "terminal-fish")

#: Loaded as well when the world's config has their section: recording the sessions
#: where they run (SPEC §23 in every world), by the world's operator.
WORLD_OPTIONAL_PLUGINS = ("recording",)


def world_plugins(config: Mapping[str, Any] | None = None) -> list[object]:
    """The world's plugin modules, found by entry-point name (the bash backend is its own
    distribution, so it is never imported by name from here)."""
    found = {ep.name: ep for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)}
    wanted = [
        *WORLD_PLUGINS,
        *(name for name in WORLD_SHELLS if name in found),
        *(name for name in WORLD_OPTIONAL_PLUGINS if name in (config or {})),
    ]
    missing = [name for name in wanted if name not in found]
    if missing:
        raise ConfigFileError(
            f"this world lacks the plugins {', '.join(missing)}; install "
            "dsh-terminal-core and dsh-terminal-bash of the harness's version in it"
        )
    return [found[name].load() for name in wanted]


def serve_stdio(config_path: str | None, sandbox: str | None, workspace: str | None) -> int:
    """Run the agent on stdin/stdout until the harness goes; return the exit status."""
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(name)s: %(message)s")
    if os.isatty(0):
        print(TTY_REFUSED, file=sys.stderr)
        return 2
    try:
        config = build_config(config_path, sandbox, workspace)
        plugins = world_plugins(config)
    except DshError as exc:
        print(f"dsh-terminal world: error [{exc.code}]: {exc.message}", file=sys.stderr)
        return 2
    wire_in, wire_out = _stdio_wire()
    try:
        return run_loop(_serve(config, plugins, wire_in, wire_out))
    except DshError as exc:
        print(f"dsh-terminal world: error [{exc.code}]: {exc.message}", file=sys.stderr)
        return 2


async def _serve(
    config: Mapping[str, Mapping[str, Any]], plugins: list[object], wire_in: int, wire_out: int
) -> int:
    connection = await over_pipes(wire_in, wire_out, max_frame=DEFAULT_MAX_FRAME)
    async with Harness(plugins=plugins, config=config) as harness:
        agent = WorldAgent(harness)
        try:
            await agent.serve(connection)
        finally:
            await agent.aclose()
    return 0


def _stdio_wire() -> tuple[int, int]:
    """Private copies of stdin/stdout for the protocol; fd 0 is /dev/null, fd 1 stderr."""
    wire_in = os.dup(0)
    wire_out = os.dup(1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(2, 1)
    return wire_in, wire_out


def serve_socket(
    path: str,
    config_path: str | None,
    sandbox: str | None,
    workspace: str | None,
    *,
    lease_s: float,
) -> int:
    """Run the daemon on ``path`` until SIGTERM or SIGINT; every session closes then."""
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(name)s: %(message)s")
    try:
        config = build_config(config_path, sandbox, workspace)
        plugins = world_plugins(config)
        listener = _listen(path)
    except DshError as exc:
        print(f"dsh-terminal world: error [{exc.code}]: {exc.message}", file=sys.stderr)
        return 2
    try:
        # Where relays hand over their stdio (see :mod:`.handoff`).
        handoffs = _listen(handoff_path(path))
    except DshError as exc:
        listener.close()
        with contextlib.suppress(OSError):
            os.unlink(path)
        print(f"dsh-terminal world: error [{exc.code}]: {exc.message}", file=sys.stderr)
        return 2
    try:
        return run_loop(_serve_socket(config, plugins, listener, lease_s, handoffs))
    finally:
        for sock, where in ((handoffs, handoff_path(path)), (listener, path)):
            sock.close()
            with contextlib.suppress(OSError):
                os.unlink(where)


def _listen(path: str) -> socket.socket:
    """The daemon's socket: 0600 in a 0700 directory; a live daemon there is an error.

    A sticky directory (``/tmp``, ``/dev/shm``) is shared by design and keeps its mode:
    closing it to others would break every other user of the machine, and the socket is
    private by its own mode and by ``SO_PEERCRED``.
    """
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, mode=0o700, exist_ok=True)
    if not os.stat(directory).st_mode & stat.S_ISVTX:
        os.chmod(directory, 0o700)
    if os.path.exists(path):
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            probe.connect(path)
        except OSError:
            os.unlink(path)  # left by a daemon that died
        else:
            raise ConfigFileError(f"a world daemon already serves {path}")
        finally:
            probe.close()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old_mask = os.umask(0o177)
    try:
        listener.bind(path)
    except OSError as exc:
        listener.close()
        raise ConfigFileError(f"cannot listen on {path}: {exc.strerror or exc}") from None
    finally:
        os.umask(old_mask)
    os.chmod(path, 0o600)
    listener.listen(64)
    listener.setblocking(False)
    return listener


async def _serve_socket(
    config: Mapping[str, Mapping[str, Any]],
    plugins: list[object],
    listener: socket.socket,
    lease_s: float,
    handoffs: socket.socket | None = None,
) -> int:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    stopped_by: list[str] = []

    def on_signal(signum: signal.Signals) -> None:
        stopped_by.append(signum.name)
        stop.set()

    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        loop.add_signal_handler(signum, on_signal, signum)
    async with Harness(plugins=plugins, config=config) as harness:
        agent = WorldAgent(harness, daemon=True, lease_s=lease_s)
        connections: set[asyncio.Task[None]] = set()

        async def tracked(connection: Connection) -> None:
            task = asyncio.current_task()
            assert task is not None
            connections.add(task)
            try:
                await agent.serve(connection)
            finally:
                connections.discard(task)

        server = await serve_unix(
            listener, tracked, max_frame=DEFAULT_MAX_FRAME, allowed=peer_allowed
        )
        relays = None if handoffs is None else loop.create_task(serve_handoffs(handoffs, tracked))
        log.info("world daemon listening on %s", listener.getsockname())
        try:
            await stop.wait()
        finally:
            server.close()
            if relays is not None:
                relays.cancel()
            # Every harness attached hears why its sessions end before its connection
            # does (a `docker stop` reads as the daemon stopping, never as a bare EOF).
            agent.stopping(f"the world daemon is stopping ({', '.join(stopped_by) or 'exit'})")
            await agent.aclose()
            for task in list(connections):
                task.cancel()
            await asyncio.gather(*connections, return_exceptions=True)
            await agent.aclose()
    return 0


def relay_stdio(path: str) -> int:
    """Copy stdin to the daemon at ``path`` and its answers to stdout, until either ends."""
    if os.isatty(0):
        print(TTY_REFUSED, file=sys.stderr)
        return 2
    wire_in, wire_out = _stdio_wire()
    taken = offer(path, wire_in, wire_out)
    if taken is not None:
        # The daemon serves the pipes itself; this process only keeps the exec session
        # open until the daemon closes its side, then says why when it is gone.
        os.close(wire_in)
        os.close(wire_out)
        wait_out(taken)
        return _said_if_gone(path)
    try:
        return run_loop(_relay(path, wire_in, wire_out))
    except OSError as exc:
        print(
            f"dsh-terminal world: error [WORLD_UNAVAILABLE]: no world daemon answers at "
            f"{path}: {exc.strerror or exc}",
            file=sys.stderr,
        )
        return 2


async def _relay(path: str, wire_in: int, wire_out: int) -> int:
    loop = asyncio.get_running_loop()
    daemon_reader, daemon_writer = await asyncio.open_unix_connection(path)
    stdin = asyncio.StreamReader()
    await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(stdin), os.fdopen(wire_in, "rb", 0)
    )
    transport, protocol = await loop.connect_write_pipe(
        asyncio.streams.FlowControlMixin, os.fdopen(wire_out, "wb", 0)
    )
    stdout = asyncio.StreamWriter(transport, protocol, None, loop)

    async def pump(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, OSError):
            while data := await source.read(256 * 1024):
                sink.write(data)
                await sink.drain()

    upstream = asyncio.ensure_future(pump(stdin, daemon_writer))
    downstream = asyncio.ensure_future(pump(daemon_reader, stdout))
    await asyncio.wait({upstream, downstream}, return_when=asyncio.FIRST_COMPLETED)
    daemon_ended = downstream.done() and not upstream.done()
    for task in (upstream, downstream):
        task.cancel()
    await asyncio.gather(upstream, downstream, return_exceptions=True)
    daemon_writer.close()
    status = 0
    if daemon_ended and (refused := await _nobody_listens(path)) is not None:
        # Said before stdout closes, so it is in the stderr pipe when the harness sees
        # the end of the stream; the words are the ones a relay that cannot connect says.
        _say_gone(path, refused)
        status = 2
    with contextlib.suppress(Exception):
        stdout.close()
    return status


def _said_if_gone(path: str) -> int:
    """After a handed-over connection ended: say so when no daemon answers any more.

    The daemon closed the stream itself, so the harness may see its end first; it waits
    a moment for these words (``LAST_WORDS_S``) before starting a relay again.
    """
    refused = asyncio.run(_nobody_listens(path))
    if refused is None:
        return 0
    _say_gone(path, refused)
    return 2


def _say_gone(path: str, refused: str) -> None:
    print(
        f"dsh-terminal world: error [WORLD_UNAVAILABLE]: the world daemon ended the "
        f"connection and no world daemon answers at {path} any more: {refused}",
        file=sys.stderr,
        flush=True,
    )


async def _nobody_listens(path: str) -> str | None:
    """Why no daemon answers at ``path`` now, or None when one does (or may).

    A live daemon writes its magic as soon as it accepts; a dying one's socket may still
    take the connection into its backlog, then close it unanswered.
    """
    try:
        reader, writer = await asyncio.open_unix_connection(path)
    except OSError as exc:
        return exc.strerror or str(exc)
    try:
        async with asyncio.timeout(_PROBE_S):
            first = await reader.read(1)
    except TimeoutError:
        first = b"?"  # no proof either way: the harness connects again and finds out
    except OSError:
        first = b""  # reset: its listener closed with the connection still unaccepted
    finally:
        writer.close()
    return None if first else "it closed the connection unanswered"
