"""One run segment's answer as people see it: live where the platform can, else whole.

Where the platform has live messages (``Messenger.start_live``: Slack's streaming)
the answer is written into one as the model writes it, with each tool call as a
step that goes in progress -> complete (or error), and a call that waits as a
pending step ("Waiting for approval from @lead"). Before a card, a question or a
notice the live message ends, so what comes after it is written below it, in a
new one. Elsewhere (the console, Teams group chats, a platform that refuses) the
text is posted whole before each card and at the end, as it always was.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from .types import Live, Messenger, Person, Reply, Step, StepStatus, Text, ThreadKey
from .views import ReplyBuffer

log = logging.getLogger(__name__)

Post = Callable[[Reply], Awaitable[object]]


class Answer:
    """The answer of one segment in one thread.

    Args:
        messenger: The thread's platform.
        thread: Where the answer goes.
        to: Who asked (a live message in a channel is addressed to them).
        post: How a whole reply is posted (the presenter's ``say``).
        live: Whether it may be written live (else it is posted whole).
    """

    def __init__(
        self,
        messenger: Messenger,
        thread: ThreadKey,
        to: Person | None,
        post: Post,
        *,
        live: bool = True,
    ) -> None:
        self._messenger = messenger
        self._thread = thread
        self._to = to
        self._post = post
        self._text = ReplyBuffer()
        self._live: Live | None = None
        self._live_here = live
        """Whether the platform may still give a live message (it gave none: never again)."""
        self._steps: dict[str, Step] = {}

    async def write(self, text: str) -> None:
        """Add a piece of the top agent's answer."""
        added = self._text.add(text)
        live = await self._open()
        if live is not None:
            await self._try(live.write(added))

    def step_ended(self) -> None:
        """Something other than text happened: the next text is a new paragraph."""
        self._text.step_ended()

    async def step(self, call_id: str, title: str, status: StepStatus, detail: Text = ()) -> None:
        """Show a tool call's step (or its new state); nothing where nothing is live."""
        step = Step(id=call_id, title=title, status=status, detail=detail)
        if self._steps.get(call_id) == step:
            return
        self._steps[call_id] = step
        live = await self._open()
        if live is not None:
            await self._try(live.step(step))

    async def pause(self, *, feedback: str | None = None, stop: str | None = None) -> None:
        """Before a card, a question or a notice: what was written so far is shown above it
        (the live message ends; the next text starts a new one below). ``stop``: the run
        that waits for that card, which the text may offer to stop."""
        live, self._live = self._live, None
        self._steps.clear()
        if live is not None and await self._try(live.finish(feedback=feedback, stop=stop)):
            self._text.take()  # shown live
            return
        text = self._text.take()
        if text:
            await self._post(Reply(text=text, feedback=feedback, stop=stop))

    async def close(self, *, feedback: str | None = None) -> None:
        """The segment is over: everything is shown. ``feedback``: the run whose answer
        this ends (its last part carries it, for 👍 / 👎)."""
        await self.pause(feedback=feedback)

    async def _open(self) -> Live | None:
        if self._live is None and self._live_here:
            try:
                self._live = await self._messenger.start_live(self._thread, self._to)
            except Exception as exc:
                log.warning("no live answer in %s: %s", self._thread.id, exc)
                self._live = None
            self._live_here = self._live is not None
        return self._live

    async def _try(self, done: Awaitable[None]) -> bool:
        """Whether a live message took ``done``. One that fails is given up: its text is
        posted whole at the next pause (what it showed may be shown twice, never lost)."""
        try:
            await done
        except Exception as exc:
            # The platform refused (or could not be reached): worth a line, not a traceback.
            log.warning("the live answer in %s failed (%s); posting it whole", self._thread.id, exc)
            log.debug("the live answer's failure", exc_info=True)
            self._live, self._live_here = None, False
            return False
        return True
