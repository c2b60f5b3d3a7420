"""Views and their documents as stored data: plain, versioned JSON.

A view the core keeps (a card, a question, a reply, a notice, a pointer) and the
document composed from it (``bot.compose``) are plain data: either can be kept (a
post that waits for a platform's rate limit, a delivery made later on another
replica) and drawn from its stored form exactly as from the original. Each stored
form names the format's ``version`` (a view also its ``kind``); a version this code
does not know is refused, never guessed at.
"""

from __future__ import annotations

from typing import Annotated, Any, Final, TypeVar

from pydantic import Field, TypeAdapter, ValidationError

from .document import Document
from .types import View

VIEW_VERSION: Final = 1
"""The stored form's version; a change to a view that old documents cannot be read
as raises it, with the code to read the old ones."""

T = TypeVar("T")

_VIEW: TypeAdapter[View] = TypeAdapter(Annotated[View, Field(discriminator="kind")])


class ViewDocumentError(ValueError):
    """A stored view that cannot be read: not a view, or of an unknown version."""


def dump_view(view: View) -> bytes:
    """``view`` as a stored document (JSON)."""
    return _dump("view", _VIEW, view)


def load_view(document: str | bytes) -> View:
    """The view a stored document holds.

    Raises:
        ViewDocumentError: It is not one, or of a version this code does not read.
    """
    return _load("view", _VIEW, document)


def dump_document(document: Document) -> bytes:
    """A composed document in its stored form (JSON)."""
    return _dump("document", _COMPOSED, document)


def load_document(stored: str | bytes) -> Document:
    """The document a stored form holds.

    Raises:
        ViewDocumentError: It is not one, or of a version this code does not read.
    """
    return _load("document", _COMPOSED, stored)


def _dump(key: str, adapter: TypeAdapter[T], value: T) -> bytes:
    return _DOCUMENT.dump_json(
        {"version": VIEW_VERSION, key: adapter.dump_python(value, mode="json")}
    )


def _load(key: str, adapter: TypeAdapter[T], stored: str | bytes) -> T:
    """What ``stored`` holds under ``key``, of this code's version."""
    try:
        data = _DOCUMENT.validate_json(stored)
        if data.get("version") != VIEW_VERSION:
            raise ViewDocumentError(f"a stored {key} of version {data.get('version')!r}")
        return adapter.validate_python(data.get(key))
    except ValidationError as exc:
        raise ViewDocumentError(f"not a stored {key}: {exc.error_count()} problem(s)") from exc


_DOCUMENT: TypeAdapter[dict[str, Any]] = TypeAdapter(dict[str, Any])
_COMPOSED: TypeAdapter[Document] = TypeAdapter(Document)
