"""``PYTHONSTARTUP`` for Python REPLs started in a terminal session: history stays in memory.

A model types into these REPLs; what it types must not land in the user's
``~/.python_history``. Python 3.13+ honours ``PYTHON_HISTORY`` (the shell environment sets
it to ``/dev/null``); 3.11 and 3.12 do not, and their ``site`` interactive hook reads and
writes ``~/.python_history`` only when the in-memory history is empty when it runs. The
REPL runs this file first and that hook right after, so wrapping the hook to start with one
placeholder entry keeps it away from the file — tab completion is still set up — and the
placeholder is cleared again. Up-arrow history within the REPL keeps working.

A ``PYTHONSTARTUP`` the user had before is run afterwards (``DSH_USER_PYTHONSTARTUP``).
Everything here lives inside one function that is deleted again, so the REPL's namespace
gains nothing.
"""


def _dsh_keep_history_in_memory() -> None:
    import os
    import sys

    original = getattr(sys, "__interactivehook__", None)
    if callable(original):

        def hook() -> None:
            try:
                import readline
            except ImportError:  # no readline: the hook touches no history file either
                original()
                return
            readline.add_history("")
            try:
                original()
            finally:
                readline.clear_history()

        sys.__interactivehook__ = hook

    user = os.environ.get("DSH_USER_PYTHONSTARTUP")
    if user and os.path.isfile(user):
        with open(user, encoding="utf-8") as handle:
            code = compile(handle.read(), user, "exec")
        exec(code, vars(sys.modules["__main__"]))


_dsh_keep_history_in_memory()
del _dsh_keep_history_in_memory
