"""Views as terminal text."""

from __future__ import annotations

import json
from typing import Any, assert_never

from bot import ApprovalCard, Notice, Prompt, Reply, View

from . import texts


def render(view: View) -> str:
    """The lines that show ``view`` in a terminal."""
    if isinstance(view, ApprovalCard):
        return render_card(view)
    if isinstance(view, Prompt):
        return render_prompt(view)
    if isinstance(view, Reply):
        return texts.REPLY.format(text=_indent(view.text))
    if isinstance(view, Notice):
        return texts.NOTICE.format(text=_indent(view.text))
    assert_never(view)


def render_card(card: ApprovalCard) -> str:
    """A pending card in full; a decided or expired one as a one-line update."""
    who = card.decided_by or texts.SOMEONE
    if card.status == "approved" and card.approvals:
        who = ", ".join(card.approvals)
    if card.status == "approved":
        return texts.CARD_APPROVED.format(who=who, tool=card.tool_name)
    if card.status == "declined":
        if card.reason:
            return texts.CARD_DECLINED_REASON.format(
                who=who, reason=card.reason, tool=card.tool_name
            )
        return texts.CARD_DECLINED.format(who=who, tool=card.tool_name)
    if card.status == "expired":
        return texts.CARD_EXPIRED.format(tool=card.tool_name)
    lines = [texts.CARD_HEADER.format(agent=" › ".join(card.agent_path), tool=card.tool_name)]
    lines += [texts.CARD_ARG.format(name=k, value=_value(v)) for k, v in card.args.items()]
    expires = card.expires_at.astimezone().strftime("%Y-%m-%d %H:%M %Z")
    lines.append(
        texts.CARD_FOOTER.format(requester=card.requester or texts.SOMEONE, expires=expires)
    )
    if card.quorum > 1:
        who = ", ".join(card.approvals) or texts.NO_APPROVALS
        lines.append(
            texts.CARD_APPROVALS.format(who=who, count=len(card.approvals), quorum=card.quorum)
        )
    return "\n".join(lines)


def render_prompt(prompt: Prompt) -> str:
    """A tool's question, what to answer with, and why the last answer did not fit."""
    lines = [texts.QUESTION.format(tool=prompt.tool_name, question=_indent(prompt.question))]
    if prompt.error:
        lines.append(texts.QUESTION_ERROR.format(error=prompt.error))
    if prompt.fields:
        lines.append(texts.QUESTION_FIELDS.format(fields=", ".join(prompt.fields)))
    return "\n".join(lines)


def _value(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _indent(text: str) -> str:
    """Continuation lines line up under the first, after the speaker's tag."""
    return text.replace("\n", "\n     ")
