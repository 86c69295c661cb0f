"""The connector: a connection pool over one Postgres database, opened lazily, retried, and
with every connection failure mapped to ``StoreUnavailable``. Queries live on top of it.

A lost server is not fatal: the pool is dropped, and the next use at least ``retry_interval``
seconds later connects afresh, so the store comes back by itself.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg.rows import DictRow, dict_row
from psycopg_pool import ConnectionPool

from poimen_memory.store.adapters import register_domain_types
from poimen_memory.store.connection import StoreUnavailable, connect, describe_target
from poimen_memory.store.queries import query

__all__ = ["Connection", "Connector"]

Connection = psycopg.Connection[DictRow]


class Connector:
    """A pool of connections that take domain values as parameters and return dict rows."""

    def __init__(
        self,
        dsn: str,
        *,
        max_size: int,
        timeout: float,
        statement_timeout_ms: int | None,
        lazy: bool,
        retry_interval: float,
    ) -> None:
        """Connect (failing within ``timeout`` seconds with StoreUnavailable, unless ``lazy``);
        the defaults and their meaning are ``Store``'s."""
        self.dsn = dsn
        self.timeout = timeout
        self.max_size = max_size
        self.retry_interval = retry_interval
        self._kwargs: dict[str, Any] = {
            "connect_timeout": max(2, int(timeout)),
            "row_factory": dict_row,
        }
        if statement_timeout_ms is not None:
            self._kwargs["options"] = f"-c statement_timeout={int(statement_timeout_ms)}"
        self._pool: ConnectionPool[Connection] | None = None
        self._pool_lock = threading.Lock()
        self._last_attempt = float("-inf")
        self._last_error = f"memory store unreachable at {describe_target(dsn)}"
        self._closed = False
        if not lazy:
            with self._pool_lock:
                self._open()

    def _open(self) -> None:
        self._last_attempt = time.monotonic()
        try:
            # Fail fast and clearly when nothing answers, before a pool retries in the background.
            connect(self.dsn, timeout=int(self._kwargs["connect_timeout"])).close()
            pool: ConnectionPool[Connection] = ConnectionPool(
                self.dsn,
                min_size=1,
                max_size=self.max_size,
                timeout=self.timeout,
                kwargs=self._kwargs,
                configure=register_domain_types,
                check=ConnectionPool.check_connection,
                open=False,
                name="poimen-memory",
            )
            try:
                pool.open(wait=True, timeout=max(self.timeout, 1.0))
            except psycopg.OperationalError as exc:
                pool.close()
                raise StoreUnavailable(f"Postgres at {describe_target(self.dsn)}: {exc}") from None
        except StoreUnavailable as exc:
            self._last_error = str(exc)
            raise
        self._pool = pool

    def warm_up(self) -> bool:
        """Open the pool now (a server does this at start, off the request path); False if
        the store does not answer."""
        try:
            with self.connection() as conn:
                conn.execute(query("ping"))
            return True
        except StoreUnavailable:
            return False

    def close(self) -> None:
        """Close every pooled connection; later uses raise StoreUnavailable."""
        with self._pool_lock:
            self._closed = True
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()

    def _drop(self, pool: ConnectionPool[Connection]) -> None:
        with self._pool_lock:
            if self._pool is pool:
                self._pool = None
        # Closing waits for the pool's workers; do it off the request's path.
        threading.Thread(target=pool.close, kwargs={"timeout": 1.0}, daemon=True).start()

    @contextmanager
    def connection(self) -> Iterator[Connection]:
        """A pooled connection, committed at the end of the block (rolled back on an error).
        A lost or unreachable server, or a statement over its timeout, is StoreUnavailable."""
        with self._pool_lock:
            if self._closed:
                raise StoreUnavailable("the store was closed")
            if self._pool is None:
                if time.monotonic() - self._last_attempt < self.retry_interval:
                    raise StoreUnavailable(self._last_error)
                self._open()
            pool = self._pool
            assert pool is not None
        try:
            with pool.connection(timeout=self.timeout) as conn:
                yield conn
        except psycopg.errors.QueryCanceled:
            raise StoreUnavailable(
                f"memory store at {describe_target(self.dsn)} did not answer in time"
            ) from None
        except psycopg.OperationalError as exc:
            self._drop(pool)
            reason = " ".join(str(exc).split()) or type(exc).__name__
            self._last_error = f"memory store unreachable at {describe_target(self.dsn)}: {reason}"
            raise StoreUnavailable(self._last_error) from None

    def fetch_all(self, name: str, params: Mapping[str, Any]) -> list[DictRow]:
        """Every row of the named query, run on its own connection."""
        with self.connection() as conn:
            return conn.execute(query(name), params).fetchall()
