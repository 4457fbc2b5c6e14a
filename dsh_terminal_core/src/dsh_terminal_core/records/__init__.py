"""Records (SPEC §23): every session recorded, every tool call audited.

Owns: the asciicast v2 recording of each session (:mod:`.cast`, fed by a wrapper around
each terminal process, :mod:`.tap`, and encoded and written off the event loop by the
recorder process, :mod:`.link` and :mod:`.recorder_process`),
the recording service and the core ``recording`` plugin (:mod:`.recording`,
:mod:`.recording_plugin`), the audit log of tool calls and the core ``audit`` plugin
(:mod:`.audit`, :mod:`.audit_plugin`), and reading an audit log back as a table
(:mod:`.audit_view`, behind ``dsh-terminal audit``).

May import: the kernel, the provider and the registry. The operator turns records on
in the config; no tool can turn them off.
"""

from .audit import AuditConfig, AuditLog, redact_args
from .audit_view import audit_table, read_audit
from .cast import CastRecording
from .recording import RecordingConfig, RecordingService
from .tap import RecordingProcess

__all__ = [
    "AuditConfig",
    "AuditLog",
    "CastRecording",
    "RecordingConfig",
    "RecordingProcess",
    "RecordingService",
    "audit_table",
    "read_audit",
    "redact_args",
]
