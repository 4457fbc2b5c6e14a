"""dsh-terminal fish backend: the bash backend's whole contract, with fish's prompt protocol."""

from .abandon import AbandonedLines
from .config import FishConfig
from .environment import FISH, INIT

__all__ = ["FISH", "INIT", "AbandonedLines", "FishConfig"]
