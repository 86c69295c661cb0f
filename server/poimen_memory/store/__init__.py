"""The Postgres store: schema and migrations, connection resolution, the store API."""

from poimen_memory.store.connection import (
    ConfigError,
    DsnSource,
    ResolvedDsn,
    StoreUnavailable,
    connect,
    embedded_dsn,
    resolve_dsn,
)
from poimen_memory.store.listen import NOTIFY_CHANNEL, IngestListener
from poimen_memory.store.migrations import MigrationError, migrate
from poimen_memory.store.store import (
    Batch,
    Evidence,
    InsertCounts,
    Store,
    StoreStatus,
    WalkedNode,
)

__all__ = [
    "NOTIFY_CHANNEL",
    "Batch",
    "ConfigError",
    "DsnSource",
    "Evidence",
    "IngestListener",
    "InsertCounts",
    "MigrationError",
    "ResolvedDsn",
    "Store",
    "StoreStatus",
    "StoreUnavailable",
    "WalkedNode",
    "connect",
    "embedded_dsn",
    "migrate",
    "resolve_dsn",
]
