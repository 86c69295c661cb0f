"""The connector: a connection pool over one Postgres database, opened lazily, retried, and
with every connection failure mapped to ``StoreUnavailable``. Queries live on top of it.

A lost server is not fatal: the pool is dropped, and the next use at least ``retry_interval``
seconds later connects afresh, so the store comes back by itself. A server that answers but
refuses a statement's data (a value out of range, over a limit) is not unreachable: that is
``StoreRejected``, and the pool stays.

The schema is checked once per pool, on its first connection: a database without the
poimen-memory schema, or with an older or newer one, is ``SchemaMissing`` (a
``StoreUnavailable`` that says what to do: ``mem db migrate``, or an upgrade), checked again
at most every ``retry_interval`` seconds until it is right.

A lookup costs one round trip: reads run on autocommit connections (no BEGIN, no COMMIT),
pooled connections are not checked when taken (a read that finds its connection gone is run
once more on a fresh pool instead), JIT compilation is off (it costs tens of milliseconds on
the walk up the edges and never pays back on rows this few), and statements are planned for
their parameters (see ``options``). Writes run in one transaction each.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, TypeVar

import psycopg
from psycopg import conninfo
from psycopg.rows import DictRow, dict_row
from psycopg_pool import ConnectionPool, PoolClosed, PoolTimeout

from poimen_memory.domain import ContentError
from poimen_memory.errors import SchemaMissing, may_wait
from poimen_memory.store.adapters import register_domain_types
from poimen_memory.store.connection import StoreUnavailable, connect, describe_target
from poimen_memory.store.migrations import schema_problem
from poimen_memory.store.queries import query

__all__ = ["Connection", "Connector", "StoreRejected"]

Connection = psycopg.Connection[DictRow]
T = TypeVar("T")

log = logging.getLogger(__name__)

# SQLSTATE classes of data the server refuses: data exception, program limit exceeded.
_REFUSED_CLASSES = ("22", "54")
# SQLSTATEs of a connection that is gone: connection exception, and the server shutting down.
_LOST_CLASSES = ("08", "57P01", "57P02", "57P03")


class _Lost(StoreUnavailable):
    """The connection a statement ran on is gone (the pool is dropped): a read may run again."""


class StoreRejected(ContentError):
    """The store answered but refused the data of a statement (a value over one of Postgres's
    limits, out of range, ...): bad input for this store, never "unreachable"."""


def _dsn_options(dsn: str) -> str:
    """The ``options`` a connection string gives (empty when none, or when it cannot be
    parsed: connecting then says why)."""
    try:
        return str(conninfo.conninfo_to_dict(dsn).get("options") or "")
    except psycopg.ProgrammingError:
        return ""


def _reason(exc: psycopg.Error) -> str:
    """The server's one-line message, without its CONTEXT and HINT lines."""
    primary = exc.diag.message_primary if exc.sqlstate else None
    return " ".join((primary or str(exc) or type(exc).__name__).split())


class _OneConnection:
    """What a store of one connection (``max_size=1``: a one-shot command, a hook's worker)
    needs of a pool, with no thread started: the connection, lent to one user at a time
    (the others wait up to the timeout, as for a pool of one), given back rolled back if a
    transaction was left open, and replaced once it is found broken."""

    def __init__(
        self,
        first: Connection,
        connect: Callable[[], Connection],
        configure: Callable[[Connection], None],
    ) -> None:
        self._conn: Connection | None = first
        self._connect = connect
        self._configure = configure
        self._lock = threading.Lock()
        self._closing = False
        configure(first)

    @contextmanager
    def connection(self, timeout: float) -> Iterator[Connection]:
        """The connection, once no one else holds it (PoolTimeout after ``timeout`` s)."""
        if not self._lock.acquire(timeout=timeout):
            raise PoolTimeout(f"couldn't get a connection after {timeout:.2f} sec")
        try:
            if self._closing:
                raise PoolClosed("the connection was closed")
            conn = self._conn
            if conn is None or conn.closed:
                conn = self._conn = self._connect()
                self._configure(conn)
            try:
                yield conn
            finally:
                if self._closing:
                    conn.close()
                if conn.broken or conn.closed:
                    self._conn = None
                elif conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                    try:
                        conn.rollback()
                    except psycopg.Error:
                        conn.close()
                        self._conn = None
        finally:
            self._lock.release()

    def close(self, timeout: float | None = None) -> None:
        """Close the connection, waiting up to ``timeout`` s for its user; one still in use
        then is closed as it is given back."""
        self._closing = True
        if not self._lock.acquire(timeout=-1 if timeout is None else timeout):
            return
        try:
            conn, self._conn = self._conn, None
            if conn is not None:
                conn.close()
        finally:
            self._lock.release()


def _handing_over(first: Connection) -> type[Connection]:
    """A connection class whose first ``connect`` gives ``first`` (the connection that has
    just shown the server answers), then connects as usual: a pool opened with it costs one
    connection, not two."""
    spare = [first]

    class HandedOver(psycopg.Connection[DictRow]):
        @classmethod
        def connect(cls, conninfo: str = "", **kwargs: Any) -> Connection:  # type: ignore[override]
            with contextlib.suppress(IndexError):
                return spare.pop()
            return psycopg.Connection.connect(conninfo, **kwargs)

    return HandedOver


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
        warm: Callable[[Connection], None] | None = None,
    ) -> None:
        """Connect (failing within ``timeout`` seconds with StoreUnavailable, unless ``lazy``);
        the defaults and their meaning are ``Store``'s."""
        self.dsn = dsn
        self.timeout = timeout
        self.max_size = max_size
        self.retry_interval = retry_interval
        self._warm = warm
        # Plans as Postgres makes them by default (pinned against a server set otherwise): a
        # prepared statement is planned for its values five times, then keeps a generic plan
        # only where that is estimated no dearer. By line, the generic plan of the one lookup
        # statement measured 0.73x the custom ones' time over 300 lines (worst line 1.17x);
        # where a NULL must fold away (an optional filter) or a prefix bound an index range,
        # the generic plan is dearer and custom plans stay.
        options = "-c jit=off -c plan_cache_mode=auto"
        if statement_timeout_ms is not None:
            options += f" -c statement_timeout={int(statement_timeout_ms)}"
        # The DSN's own options come last, so a setting the user gave there wins.
        options = f"{options} {_dsn_options(dsn)}".strip()
        self._kwargs: dict[str, Any] = {
            "connect_timeout": max(2, int(timeout)),
            "row_factory": dict_row,
            "autocommit": True,
            "options": options,
        }
        self._pool: ConnectionPool[Connection] | _OneConnection | None = None
        self._pool_lock = threading.Lock()
        self._last_attempt = float("-inf")
        self._last_error = f"memory store unreachable at {describe_target(dsn)}"
        self._closed = False
        # When the schema was last checked (never, for a new pool) and what was wrong with it.
        self._schema_checked = float("-inf")
        self._schema_problem: str | None = None
        if not lazy:
            with self._pool_lock:
                self._open()

    def _open(self) -> None:
        self._last_attempt = time.monotonic()
        try:
            # Fail fast and clearly when nothing answers, before a pool retries in the
            # background; the connection that answered is the pool's first, not one more.
            kwargs = self._kwargs

            def one() -> Connection:
                conn: Connection = connect(
                    self.dsn,
                    timeout=int(kwargs["connect_timeout"]),
                    autocommit=True,
                    row_factory=kwargs["row_factory"],
                    options=kwargs["options"],
                )
                return conn

            first = one()
            if self.max_size == 1:  # no pool's threads for one connection
                self._pool = _OneConnection(first, one, self._configure)
                self._schema_checked = float("-inf")
                return
            pool: ConnectionPool[Connection] = ConnectionPool(
                self.dsn,
                connection_class=_handing_over(first),
                min_size=1,
                max_size=self.max_size,
                timeout=self.timeout,
                kwargs=self._kwargs,
                configure=self._configure,
                open=False,
                name="poimen-memory",
                # One thread opens the connections a busy server adds (the first is handed
                # over): a one-shot command (a hook's worker) starts two threads, not four.
                num_workers=1,
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
        self._schema_checked = float("-inf")

    def _configure(self, conn: Connection) -> None:
        """A new pooled connection: domain types registered, then (in the pool's worker, off
        any request's path) the hot statements run once, so the first lookup on it finds the
        server's caches of the schema filled and its statements prepared."""
        register_domain_types(conn)
        if self._warm is None:
            return
        try:
            self._warm(conn)
        except psycopg.Error as exc:  # no schema yet, a role that may not read: said later
            log.debug("connection not warmed: %s", exc)

    def _require_schema(self, conn: Connection) -> None:
        """SchemaMissing unless the database has the schema this version uses: looked at on
        a pool's first connection, then again only while it is wrong (at most every
        ``retry_interval`` seconds)."""
        checked = self._schema_checked
        if self._schema_problem is None and checked != float("-inf"):
            return
        if checked == float("-inf") or time.monotonic() - checked >= self.retry_interval:
            self._schema_problem = schema_problem(conn)
            self._schema_checked = time.monotonic()
        if self._schema_problem is not None:
            raise SchemaMissing(describe_target(self.dsn), self._schema_problem)

    def probe(self) -> StoreUnavailable | None:
        """Use the store once (opening the pool if need be): None when it answers with the
        right schema, else why not."""
        try:
            with self.connection() as conn:
                conn.execute(query("ping"))
        except StoreUnavailable as exc:
            return exc
        return None

    def warm_up(self) -> bool:
        """Open the pool now (a server does this at start, off the request path); False if
        the store does not answer or lacks its schema."""
        return self.probe() is None

    def close(self) -> None:
        """Close every pooled connection; later uses raise StoreUnavailable."""
        with self._pool_lock:
            self._closed = True
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()

    def _drop(self, pool: ConnectionPool[Connection] | _OneConnection) -> None:
        with self._pool_lock:
            if self._pool is pool:
                self._pool = None
                self._last_attempt = float("-inf")  # the next use connects at once
        # Closing waits for the pool's workers; do it off the request's path.
        threading.Thread(target=pool.close, kwargs={"timeout": 1.0}, daemon=True).start()

    @contextmanager
    def connection(self, *, any_schema: bool = False, read: bool = False) -> Iterator[Connection]:
        """A pooled connection in a transaction, committed at the end of the block (rolled
        back on an error); with ``read``, outside any transaction (each statement is its own:
        for reads, which need no BEGIN and COMMIT around them). A lost or unreachable
        server, or a statement over its timeout, is StoreUnavailable;
        a database without this version's schema is SchemaMissing (unless ``any_schema``,
        for reports on the schema itself); data the server refuses is StoreRejected; any
        other server failure is StoreUnavailable that says so (the pool stays)."""
        may_wait()
        with self._pool_lock:
            if self._closed:
                raise StoreUnavailable("the store was closed")
            if self._pool is None:
                if time.monotonic() - self._last_attempt < self.retry_interval:
                    raise StoreUnavailable(self._last_error)
                self._open()
            pool = self._pool
            assert pool is not None
        used: Connection | None = None
        try:
            with pool.connection(timeout=self.timeout) as conn:
                used = conn
                if not any_schema:
                    self._require_schema(conn)
                if read:
                    yield conn
                else:
                    with conn.transaction():
                        yield conn
        except psycopg.errors.QueryCanceled:
            raise StoreUnavailable(
                f"memory store at {describe_target(self.dsn)} did not answer in time"
            ) from None
        except psycopg.Error as exc:
            code = exc.sqlstate or ""
            lost = used is None or used.broken or not code or code.startswith(_LOST_CLASSES)
            if isinstance(exc, psycopg.OperationalError) and lost:
                self._drop(pool)
                reason = " ".join(str(exc).split()) or type(exc).__name__
                self._last_error = (
                    f"memory store unreachable at {describe_target(self.dsn)}: {reason}"
                )
                raise _Lost(self._last_error) from None
            target = describe_target(self.dsn)
            if isinstance(exc, psycopg.errors.UndefinedTable) and not any_schema:
                self._schema_checked = float("-inf")  # dropped since it was checked
                raise SchemaMissing(
                    target,
                    f"lacks a table of its schema ({_reason(exc)}); run `mem db migrate`",
                ) from None
            if code.startswith(_REFUSED_CLASSES):
                raise StoreRejected(
                    f"the memory store at {target} refused the data: {_reason(exc)} "
                    f"(SQLSTATE {code})"
                ) from None
            if isinstance(exc, psycopg.OperationalError):  # disk full, out of memory, ...
                raise StoreUnavailable(
                    f"the memory store at {target} failed: {_reason(exc)} (SQLSTATE {code})"
                ) from None
            raise

    def read(self, work: Callable[[Connection], T]) -> T:
        """``work`` on a pooled connection outside a transaction: reads only. Connections are
        not checked when taken from the pool; when the one taken is found gone (the server
        restarted, a proxy dropped it), ``work`` runs once more on a fresh pool."""
        try:
            with self.connection(read=True) as conn:
                return work(conn)
        except _Lost:
            with self.connection(read=True) as conn:
                return work(conn)

    def fetch_all(self, name: str, params: Mapping[str, Any]) -> list[DictRow]:
        """Every row of the named query (a read), run on its own connection."""
        return self.read(lambda conn: conn.execute(query(name), params).fetchall())
