"""Stores for run snapshots, the run lock, thread memory and the audit log."""

from .base import LockTimeout, Store, StoreConflict
from .memory import MemoryStore
from .url import StoreKind, open_store, store_kind

__all__ = [
    "LockTimeout",
    "MemoryStore",
    "Store",
    "StoreConflict",
    "StoreKind",
    "open_store",
    "store_kind",
]
