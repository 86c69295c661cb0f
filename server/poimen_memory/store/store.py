"""The store API over Postgres: the queries of ``writes``, ``reads`` and ``evidence`` on one
``Connector`` (pool, retry, error mapping)."""

from __future__ import annotations

from poimen_memory.store.blames import (
    EVICT_EVERY,
    MAX_BLAME_RUNS,
    MAX_BLAMES,
    BlameCacheStore,
    SharedBlame,
)
from poimen_memory.store.connection import CONNECT_TIMEOUT_S, StoreUnavailable
from poimen_memory.store.connector import Connector
from poimen_memory.store.evidence import Evidence, warm_connection
from poimen_memory.store.pending import PendingReads
from poimen_memory.store.reads import NodeReads, StoreStatus, WalkedNode
from poimen_memory.store.rewrites import Alias, Candidate, RewriteReads
from poimen_memory.store.writes import Batch, BatchWrites, InsertCounts, Settled

__all__ = [
    "Alias",
    "Batch",
    "Candidate",
    "Evidence",
    "InsertCounts",
    "Settled",
    "SharedBlame",
    "Store",
    "StoreStatus",
    "WalkedNode",
]


class Store(BatchWrites, NodeReads, RewriteReads, BlameCacheStore, PendingReads):
    """A connection pool over one Postgres database holding the poimen-memory schema."""

    def __init__(
        self,
        dsn: str,
        *,
        max_size: int = 4,
        timeout: float = CONNECT_TIMEOUT_S,
        statement_timeout_ms: int | None = None,
        lazy: bool = False,
        retry_interval: float = 1.0,
        max_blames: int = MAX_BLAMES,
        max_blame_runs: int = MAX_BLAME_RUNS,
        blame_evict_every: int = EVICT_EVERY,
        warm: bool = False,
    ) -> None:
        """Connect (failing within ``timeout`` seconds with StoreUnavailable, unless ``lazy``).

        The schema is checked on the pool's first connection: without it, or with an older
        or newer one, every use is ``SchemaMissing`` (``status()`` excepted) until it is right.
        A lost server is not fatal: the pool is dropped, and the next use at least
        ``retry_interval`` seconds later connects afresh, so the store comes back by itself.
        A statement timeout bounds every query, for callers that must answer quickly.
        The shared blame cache keeps at most ``max_blames`` files and ``max_blame_runs`` runs,
        checked every ``blame_evict_every`` puts (``store.blames``). With ``warm`` (a
        server: hovers and lenses to answer), each new connection runs the lookups' hot
        statements once as it opens; a one-shot command's connection does not.
        """
        self.configure_blame_cache(
            max_blames=max_blames, max_runs=max_blame_runs, evict_every=blame_evict_every
        )
        self._connector = Connector(
            dsn,
            max_size=max_size,
            timeout=timeout,
            statement_timeout_ms=statement_timeout_ms,
            lazy=lazy,
            retry_interval=retry_interval,
            warm=warm_connection if warm else None,
        )

    @property
    def dsn(self) -> str:
        """The connection string of the database."""
        return self._connector.dsn

    @property
    def timeout(self) -> float:
        """Seconds to wait for a connection before StoreUnavailable."""
        return self._connector.timeout

    @property
    def max_size(self) -> int:
        """The most connections the pool opens."""
        return self._connector.max_size

    @property
    def retry_interval(self) -> float:
        """Seconds between attempts to reach a store that did not answer."""
        return self._connector.retry_interval

    def warm_up(self) -> bool:
        """Open the pool now (a server does this at start, off the request path); False if
        the store does not answer or lacks its schema."""
        return self._connector.warm_up()

    def probe(self) -> StoreUnavailable | None:
        """Use the store once: None when it answers with the right schema, else why not
        (``SchemaMissing`` when it answers without it)."""
        return self._connector.probe()

    def close(self) -> None:
        """Close every pooled connection."""
        self._connector.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
