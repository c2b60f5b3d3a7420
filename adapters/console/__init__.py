"""The terminal adapter: ``python -m bot console`` (``make run`` without a platform)."""

from .app import PLATFORM, ConsoleAdapter, ConsoleMessenger, stdin_lines
from .render import render

__all__ = ["PLATFORM", "ConsoleAdapter", "ConsoleMessenger", "render", "stdin_lines"]
