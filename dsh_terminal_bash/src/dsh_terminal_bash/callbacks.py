"""The context the session's own loop callbacks run in, shared instead of copied.

asyncio copies the caller's :mod:`contextvars` context for every callback it schedules
without one (a readiness timer, a future's done callback): one more object per send that
the garbage collector traverses for as long as the send is in flight. The session's own
callbacks read and set no context variable, so they all run in this one empty context.
It is never entered twice at once: the loop runs one callback at a time, and no task
runs in it.
"""

from __future__ import annotations

import contextvars

__all__ = ["CALLBACKS_CONTEXT"]

CALLBACKS_CONTEXT = contextvars.Context()
