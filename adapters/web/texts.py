"""Words only the web pages use (what a card says is the core's, ``bot.texts``)."""

from typing import Final

THREAD: Final = "a thread in {channel}"
"""A ``Place`` on a page: the thread a request was asked in (the page has no link to it)."""
CHANNEL: Final = "#{channel}"
EMPTY_CHOICE: Final = "(unchanged)"
"""An edit form's choice that leaves a value as it was asked."""
TRUE: Final = "yes"
FALSE: Final = "no"
