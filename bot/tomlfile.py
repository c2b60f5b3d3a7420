"""The bot's TOML files (the approval policy, ``BOT_CONFIG``): read, parse, validate,
and say every problem in one line each."""

from __future__ import annotations

import hashlib
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

Problem = tuple[str | None, str]
"""The dotted field a problem is about (``tools.deploy.approvers``), if any, and what it is."""

M = TypeVar("M", bound=BaseModel)


class FileProblems(Exception):
    """A file that cannot be used as it is.

    Attributes:
        path: The file.
        problems: Every ``(field, message)`` found.
        field: The first offending field, if any.
        lines: One readable line per problem (``<what> <path>: <field>: <message>``).
    """

    what: ClassVar[str] = "file"

    def __init__(self, path: str, problems: list[Problem]) -> None:
        self.path = path
        self.problems = problems
        self.field = problems[0][0] if problems else None
        self.lines = [
            f"{self.what} {path}: " + (f"{field}: {message}" if field else message)
            for field, message in problems
        ]
        super().__init__("; ".join(self.lines))


@dataclass(frozen=True)
class FileText:
    """A file as read once: its text, and the digest of its bytes (what an auditor's
    ``sha256sum`` of it says), so what is recorded as loaded is what was parsed."""

    text: str
    digest: str
    """``sha256:`` and the hex digest of the file's bytes."""


def read_file(path: str | Path, error: type[FileProblems]) -> FileText:
    """The file's UTF-8 text and digest, or ``error`` saying why it cannot be read."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise error(str(path), [(None, f"cannot read it ({exc.strerror})")]) from exc
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        problem = f"not UTF-8 text (byte {exc.start} is {data[exc.start]:#04x})"
        raise error(str(path), [(None, problem)]) from exc
    return FileText(text=text, digest="sha256:" + hashlib.sha256(data).hexdigest())


def read_text(path: str | Path, error: type[FileProblems]) -> str:
    """The file's text, or ``error`` saying why it cannot be read."""
    return read_file(path, error).text


def parse(
    model: type[M],
    text: str,
    *,
    source: str,
    error: type[FileProblems],
    unknown: Callable[[ErrorDetails], str] = lambda _: "unknown field",
) -> M:
    """TOML ``text`` validated as ``model``, or ``error`` with every problem.

    ``unknown`` words the message for a field or section the model does not have.
    """
    parsed, problems = parse_lenient(model, text, source=source, error=error, unknown=unknown)
    if problems or parsed is None:
        raise error(source, problems)
    return parsed


_PRUNING_ROUNDS = 5
"""How many times a file with invalid values is validated again without them."""


def parse_lenient(
    model: type[M],
    text: str,
    *,
    source: str,
    error: type[FileProblems],
    unknown: Callable[[ErrorDetails], str] = lambda _: "unknown field",
) -> tuple[M | None, list[Problem]]:
    """TOML ``text`` validated as ``model``: every problem of the schema, and the file
    as it reads without the values that have one (their defaults instead), so that
    what else is wrong with it can be found in the same run (``None`` when even that
    does not validate: a required section is what is wrong).

    Raises:
        FileProblems: ``error``, when the text is not TOML at all.
    """
    try:
        data: dict[str, Any] = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise error(source, [(None, f"not valid TOML: {exc}")]) from exc
    problems: list[Problem] = []
    for _ in range(_PRUNING_ROUNDS):
        try:
            return model.model_validate(data), problems
        except ValidationError as exc:
            errors = exc.errors()
        for err in errors:
            field = ".".join(str(part) for part in err["loc"]) or None
            message = err["msg"].removeprefix("Value error, ")
            if err["type"] == "extra_forbidden":
                message = unknown(err)
            if (field, message) not in problems:
                problems.append((field, message))
        if not all(_prune(data, err["loc"]) for err in errors):
            break
    return None, problems


def _prune(data: dict[str, Any], loc: tuple[int | str, ...]) -> bool:
    """Remove the value at ``loc`` from ``data`` (a list's item: the whole list, so the
    other items' places hold); whether there was one."""
    if not loc:
        return False
    node: Any = data
    for depth, part in enumerate(loc[:-1]):
        if isinstance(node, list):
            return _prune(data, loc[:depth])
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    if isinstance(node, list):
        return _prune(data, loc[:-1])
    if isinstance(node, dict) and loc[-1] in node:
        del node[loc[-1]]
        return True
    return False
