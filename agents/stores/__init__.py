"""Stores for run snapshots, the run lock, thread memory and the audit log."""

from ._lease import hold_lease
from .base import (
    AUDIT_PRUNE_BATCH,
    PRUNE_BATCH,
    LockTimeout,
    Pruned,
    Remember,
    Store,
    StoreConflict,
    run_id_for,
    tree_run_id,
)
from .memory import MemoryStore
from .redis_url import redis_client, split_prefix
from .sqlite_file import SQLiteFile, changes, database_path
from .url import StoreKind, open_store, store_kind

__all__ = [
    "AUDIT_PRUNE_BATCH",
    "PRUNE_BATCH",
    "LockTimeout",
    "MemoryStore",
    "Pruned",
    "Remember",
    "SQLiteFile",
    "Store",
    "StoreConflict",
    "StoreKind",
    "changes",
    "database_path",
    "hold_lease",
    "open_store",
    "redis_client",
    "run_id_for",
    "split_prefix",
    "store_kind",
    "tree_run_id",
]
