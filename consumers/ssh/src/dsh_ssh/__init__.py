"""An ssh consumer of ``ctx.pty``: remote login shells with exit codes, for agents.

The facade moves bytes; everything ssh — client options, the control master, login
failures, the remote prompt protocol — lives here.
"""

from .config import SshConfig
from .errors import SshError
from .options import Destination, master_argv, session_argv
from .remote import RemoteProtocol
from .service import SshService
from .session import RunResult, SshSession
from .tools import ssh_tools

__all__ = [
    "Destination",
    "RemoteProtocol",
    "RunResult",
    "SshConfig",
    "SshError",
    "SshService",
    "SshSession",
    "master_argv",
    "session_argv",
    "ssh_tools",
]
