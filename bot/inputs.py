"""Checks every adapter makes on what arrives over the wire, before anything else."""

from __future__ import annotations

import ipaddress
from typing import Any
from urllib.parse import urlsplit


def has_lone_surrogate(body: Any) -> bool:
    """Whether any string in a parsed JSON body cannot be encoded as UTF-8.

    JSON may spell a lone surrogate (``"\\ud800"``); no store and no platform
    can take one, so a body carrying one is refused whole rather than half kept.
    """
    stack = [body]
    while stack:
        value = stack.pop()
        if isinstance(value, str):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                return True
        elif isinstance(value, dict):
            stack.extend(value.keys())
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
    return False


def is_loopback_url(url: str) -> bool:
    """Whether a URL points at this machine (``localhost``, 127.0.0.0/8, ``::1``)."""
    try:
        host = urlsplit(url).hostname
    except ValueError:
        return False
    if host is None:
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
