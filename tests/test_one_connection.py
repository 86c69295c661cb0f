"""A store of one connection (``max_size=1``: `mem ingest`, a hook's worker, one-shot
commands) starts no pool's threads, yet behaves as a pool of one: one user at a time, a
transaction left open rolled back, a lost connection replaced, a closed store refused."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import psycopg
import pytest

from poimen_memory.domain import ProjectId, RepoId
from poimen_memory.errors import StoreUnavailable
from poimen_memory.store import Store
from poimen_memory.store.connector import StoreRejected


def _backend_pid(store: Store) -> int:
    with store._connector.connection(read=True) as conn:
        row = conn.execute("SELECT pg_backend_pid() AS pid").fetchone()
    assert row is not None
    return int(row["pid"])


def test_one_connection_starts_no_thread_and_answers(store_dsn: str, project: ProjectId) -> None:
    before = threading.active_count()
    with Store(store_dsn, max_size=1) as one:
        assert threading.active_count() == before, "a pool's threads were started"
        assert one.pending_files(project, RepoId("example.com/none")) == set()
        assert _backend_pid(one) == _backend_pid(one)  # the same connection, kept
    with Store(store_dsn, max_size=2) as pooled:
        assert threading.active_count() > before  # (what the check above would see)
        assert pooled.pending_files(project, RepoId("example.com/none")) == set()


def test_a_failed_transaction_is_rolled_back_and_the_connection_kept(store_dsn: str) -> None:
    with Store(store_dsn, max_size=1) as one:
        pid = _backend_pid(one)
        with pytest.raises(StoreRejected), one._connector.connection() as conn:
            conn.execute("SELECT 1 / 0")
        with one._connector.connection(read=True) as conn:
            status = conn.info.transaction_status
            assert status == psycopg.pq.TransactionStatus.IDLE
        assert _backend_pid(one) == pid
        # A transaction its user left open is rolled back as the connection is given back.
        with one._connector.connection(read=True) as conn:
            conn.execute("BEGIN")
            conn.execute("CREATE TEMP TABLE left_open (x int)")
        with one._connector.connection(read=True) as conn:
            assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
            found = conn.execute("SELECT to_regclass('pg_temp.left_open') AS t").fetchone()
            assert found is not None
            assert found["t"] is None
        assert _backend_pid(one) == pid


def test_a_lost_connection_is_replaced(store_dsn: str, project: ProjectId) -> None:
    with Store(store_dsn, max_size=1, retry_interval=0.0) as one:
        pid = _backend_pid(one)
        with psycopg.connect(store_dsn, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        time.sleep(0.2)
        # A read that finds its connection gone runs once more on a new one.
        assert one.pending_files(project, RepoId("example.com/none")) == set()
        assert _backend_pid(one) != pid


def test_one_user_at_a_time(store_dsn: str) -> None:
    with Store(store_dsn, max_size=1, timeout=5.0) as one:
        held, release = threading.Event(), threading.Event()

        def hold() -> int:
            with one._connector.connection(read=True) as conn:
                held.set()
                assert release.wait(5)
                return int(conn.info.backend_pid)

        def other() -> int:
            with one._connector.connection(read=True) as conn:
                return int(conn.info.backend_pid)

        with ThreadPoolExecutor(2) as pool:
            first = pool.submit(hold)
            assert held.wait(5)
            second = pool.submit(other)
            time.sleep(0.1)
            assert not second.done()  # waits for the one connection
            release.set()
            assert first.result() == second.result()


def test_a_closed_store_is_refused(store_dsn: str, project: ProjectId) -> None:
    one = Store(store_dsn, max_size=1)
    one.close()
    with pytest.raises(StoreUnavailable):
        one.pending_files(project, RepoId("example.com/none"))
