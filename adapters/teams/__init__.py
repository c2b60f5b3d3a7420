"""Microsoft Teams adapter (botbuilder 4.17.1 ``CloudAdapter``), kept behind one class."""

from .adapter import MESSAGES_PATH, TeamsAdapter, TeamsNotConfigured
from .messenger import MissingReference, TeamsMessenger

__all__ = [
    "MESSAGES_PATH",
    "MissingReference",
    "TeamsAdapter",
    "TeamsMessenger",
    "TeamsNotConfigured",
]
