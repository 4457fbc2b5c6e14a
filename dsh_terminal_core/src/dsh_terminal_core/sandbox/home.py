"""A home a confined shell may write to, with the user's own files untouched (SPEC §32.3).

The sandbox binds the whole tree read-only, so a program that keeps state under
``$HOME`` fails or nags there: nvim cannot create its swap file (E303), nano reports
"Problems with history file", npm and pip cannot write their caches. Bubblewrap 0.8
(Debian 12) has no overlay mounts, so the layering is built from bind mounts:

* the owner's private *home store* (a host directory, 0700, removed when the owner is
  disposed) is bound writable at ``$HOME``: whatever a program creates there that the
  user's home does not have (``~/.viminfo``, ``~/.wget-hsts``, a new ``~/.config/tool``,
  a new ``~/.cache/tool``) lands in the store;
* every entry of the user's real home is bound over it **read-only** (a symlink is
  recreated as the same symlink), so the user's files stay visible, unchanged and
  unwritable;
* the *state directories* (:data:`DEFAULT_STATE_DIRS`: caches, editor swap and history
  places) are not bound from the real home at all: they are the store's own, fresh and
  writable, shared by the owner's sessions. Their ancestors (``~/.local/share``,
  ``~/.cache``) and ``~/.config`` are *layered* like ``$HOME`` itself — the user's
  entries read-only, new names writable — so a state directory deep down never hides
  its siblings. Below a layered directory, the user's directories are theirs, whole
  and read-only.

What this cannot do: change an existing file of the user's (it stays read-only, by
design), or show an entry the user adds to a layered directory (``$HOME``,
``~/.cache``...) while a shell already runs — later shells see it. A user's entry that
the owner's shells replaced by one of another kind (a file where the user now has a
directory) stays the owner's version.

Host-side work is limited to reading the real home and the store without following any
link inside the store (the confined shells write there), and making symlinks with
directory descriptors; every mount point is made by bubblewrap inside the sandbox's own
view.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterable, Sequence

__all__ = ["DEFAULT_STATE_DIRS", "check_state_dirs", "home_mounts"]

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


def check_state_dirs(value: Iterable[str]) -> tuple[str, ...]:
    """Normalise a configured list of state directories, or raise ``ValueError``.

    Each is relative to ``$HOME``, goes nowhere above it, and none lies inside another
    (the store is bound into the sandbox only through them, so nesting would let a
    shell's link redirect where the host makes the inner one).
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


def home_mounts(home: str, store: str, state_dirs: Sequence[str]) -> list[Mount]:
    """The bubblewrap mounts that layer ``store`` under the user's ``home``.

    ``home`` is the real, resolved home directory; ``store`` the owner's home store
    (existing). Returns ``(destination, arguments)`` pairs for the caller to order by
    depth with its other mounts: the store at ``home``, the user's entries of every
    layered directory read-only, and a ``--dir`` for each state directory. A layered or
    state directory whose place in the store the owner's shells took for something else
    (a file, a link) is left as they made it, with nothing mounted in or below it.
    """
    layered = {"", *LAYERED_DIRS}
    for path in state_dirs:  # checked by check_state_dirs: relative, none inside another
        layered.update(_ancestors(path))
    leaves = set(state_dirs)
    mounts: list[Mount] = [(home, ["--bind", store, home])]
    usable: set[str] = set()
    store_fd = os.open(store, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        for relative in sorted(layered, key=lambda p: (p.count("/"), p)):
            parent = relative.rpartition("/")[0]
            if relative and parent not in usable:
                continue
            dir_fd = _store_dir(store_fd, relative)
            if dir_fd is None:
                continue
            usable.add(relative)
            try:
                _layer(home, dir_fd, relative, layered | leaves, mounts)
                for path in sorted(leaves):
                    parent, _, name = path.rpartition("/")
                    if parent == relative and _store_kind(dir_fd, name) in (None, "dir"):
                        destination = os.path.join(home, path)
                        mounts.append((destination, ["--dir", destination]))
            finally:
                os.close(dir_fd)
    finally:
        os.close(store_fd)
    return mounts


def _store_dir(store_fd: int, relative: str) -> int | None:
    """A descriptor of the store's directory ``relative``, made if missing; never a link.

    Made here (0700, with directory descriptors, so a link a shell planted in the store
    is never followed) because a layered directory holds the user's symlinks, which are
    made here too. ``None`` when the owner's shells made something else in its place.
    """
    fd = os.dup(store_fd)
    for part in relative.split("/") if relative else []:
        try:
            with contextlib.suppress(FileExistsError):
                os.mkdir(part, 0o700, dir_fd=fd)
            nested = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
        except OSError:
            os.close(fd)
            return None
        os.close(fd)
        fd = nested
    return fd


def _layer(home: str, dir_fd: int, relative: str, own: set[str], mounts: list[Mount]) -> None:
    """Bind the user's entries of ``home/relative`` read-only over the store's.

    ``own``: the paths that are the store's (layered and state directories), never bound.
    """
    real = os.path.join(home, relative) if relative else home
    try:
        entries = list(os.scandir(real))
    except OSError:
        return  # the user has no such directory: the store's is all there is
    for entry in entries:
        name = os.path.join(relative, entry.name) if relative else entry.name
        if name in own:
            continue
        try:
            kind = _kind(entry.stat(follow_symlinks=False).st_mode)
        except OSError:
            continue
        have = _store_kind(dir_fd, entry.name)
        if kind == "link":
            with contextlib.suppress(OSError):
                _ensure_link(dir_fd, entry.name, os.readlink(entry.path), have)
            continue
        if have == "link" and not _unlink(dir_fd, entry.name):
            continue
        if have not in (None, kind, "link"):
            continue  # the owner's shells made another kind of thing there; it stays
        destination = os.path.join(home, name)
        mounts.append((destination, ["--ro-bind", entry.path, destination]))


def _kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "link"
    return "dir" if stat.S_ISDIR(mode) else "file"


def _store_kind(dir_fd: int, name: str) -> str | None:
    try:
        return _kind(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return None


def _unlink(dir_fd: int, name: str) -> bool:
    try:
        os.unlink(name, dir_fd=dir_fd)
    except FileNotFoundError:
        pass
    except OSError:
        return False
    return True


def _ensure_link(dir_fd: int, name: str, target: str, have: str | None) -> None:
    """Make the store hold the user's symlink ``name -> target``, made here, not by bwrap.

    bubblewrap 0.8 refuses a ``--symlink`` whose link exists, so two shells of one owner
    opening together would fail; a link made with the directory's descriptor is made
    once, and never through a link the shells planted.
    """
    if have == "link":
        if os.readlink(name, dir_fd=dir_fd) == target:
            return
        if not _unlink(dir_fd, name):
            return
    elif have is not None:
        return  # the owner's shells made a file or directory there; it stays
    with contextlib.suppress(FileExistsError):
        os.symlink(target, name, dir_fd=dir_fd)
