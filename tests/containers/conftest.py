"""Session fixtures: podman configured for this host, and the images built once a run."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from .podman import PODMAN, Images, build_images, podman_runs, write_containers_conf


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
    try:
        built = build_images(scratch)
        why = podman_runs(built.base)
        if why is not None:
            pytest.skip(why)
        print(f"\ncontainer images: {built}", flush=True)
        yield built
    finally:
        if before is None:
            os.environ.pop("CONTAINERS_CONF", None)
        else:
            os.environ["CONTAINERS_CONF"] = before
