"""Listing keys by prefix as a range of an index, in code point order (SQLite, PostgreSQL)."""

from __future__ import annotations

import sys

_SURROGATES = (0xD800, 0xE000)
"""The first code point of the surrogates, and the first after them."""


def least_above(prefix: str) -> str | None:
    """The least text after every text starting with ``prefix`` (``None``: there is none).

    SQLite orders text byte by byte (UTF-8), and so does PostgreSQL under the ``"C"``
    collation, which is the order of code points: the prefix with its last code point
    that can grow grown by one, and what follows it dropped. Surrogates are skipped,
    as UTF-8 has none.
    """
    for end in range(len(prefix) - 1, -1, -1):
        grown = ord(prefix[end]) + 1
        if grown == _SURROGATES[0]:
            grown = _SURROGATES[1]
        if grown <= sys.maxunicode:
            return prefix[:end] + chr(grown)
    return None
