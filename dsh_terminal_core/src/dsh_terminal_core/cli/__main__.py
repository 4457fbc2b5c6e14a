"""``python -m dsh_terminal_core.cli``: the same as the ``dsh-terminal`` command."""

from .main import main

raise SystemExit(main())
