"""A recording messenger, scripted agents and small waits shared by the bot tests."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar

from pydantic import BaseModel

from agents import (
    Agent,
    AgentOptions,
    FunctionModel,
    MemoryStore,
    Message,
    ModelResponse,
    Store,
    ToolCall,
    ToolContext,
    tool,
)
from agents.models.base import ModelRequest
from bot import (
    ApprovalCard,
    ApprovalPolicy,
    BatchCard,
    CardPointer,
    ChatBot,
    Click,
    Destination,
    IncomingMessage,
    MessageRef,
    Notice,
    Person,
    Posted,
    PostMark,
    Prompt,
    Reply,
    Step,
    Text,
    ThreadKey,
    Undeliverable,
    View,
    begins,
    plain_text,
)
from tests.agents.helpers import Counter, call_then_answer, last_results

V = TypeVar("V", ApprovalCard, Prompt, Reply, Notice, CardPointer, BatchCard)

THREAD = ThreadKey(platform="test", workspace="W1", channel="C1", root="1700000000.000100")
OTHER_THREAD = ThreadKey(platform="test", workspace="W1", channel="C1", root="1700000000.000200")


@dataclass
class RecordingLive:
    """A live message: what was written into it, its steps as shown, and whether it ended."""

    thread: ThreadKey
    to: Person | None
    text: str = ""
    steps: list[Step] = field(default_factory=list)
    finished: bool = False
    failing: bool = False
    feedback: str | None = None
    stop: str | None = None

    async def write(self, text: str) -> None:
        assert not self.finished
        if self.failing:
            raise RuntimeError("the platform refused the stream")
        self.text += text

    async def step(self, step: Step) -> None:
        assert not self.finished
        self.steps.append(step)

    async def finish(self, *, feedback: str | None = None, stop: str | None = None) -> None:
        self.finished = True
        self.feedback = feedback
        self.stop = stop

    def shown(self) -> list[tuple[str, str]]:
        """Each step's title and latest status, in the order first shown."""
        latest: dict[str, Step] = {}
        for step in self.steps:
            latest[step.id] = step
        return [(step.title, step.status) for step in latest.values()]


@dataclass
class RecordingMessenger:
    """A ``Messenger`` that records everything the core asks of it."""

    posts: list[tuple[ThreadKey, View, MessageRef]] = field(default_factory=list)
    updates: list[tuple[ThreadKey, MessageRef, View]] = field(default_factory=list)
    tells: list[tuple[ThreadKey, str, str]] = field(default_factory=list)
    statuses: list[tuple[ThreadKey, str | None]] = field(default_factory=list)
    failing_posts: int = 0
    refused_updates: int = 0
    """Updates the platform refuses for good next (the message is gone)."""
    unreachable: int = 0
    """Posts and updates the platform cannot take next (``Undeliverable``)."""
    elsewhere: list[tuple[Destination, View, Posted]] = field(default_factory=list)
    """Views posted as new conversations (``post_elsewhere``), in order."""
    places: bool = True
    """Whether the platform has channels and direct messages (else ``post_elsewhere`` is None)."""
    channels: set[str] = field(default_factory=set)
    """The channels ``knows_channel`` says yes to."""
    groups: dict[str, frozenset[str]] = field(default_factory=dict)
    """User groups by name (``S...`` or ``@handle``), as ``group_members`` answers."""
    group_lookups: int = 0
    live: bool = False
    """Whether the platform has live messages (``start_live``)."""
    lives: list[RecordingLive] = field(default_factory=list)
    failing_lives: bool = False
    inbox_changes: list[tuple[ThreadKey, frozenset[str]]] = field(default_factory=list)
    marked: list[tuple[PostMark, ThreadKey, Destination | None, Posted]] = field(
        default_factory=list
    )
    """Each marked post: its mark, the thread it was posted in or from, where to (for
    ``post_elsewhere``), and where it went; ``find_post`` finds them."""
    lookups: list[PostMark] = field(default_factory=list)
    """The marks ``find_post`` was asked for, in order."""

    async def post(
        self, thread: ThreadKey, view: View, *, mark: PostMark | None = None
    ) -> MessageRef:
        self._reach()
        if self.failing_posts:
            self.failing_posts -= 1
            raise ConnectionError("the platform is down")
        ref: MessageRef = {"channel": thread.channel, "ts": f"m{len(self.posts) + 1}"}
        self.posts.append((thread, view, ref))
        if mark is not None:
            self.marked.append((mark, thread, None, Posted(thread=thread, ref=ref)))
        return ref

    async def find_post(
        self,
        near: ThreadKey,
        mark: PostMark,
        *,
        since: datetime,
        to: Destination | None = None,
    ) -> Posted | None:
        self._reach()
        self.lookups.append(mark)
        return next(
            (p for m, t, d, p in self.marked if (m, t, d) == (mark, near, to)),
            None,
        )

    async def find_cut_live(self, near: ThreadKey, *, since: datetime, words: str) -> Posted | None:
        """The newest live message in ``near`` when it was never finished and shows the
        start of ``words``; finished here, as a platform's adapter ends it."""
        self._reach()
        lives = [(n, live) for n, live in enumerate(self.lives) if live.thread == near]
        if not lives:
            return None
        n, live = lives[-1]
        if live.finished or not begins(live.text, words):
            return None
        live.finished = True
        return Posted(thread=near, ref={"channel": near.channel, "ts": f"live{n + 1}"})

    async def update(
        self, thread: ThreadKey, ref: MessageRef, view: View, *, mark: PostMark | None = None
    ) -> None:
        self._reach()
        if self.refused_updates:
            self.refused_updates -= 1
            raise LookupError("message_not_found")
        self.updates.append((thread, ref, view))
        if mark is not None:
            self.marked.append((mark, thread, None, Posted(thread=thread, ref=ref)))

    def _reach(self) -> None:
        if self.unreachable:
            self.unreachable -= 1
            raise Undeliverable("the platform cannot be reached")

    async def tell(self, thread: ThreadKey, user_id: str, text: Text) -> None:
        self.tells.append((thread, user_id, plain_text(text)))

    async def set_status(self, thread: ThreadKey, status: str | None) -> None:
        self.statuses.append((thread, status))

    async def start_live(self, thread: ThreadKey, to: Person | None) -> RecordingLive | None:
        if not self.live:
            return None
        started = RecordingLive(thread=thread, to=to, failing=self.failing_lives)
        self.lives.append(started)
        return started

    async def post_elsewhere(
        self, near: ThreadKey, to: Destination, view: View, *, mark: PostMark | None = None
    ) -> Posted | None:
        if not self.places:
            return None
        channel = to.channel or f"D-{to.user_id}"
        root = f"e{len(self.elsewhere) + 1}"
        thread = ThreadKey(
            platform=near.platform, workspace=near.workspace, channel=channel, root=root
        )
        posted = Posted(thread=thread, ref={"channel": channel, "ts": root})
        self.elsewhere.append((to, view, posted))
        if mark is not None:
            self.marked.append((mark, near, to, posted))
        return posted

    async def inboxes_changed(self, thread: ThreadKey, people: frozenset[str]) -> None:
        self.inbox_changes.append((thread, people))

    async def channel_place(self, channel: str, workspace: str | None = None) -> ThreadKey | None:
        if channel not in self.channels:
            return None
        return ThreadKey(platform="test", workspace=workspace or "W1", channel=channel, root="")

    async def knows_channel(self, channel: str) -> bool:
        return channel in self.channels

    async def group_members(self, name: str) -> frozenset[str] | None:
        if name in self.groups:
            self.group_lookups += 1
            return self.groups[name]
        if name.startswith(("@", "S")):
            raise LookupError(f"no user group {name}")
        return None

    def views(self, kind: type[V], thread: ThreadKey | None = None) -> list[V]:
        """Posted views of one kind, in order (optionally in one thread)."""
        return [
            v for t, v, _ in self.posts if isinstance(v, kind) and (thread is None or t == thread)
        ]

    def ref_of(self, view: View) -> MessageRef:
        """Where a posted view lives."""
        return next(ref for _, v, ref in self.posts if v is view)


def message(
    text: str, *, user: str = "U1", thread: ThreadKey = THREAD, keys: tuple[str, ...] = ()
) -> IncomingMessage:
    """A person's message."""
    return IncomingMessage(thread=thread, user_id=user, text=text, dedupe_keys=keys)


def click(
    card: ApprovalCard,
    *,
    user: str = "U2",
    action: str = "approve",
    reason: str | None = None,
    thread: ThreadKey = THREAD,
    ref: MessageRef | None = None,
) -> Click:
    """A click on a card."""
    assert action in ("approve", "decline")
    return Click(
        thread=thread,
        user_id=user,
        run_id=card.run_id,
        tool_call_id=card.tool_call_id,
        action="approve" if action == "approve" else "decline",
        reason=reason,
        message_ref=ref,
    )


def restart_agent(counter: Counter, store: Store | None = None, **kw: Any) -> Agent:
    """``ops`` asks to run ``restart_service`` (always gated) and answers from its result."""

    @tool(require_approval=True)
    def restart_service(service: str) -> str:
        """Restart a service."""
        counter(service=service)
        return f"restarted {service}"

    model = call_then_answer(
        ToolCall("restart_service", {"service": "api"}), before="I'll restart api."
    )
    return Agent(id="ops", model=model, tools=[restart_service], store=store or MemoryStore(), **kw)


def weather_agent(store: MemoryStore | None = None) -> Agent:
    """Asks the user for a city (single text field: resumed directly from the reply)."""

    class City(BaseModel):
        city: str

    @tool(resume_schema=City)
    def weather(ctx: ToolContext) -> str:
        """The weather somewhere."""
        if ctx.resume_data is None:
            ctx.suspend({"message": "Which city?"})
        return f"{ctx.resume_data.city}: sunny"

    def handler(messages: list[Message], request: ModelRequest) -> ModelResponse:
        results = last_results(messages)
        if results:
            return ModelResponse(text=f"The weather in {results[0].content}")
        return ModelResponse(tool_calls=[ToolCall("weather", {})])

    return Agent(
        id="ops",
        model=FunctionModel(handler),
        tools=[weather],
        store=store or MemoryStore(),
        default_options=AgentOptions(auto_resume_suspended_tools=True),
    )


class Booking(BaseModel):
    date: str
    seats: int


def booking_agent(extracted: list[dict[str, Any]], booked: Counter) -> Agent:
    """Asks for a date and a number of seats; the model extracts them from each reply."""

    @tool(resume_schema=Booking)
    def book_table(ctx: ToolContext) -> str:
        """Book a table."""
        if ctx.resume_data is None:
            ctx.suspend({"message": "For which date, and how many seats?"})
        booked(**ctx.resume_data.model_dump())
        return f"booked {ctx.resume_data.seats} seats on {ctx.resume_data.date}"

    def extract(messages: list[Message], schema: dict[str, Any]) -> dict[str, Any]:
        return extracted.pop(0)

    model = FunctionModel(
        call_then_answer(ToolCall("book_table", {}))._handler, structured_handler=extract
    )
    return Agent(id="host", model=model, tools=[book_table], store=MemoryStore())


def refund_agent(ran: list[str]) -> Agent:
    """``billing`` refunds the order each message names (always gated); ``ran`` records
    each refund that ran."""

    @tool(require_approval=True)
    def refund(order: str) -> str:
        """Refund an order."""
        ran.append(order)
        return f"refunded {order}"

    def respond(messages: list[Message], request: ModelRequest) -> ModelResponse:
        if last_results(messages):
            return ModelResponse(text="Done.")
        return ModelResponse(tool_calls=[ToolCall("refund", {"order": messages[-1].text})])

    return Agent(id="billing", model=FunctionModel(respond), tools=[refund], store=MemoryStore())


async def restart_requested(
    counter: Counter, policy: ApprovalPolicy | None = None, store: Store | None = None
) -> tuple[ChatBot, RecordingMessenger, ApprovalCard]:
    """A bot whose thread shows a pending ``restart_service`` card requested by U1."""
    bot = ChatBot(restart_agent(counter, store), policy=policy)
    messenger = RecordingMessenger()
    bot.register("test", messenger)
    await bot.on_message(message("restart the api"))
    await bot.drain()
    (card,) = messenger.views(ApprovalCard)
    return bot, messenger, card
