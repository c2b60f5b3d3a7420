"""The terminal adapter: ``python -m bot console`` (``make run`` without a platform)."""

from .app import DEFAULT_THREAD, PLATFORM, ConsoleAdapter, ConsoleMessenger, stdin_lines
from .render import render

__all__ = [
    "DEFAULT_THREAD",
    "PLATFORM",
    "ConsoleAdapter",
    "ConsoleMessenger",
    "render",
    "stdin_lines",
]
