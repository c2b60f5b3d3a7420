"""A switch that makes network model requests fail, for test suites.

Tests set ``ALLOW_MODEL_REQUESTS = False`` (the project's ``tests/conftest.py``
does): a network model then refuses any base URL that is not on loopback, so no
test can reach a real model by accident.
"""

from __future__ import annotations

from urllib.parse import urlsplit

ALLOW_MODEL_REQUESTS = True


def check_allowed(base_url: str) -> None:
    """Raise ``RuntimeError`` if requests to ``base_url`` are switched off."""
    if ALLOW_MODEL_REQUESTS:
        return
    host = urlsplit(base_url).hostname or ""
    if host in ("localhost", "::1") or host.startswith("127."):
        return
    raise RuntimeError(
        f"model requests to {base_url} are blocked (agents.models._guard.ALLOW_MODEL_REQUESTS)"
    )
