"""The reviewer model: ``review = "model"`` in a policy section or tier.

Before a call of such a tool waits for a person, a model (the bot's: Claude, or the
offline demo model) reads the call and the conversation, with the prompt in
``bot/prompts/reviewer.md``, and answers through a forced tool call (structured
output): ``clear`` or ``caution``, with a one-line reason. ``clear`` lets the call run
without a card (audited ``auto_approved``: the model and its reason); ``caution`` puts
the reason on the card. No answer within ``REVIEW_TIMEOUT``, a model error, or an
answer that is not one of the two means a person decides, and the card says so.
Never for a rule whose quorum is above one (the policy refuses it at start).
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass
from importlib import resources
from typing import Annotated, Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agents import DemoModel, Message, Model, StandingAsk
from agents.models.base import StructuredRequest

log = logging.getLogger(__name__)

AUTO_APPROVED: Final = "auto_approved"
"""The audit event of a call the reviewer cleared (its reason in ``reason``)."""
REVIEWER_ACTOR: Final = "reviewer:"
"""Who approved a cleared call, in the audit log: ``reviewer:<model>``."""
REVIEW_TIMEOUT: Final = 20.0
"""Seconds the reviewer gets before a person decides instead."""
DEMO: Final = "the offline demo model does not judge calls; a person decides"
"""The demo model's review: caution, always (it reads requests by keywords, never risk)."""
HISTORY_KEPT: Final = 20
"""The conversation's latest messages the reviewer reads."""
PROMPT: Final = resources.files("bot").joinpath("prompts/reviewer.md").read_text("utf-8")
"""The reviewer's instructions: one file a team can read (``bot/prompts/reviewer.md``)."""


class Verdict(BaseModel):
    """What the reviewer answered."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    verdict: Literal["clear", "caution"]
    reason: Annotated[str, Field(min_length=1, max_length=300)]


SCHEMA: Final[dict[str, Any]] = Verdict.model_json_schema()
"""What the ``review`` tool takes: a ``Verdict``."""


@dataclass(frozen=True, kw_only=True)
class Review:
    """A review: the model's verdict, or ``None`` and why there is none."""

    model: str
    verdict: Verdict | None
    failure: str = ""


class Reviewer:
    """Asks ``model`` about calls.

    Args:
        model: The model that reviews (the bot's own, by default).
        timeout: Seconds before a person decides instead.
    """

    def __init__(self, model: Model, *, timeout: float = REVIEW_TIMEOUT) -> None:
        self.model = model
        self.timeout = timeout

    async def review(self, ask: StandingAsk) -> Review:
        """The model's verdict on ``ask``; never raises (no verdict: ``failure`` says why).
        The offline demo model judges nothing: it always urges caution, saying so."""
        if isinstance(self.model, DemoModel):
            return Review(model=self.model.name, verdict=Verdict(verdict="caution", reason=DEMO))
        try:
            async with asyncio.timeout(self.timeout):
                said = await self.model.structured(await self._request(ask))
        except TimeoutError:
            return self._failed(ask, f"no answer within {self.timeout:g} s")
        except Exception as exc:  # a model error, a refused request: a person decides
            return self._failed(ask, str(exc) or type(exc).__name__)
        try:
            return Review(model=self.model.name, verdict=Verdict.model_validate(said))
        except ValidationError:
            return self._failed(ask, "an answer that is neither clear nor caution")

    def _failed(self, ask: StandingAsk, why: str) -> Review:
        log.warning("reviewer %s on %s: %s; a person decides", self.model.name, ask.tool_name, why)
        return Review(model=self.model.name, verdict=None, failure=why)

    async def _request(self, ask: StandingAsk) -> StructuredRequest:
        # The conversation that led to the call, the request that asked for it included.
        said = "\n".join(f"{m.role}: {m.text}" for m in ask.messages[-HISTORY_KEPT:] if m.text)
        call = {
            "tool": ask.tool_name,
            "arguments": ask.args,
            "agent": list(ask.agent_path),
            "asked_by": ask.requester,
            "where": ask.thread_id,
        }
        text = (
            f"The call:\n{json.dumps(call, ensure_ascii=False, indent=2, default=str)}\n\n"
            f"The conversation (oldest first):\n{said or '(none)'}"
        )
        return StructuredRequest(
            system=PROMPT,
            messages=[Message.user(text)],
            schema=SCHEMA,
            name="review",
            description="Your verdict on the call, and why, in one line.",
        )
