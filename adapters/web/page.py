"""The decision page's routes: ``GET /approve/{token}`` shows it, ``POST`` decides.

``GET`` never decides (a link previewer or a mail scanner may open it); ``POST`` takes
the page's own form (``application/x-www-form-urlencoded``, at most ``MAX_FORM``
bytes): anything else is a 400 page, a link that is not the bot's a 401 page.
"""

from __future__ import annotations

import logging
from typing import Final

from aiohttp import web

from bot import REASON_INPUT, DecisionPage, DecisionPages, PageForm
from bot.links import PATH

from .render import FIELD, draw_page

log = logging.getLogger(__name__)

MAX_FORM: Final = 64 * 1024
"""The largest form a page posts (bytes): a reason and an edit's fields."""
FORM_TYPE: Final = "application/x-www-form-urlencoded"

HEADERS: Final = {
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; "
        "frame-ancestors 'none'; base-uri 'none'"
    ),
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-store",
}
"""Nothing is loaded from elsewhere, no script runs, the page is never framed, and the
link (its token) is never sent on as a referrer nor kept in a cache."""


def page_routes(pages: DecisionPages) -> list[web.RouteDef]:
    """``GET`` and ``POST /approve/{token}``."""

    async def show(request: web.Request) -> web.Response:
        return _drawn(await pages.page(request.match_info["token"]))

    async def decide(request: web.Request) -> web.Response:
        form = await _form(request)
        return _drawn(await pages.decide(request.match_info["token"], form))

    route = f"{PATH}{{token}}"
    return [web.get(route, show), web.post(route, decide)]


async def _form(request: web.Request) -> PageForm | None:
    """The page's form, or ``None`` for a body that is not one."""
    if request.content_type != FORM_TYPE:
        return None
    if request.content_length is None or request.content_length > MAX_FORM:
        return None
    try:
        raw = await request.post()
    except (ValueError, web.HTTPException):
        return None
    fields = {name: value for name, value in raw.items() if isinstance(value, str)}
    action, ask = fields.get("action"), fields.get("ask")
    if not action or ask is None:
        return None
    values = {
        name.removeprefix(FIELD): value for name, value in fields.items() if name.startswith(FIELD)
    }
    return PageForm(action=action, ask=ask, reason=fields.get(REASON_INPUT), values=values)


def _drawn(page: DecisionPage) -> web.Response:
    return web.Response(
        text=draw_page(page), status=page.status, content_type="text/html", headers=HEADERS
    )
