"""The plugins that ship with dsh-terminal-core, one module each (entry points name them)."""
