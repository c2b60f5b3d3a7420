"""The chat layer's state (see ``base``), on the backend the store's URL names."""

from __future__ import annotations

from agents import Store
from agents.stores import store_kind

from .base import (
    AdapterState,
    CardCopy,
    CardPlace,
    CardState,
    ChatState,
    GrantState,
    InboxState,
    InstallationState,
    IntakeEntry,
    IntakeSignal,
    IntakeState,
    NoteState,
    RecordState,
    ShownState,
    ThreadNote,
    ThreadState,
    TimerState,
    ask_of,
    batch_key,
    grant_key,
    never_key,
)
from .memory import MemoryChatState

__all__ = [
    "AdapterState",
    "CardCopy",
    "CardPlace",
    "CardState",
    "ChatState",
    "GrantState",
    "InboxState",
    "InstallationState",
    "IntakeEntry",
    "IntakeSignal",
    "IntakeState",
    "MemoryChatState",
    "NoteState",
    "RecordState",
    "ShownState",
    "ThreadNote",
    "ThreadState",
    "TimerState",
    "ask_of",
    "batch_key",
    "grant_key",
    "never_key",
    "open_chat_state",
]


def open_chat_state(store: Store) -> ChatState:
    """The chat state beside ``store``: in memory, in its SQLite file, in its PostgreSQL
    database, or on its Redis.

    Raises:
        ValueError: The store's URL names no backend the chat state has.
    """
    kind = store_kind(store.url)
    if kind == "memory":
        return MemoryChatState()
    if kind == "sqlite":
        from .sqlite import SQLiteChatState

        return SQLiteChatState(store.url, store)
    if kind == "postgres":
        from .postgres import PostgresChatState

        return PostgresChatState(store.url, store)
    from .redis import RedisChatState

    return RedisChatState(store.url)
