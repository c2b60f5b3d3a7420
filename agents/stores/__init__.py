"""Stores for run snapshots, thread memory, dedupe keys, references and audit."""

from .base import LockTimeout, Store, StoreConflict
from .memory import MemoryStore
from .url import open_store

__all__ = ["LockTimeout", "MemoryStore", "Store", "StoreConflict", "open_store"]
