"""The approvals command, one grammar on every platform.

``/approvals`` (or ``approvals``) lists what waits for a person's decision, their
requests and their recent decisions; ``/approvals revoke`` ends the grants they
gave. Slack sends the words after its slash command; Teams and the console send
the whole message. Either way the words are read here, once.
"""

from __future__ import annotations

from typing import Final, Literal

ApprovalsCommand = Literal["list", "revoke", "usage"]
"""List the inbox, end the grants given, or say how the command is used."""

COMMAND: Final = "approvals"
REVOKE: Final = "revoke"


def approvals_command(text: str, *, named: bool = False) -> ApprovalsCommand | None:
    """What ``text`` asks of the approvals command, or ``None`` when it is no such command.

    ``named``: the platform already said the command was given (a slash command), and
    ``text`` is only what followed its name; then anything unknown asks for ``usage``.
    A message names it itself (``approvals``, ``/Approvals  revoke``): only those exact
    words are the command, so a sentence that starts with "approvals" is left to the agent.
    """
    words = text.casefold().split()
    if not named:
        if not words or words[0].removeprefix("/") != COMMAND:
            return None
        words = words[1:]
    if not words:
        return "list"
    if words == [REVOKE]:
        return "revoke"
    return "usage" if named else None
