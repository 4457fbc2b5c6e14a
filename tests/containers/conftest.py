"""Session fixtures: podman configured for this host, and the images built once a run."""

from __future__ import annotations

import faulthandler
import json
import os
from collections.abc import Iterator

import pytest

from .podman import (
    PODMAN,
    Images,
    build_images,
    cache_dir,
    podman_runs,
    write_containers_conf,
)


@pytest.fixture(scope="session")
def images(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Images]:
    """The Debian base and both images; skipped, saying why, where podman cannot run."""
    if PODMAN is None:
        pytest.skip("podman is not installed (scripts/install.sh --test installs it as root)")
    scratch = tmp_path_factory.mktemp("containers")
    conf = scratch / "containers.conf"
    write_containers_conf(conf)
    before = os.environ.get("CONTAINERS_CONF")
    # The harness's world commands (podman exec) inherit it from this process.
    os.environ["CONTAINERS_CONF"] = str(conf)
    # A first build takes minutes: the suite's per-test traceback watchdog would dump
    # stacks meanwhile; every step has its own timeout instead.
    faulthandler.cancel_dump_traceback_later()
    try:
        built = build_images(scratch)
        if built.seconds:
            (cache_dir() / "last-build.json").write_text(json.dumps(built.seconds, indent=1))
        why = podman_runs(built.base)
        if why is not None:
            pytest.skip(why)
        print(f"\ncontainer images: {built}", flush=True)  # with -s: tags and build times
        yield built
    finally:
        if before is None:
            os.environ.pop("CONTAINERS_CONF", None)
        else:
            os.environ["CONTAINERS_CONF"] = before
