"""A home a confined shell may write to, with the user's own files untouched (SPEC §32.3).

The sandbox binds the whole tree read-only, so a program that keeps state under
``$HOME`` fails or nags there: nvim cannot create its swap file (E303), nano reports
"Problems with history file", npm and pip cannot write their caches. Bubblewrap 0.8
(Debian 12) has no overlay mounts, and a bind mount per entry of the home does not
scale: bubblewrap rereads the mount table for every bind, so 121 binds made a start
take 147 ms instead of 14 (measured here). The layering therefore takes two mounts per
home, whatever it holds:

* the user's real home is bound **read-only** at a side path inside the sandbox
  (``/run/dsh-home/<part>``, in the fresh tmpfs over ``/run``);
* the owner's private *home store* (a host directory, 0700, removed when the owner is
  disposed) is bound **writable** at ``$HOME``. In it the harness keeps, for each entry
  of the user's home, a symlink to that entry at the side path (a user's own symlink is
  copied as it is). Reading ``~/.bashrc`` reads the user's file; writing into it fails
  (``Read-only file system``). A new name (``~/.viminfo``, a tool's first
  ``~/.config/tool``) lands in the store;
* the *state directories* (:data:`DEFAULT_STATE_DIRS`: caches, editor swap and history
  places) are the store's own: fresh, writable, shared by the owner's sessions. Their
  ancestors (``~/.local/share``, ``~/.cache``), ``~/.config`` and the directories on the
  way to a workspace inside the home are *layered* like ``$HOME`` itself: real
  directories in the store, holding a symlink per user entry, so a state directory deep
  down never hides its siblings and a workspace keeps its real path.

What this cannot do: keep ``readlink ~/.bashrc`` and ``pwd -P`` under ``~`` what they
are outside (they show the side path); stop a program that replaces a file by renaming
a new one over it (``sed -i``, ``git config --global``) — the replacement lands in the
store, the owner's private copy, and the user's file is untouched; or stop the owner's
shells from removing the store's symlinks (the next shell gets them back).

The store is refreshed before each shell starts, only where a layered directory (the
user's or the store's) changed since the last look. Host-side work never follows a link
inside the store, which the confined shells write: directories are opened with
``O_NOFOLLOW`` and entries made and removed through directory descriptors.
"""

from __future__ import annotations

import contextlib
import functools
import os
import stat
import time
from collections.abc import Hashable, Iterable, Sequence

__all__ = ["DEFAULT_STATE_DIRS", "LAYERED_DIRS", "HomeLayers", "check_state_dirs"]

DEFAULT_STATE_DIRS: tuple[str, ...] = (
    ".cache/pip",
    ".cache/uv",
    ".cache/yarn",
    ".cache/node-gyp",
    ".cache/go-build",
    ".cache/nvim",
    ".npm",
    ".local/state",
    ".local/share/nano",
    ".local/share/nvim/swap",
    ".local/share/nvim/shada",
    ".local/share/nvim/undo",
)
"""Fresh, writable and owner-private inside a confined shell: package caches (pip, uv,
yarn, node-gyp, go, npm's ``~/.npm``), the XDG state directory (nvim 0.8+ keeps swap,
shada and undo there), nano's history and positions, and nvim 0.7's swap, shada and undo
directories. Configurable as ``sandbox-policy.home_state_dirs``."""

LAYERED_DIRS: tuple[str, ...] = (".config",)
"""Layered besides ``$HOME`` and the state directories' ancestors: where a tool run for
the first time makes its own directory."""

Mount = tuple[str, list[str]]

# How long a store counts as in step: opens in a burst look at the homes once.
_RECENT_S = 1.0


def check_state_dirs(value: Iterable[str]) -> tuple[str, ...]:
    """Normalise a configured list of state directories, or raise ``ValueError``.

    Each is relative to ``$HOME`` and goes nowhere above it, and none lies inside
    another (a state directory is the store's own, whole).
    """
    if isinstance(value, str) or not all(isinstance(item, str) for item in value):
        raise ValueError(f"home_state_dirs must be a list of strings; got {value!r}")
    cleaned: list[str] = []
    for item in value:
        parts = [part for part in item.split("/") if part not in ("", ".")]
        if not parts or item.startswith("/") or ".." in parts:
            raise ValueError(
                f"home_state_dirs entries are paths inside $HOME such as '.cache/pip'; got {item!r}"
            )
        cleaned.append("/".join(parts))
    for path in cleaned:
        for other in cleaned:
            if path != other and other.startswith(path + "/"):
                raise ValueError(f"home_state_dirs: {other!r} lies inside {path!r}; keep one")
    return tuple(dict.fromkeys(cleaned))


def _ancestors(path: str) -> list[str]:
    parts = path.split("/")
    return ["/".join(parts[:n]) for n in range(1, len(parts))]


class HomeLayers:
    """Keeps owners' home stores in step with the user's homes; the sandbox's helper.

    Remembers, per store, what the layered directories looked like when it last
    refreshed them, so a shell that starts while nothing changed costs a few ``stat``
    calls. The store's side is looked at for every shell (the owner's shells may have
    changed it); the user's home at most once per :data:`_RECENT_S`, so opens in a burst
    do not look at it again (an entry the user adds shows up at the next look).
    """

    def __init__(self) -> None:
        self._seen: dict[tuple[str, str], tuple[object, ...]] = {}
        self._recent: dict[Hashable, tuple[float, object]] = {}

    def recent(self, key: Hashable) -> object | None:
        """What :meth:`remember` kept under ``key`` less than :data:`_RECENT_S` ago."""
        found = self._recent.get(key)
        if found is None or time.monotonic() - found[0] >= _RECENT_S:
            return None
        return found[1]

    def remember(self, key: Hashable, value: object) -> None:
        now = time.monotonic()
        if len(self._recent) > 256:  # owners come and go: forget the stale ones
            self._recent = {k: v for k, v in self._recent.items() if now - v[0] < _RECENT_S}
        self._recent[key] = (now, value)

    def mounts(
        self,
        home: str,
        store: str,
        side: str,
        state_dirs: Sequence[str],
        keep: Sequence[str] = (),
    ) -> list[Mount]:
        """The two mounts that layer ``store`` under the user's ``home``; refresh first.

        ``home`` is the real, resolved home; ``store`` the owner's (existing) store for
        it; ``side`` where the real home is bound inside; ``keep`` the paths under the
        home that must keep their real path (a workspace bound there later): the
        directories on their way are layered and each is a directory of the store.
        """
        order, own, fresh = _plan(home, tuple(state_dirs), tuple(keep))
        key = (store, home)
        users = self.recent(("home", home, order))
        if users is None:
            users = _look(home, order)
            self.remember(("home", home, order), users)
        if self._seen.get(key) != (users, _look(store, order)):
            _refresh(home, store, side, order, own, fresh)
            users = _look(home, order)
            self.remember(("home", home, order), users)
            self._seen[key] = (users, _look(store, order))
        return [(home, ["--bind", store, home]), (side, ["--ro-bind", home, side])]


@functools.lru_cache(maxsize=64)
def _plan(
    home: str, state_dirs: tuple[str, ...], keep: tuple[str, ...]
) -> tuple[tuple[str, ...], frozenset[str], tuple[str, ...]]:
    """The layered directories (parents first), every path of the store's own, and the
    directories to make fresh: the state directories and the kept paths."""
    kept = tuple(os.path.relpath(path, home) for path in keep)
    layered = {"", *LAYERED_DIRS}
    for path in (*state_dirs, *kept):
        layered.update(_ancestors(path))
    order = tuple(sorted(layered, key=lambda p: (p.count("/"), p)))
    return order, frozenset(layered | set(state_dirs) | set(kept)), (*state_dirs, *kept)


def _look(root: str, order: Sequence[str]) -> tuple[object, ...]:
    """What tells whether a layered directory under ``root`` changed: inode, mtime, kind."""
    found: list[object] = []
    for relative in order:
        try:
            info = os.stat(os.path.join(root, relative), follow_symlinks=False)
        except OSError:
            found.append(None)
            continue
        found.append((info.st_ino, info.st_mtime_ns, stat.S_IFMT(info.st_mode)))
    return tuple(found)


def _refresh(
    home: str,
    store: str,
    side: str,
    order: Sequence[str],
    own: frozenset[str],
    fresh: Sequence[str],
) -> None:
    store_fd = os.open(store, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        usable = set()
        for relative in order:
            if relative and relative.rpartition("/")[0] not in usable:
                continue
            dir_fd = _store_dir(store_fd, relative, side)
            if dir_fd is None:
                continue  # the owner's shells made something else here: theirs
            usable.add(relative)
            try:
                _link_entries(home, dir_fd, relative, side, own)
            finally:
                os.close(dir_fd)
        for path in fresh:
            if path.rpartition("/")[0] in usable:
                fd = _store_dir(store_fd, path, side)
                if fd is not None:
                    os.close(fd)
    finally:
        os.close(store_fd)


def _store_dir(store_fd: int, relative: str, side: str) -> int | None:
    """A descriptor of the store's directory ``relative``, made if missing; never a link.

    A symlink of ours there (to the side path: the name was the user's entry before it
    was layered) makes way for the directory. ``None`` when the owner's shells made
    something else in its place.
    """
    fd = os.dup(store_fd)
    for part in relative.split("/") if relative else []:
        try:
            if _our_link(fd, part, side):
                os.unlink(part, dir_fd=fd)
            with contextlib.suppress(FileExistsError):
                os.mkdir(part, 0o700, dir_fd=fd)
            nested = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
        except OSError:
            os.close(fd)
            return None
        os.close(fd)
        fd = nested
    return fd


def _our_link(dir_fd: int, name: str, side: str) -> bool:
    try:
        return os.readlink(name, dir_fd=dir_fd).startswith(side + "/")
    except OSError:
        return False


def _link_entries(home: str, dir_fd: int, relative: str, side: str, own: frozenset[str]) -> None:
    """Make the store's ``relative`` hold a symlink per user entry, and drop stale ones."""
    real = os.path.join(home, relative) if relative else home
    wanted: dict[str, str] = {}
    with contextlib.suppress(OSError), os.scandir(real) as entries:
        for entry in entries:
            name = os.path.join(relative, entry.name) if relative else entry.name
            if name in own:
                continue
            try:
                target = os.readlink(entry.path) if entry.is_symlink() else None
            except OSError:
                continue
            wanted[entry.name] = target if target is not None else os.path.join(side, name)
    with os.scandir(dir_fd) as present:
        have = {entry.name: entry for entry in present}
    for name, target in wanted.items():
        existing = have.get(name)
        if existing is not None:
            if not existing.is_symlink():
                continue  # the owner's shells made a file or directory here; it stays
            with contextlib.suppress(OSError):
                if os.readlink(name, dir_fd=dir_fd) == target:
                    continue
            with contextlib.suppress(FileNotFoundError):
                os.unlink(name, dir_fd=dir_fd)
        with contextlib.suppress(FileExistsError):
            os.symlink(target, name, dir_fd=dir_fd)
    for name in have.keys() - wanted.keys():
        # A link of ours to an entry the user no longer has, or to one now layered.
        full = os.path.join(relative, name) if relative else name
        if full not in own and _our_link(dir_fd, name, side):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(name, dir_fd=dir_fd)
