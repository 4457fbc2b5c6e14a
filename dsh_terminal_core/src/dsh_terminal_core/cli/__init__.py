"""The ``dsh-terminal`` command (:mod:`.main`) and its demo (:mod:`.demo`).

May import every layer: it is the top of the house, and nothing imports it.
"""

from .main import main

__all__ = ["main"]
