"""Plugin ``jobs``: background jobs as ``ctx.jobs`` plus ``job_output`` and ``job_kill``."""

from __future__ import annotations

import attrs
from dependency_injector import containers, providers

from .config import positive_int
from .context import Context
from .hookspecs import hookimpl
from .job_tools import job_tools
from .jobs import JobService
from .plugins import PluginInfo
from .resultcap import MAX_RESULT_BYTES

__all__ = ["JobsConfig", "JobsContainer", "dsh_apply", "dsh_plugin_info"]


@attrs.frozen(kw_only=True)
class JobsConfig:
    """Config of the ``jobs`` plugin; ``max_output_bytes`` caps what one job keeps."""

    max_output_bytes: int = attrs.field(default=MAX_RESULT_BYTES, validator=positive_int)


Config = JobsConfig


class JobsContainer(containers.DeclarativeContainer):
    """Background jobs (``ctx.jobs``)."""

    config = providers.Dependency(instance_of=JobsConfig)
    jobs = providers.Singleton(JobService, max_output_bytes=config.provided.max_output_bytes)


@hookimpl
def dsh_plugin_info() -> PluginInfo:
    return PluginInfo(
        name="jobs",
        description="Owner-scoped background jobs with incremental output.",
        provides=("jobs",),
        config=Config,
        container=JobsContainer,
    )


@hookimpl
def dsh_apply(ctx: Context, config: Config) -> None:
    # The tools resolve ctx.jobs per call, so a container override of ``jobs`` reaches them.
    for tool in job_tools(lambda: ctx.jobs, config.max_output_bytes):
        ctx.tools.register(tool)
