"""Plugin ``jobs``: background jobs as ``ctx.jobs`` plus ``job_output`` and ``job_kill``."""

from __future__ import annotations

from ..config import JobsConfig as Config
from ..containers import JobsContainer
from ..context import Context
from ..hookspecs import hookimpl
from ..job_tools import job_tools
from ..plugins import PluginInfo


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
