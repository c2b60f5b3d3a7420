"""What the edge fuzz tests share: hypothesis settings and strategies, and a plain HTTP POST."""

from __future__ import annotations

import urllib.error
import urllib.request
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

FUZZ = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
HEADER_TEXT = st.text(
    st.characters(min_codepoint=0x20, blacklist_categories=("Cs", "Cc")), max_size=30
)
"""Header values: any printable text (sent as UTF-8), no line breaks."""
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=20,
)
"""Any JSON value, small."""


def post(url: str, body: bytes, headers: dict[str, str]) -> int:
    """POST and return the status (urllib: a sync test cannot await)."""
    # On the wire as UTF-8, as aiohttp's client sends them (urllib would send Latin-1).
    wire = {k: v.encode("utf-8").decode("latin-1") for k, v in headers.items()}
    request = urllib.request.Request(url, data=body, headers=wire, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return int(error.code)


def mutate(value: Any, path: list[Any], new: Any) -> Any:
    """``value`` (nested dicts) with the leaf at ``path`` replaced by ``new``, if there."""
    if not path:
        return new
    head, *rest = path
    if isinstance(value, dict) and head in value:
        return {**value, head: mutate(value[head], rest, new)}
    return value
