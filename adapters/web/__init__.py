"""The bot's own web pages: the decision page (``GET``/``POST /approve/<token>``), where
one approver decides a card in a browser. What a page says is the core's
(``bot.pages``); this adapter draws it as one HTML page with no external assets, whose
buttons work without JavaScript."""

from .page import page_routes

__all__ = ["page_routes"]
