"""Named secrets (``ctx.secrets``) typed into hidden prompts, never shown to the model.

Owns: :class:`SecretsService` and its config (:mod:`.service`) and the core ``secrets``
plugin (:mod:`.plugin`). The value type :class:`Secret` and :class:`SecretAsk` live in
the kernel (:mod:`dsh_terminal_core.kernel.secret`), since every layer carries them;
they are offered here too, as before.

May import: the kernel only.
"""

from ..kernel.secret import Secret, SecretAsk, SecretAsker, check_secret_text
from .service import SecretsConfig, SecretsService, read_secret_file

__all__ = [
    "Secret",
    "SecretAsk",
    "SecretAsker",
    "SecretsConfig",
    "SecretsService",
    "check_secret_text",
    "read_secret_file",
]
