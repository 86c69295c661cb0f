"""The Postgres store: schema and migrations, connection resolution, and the store API (the
queries of ``writes``, ``reads`` and ``evidence`` on the pool of ``connector``)."""

from poimen_memory.store.connection import (
    ConfigError,
    StoreUnavailable,
    connect,
    embedded_dsn,
    embedded_pgdata,
)
from poimen_memory.store.listen import NOTIFY_CHANNEL, IngestListener
from poimen_memory.store.migrations import MigrationError, migrate
from poimen_memory.store.store import (
    Alias,
    Batch,
    Candidate,
    Evidence,
    InsertCounts,
    Settled,
    SharedBlame,
    Store,
    StoreStatus,
    WalkedNode,
)

__all__ = [
    "NOTIFY_CHANNEL",
    "Alias",
    "Batch",
    "Candidate",
    "ConfigError",
    "Evidence",
    "IngestListener",
    "InsertCounts",
    "MigrationError",
    "Settled",
    "SharedBlame",
    "Store",
    "StoreStatus",
    "StoreUnavailable",
    "WalkedNode",
    "connect",
    "embedded_dsn",
    "embedded_pgdata",
    "migrate",
]
