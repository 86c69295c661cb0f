"""The lookup service's caches (``Memo``): an answer asked for by threads at once is computed
once, and a failed or empty computation leaves each waiter to compute its own."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from poimen_memory.errors import WouldWait, nonblocking
from poimen_memory.lookup.memo import Memo


def test_threads_asking_at_once_compute_the_answer_once() -> None:
    memo: Memo[str, int] = Memo(8)
    calls: list[str] = []
    started = threading.Event()

    def slow() -> int:
        calls.append(threading.current_thread().name)
        started.set()
        time.sleep(0.2)
        return 42

    with ThreadPoolExecutor(4) as pool:
        first = pool.submit(memo.get_or_compute, "k", slow)
        assert started.wait(5)
        others = [pool.submit(memo.get_or_compute, "k", slow) for _ in range(3)]
        assert [f.result() for f in [first, *others]] == [42, 42, 42, 42]
    assert len(calls) == 1
    assert memo.get("k") == 42


def test_a_computation_that_keeps_nothing_leaves_each_waiter_its_own() -> None:
    memo: Memo[str, int] = Memo(8)
    started, release = threading.Event(), threading.Event()
    calls = []

    def empty() -> int | None:
        calls.append("first")
        started.set()
        assert release.wait(5)
        return None

    def own() -> int:
        calls.append("own")
        return 7

    with ThreadPoolExecutor(2) as pool:
        first = pool.submit(memo.get_or_compute, "k", empty)
        assert started.wait(5)
        waiter = pool.submit(memo.get_or_compute, "k", own)
        time.sleep(0.05)
        assert not waiter.done()  # it waits for the computation under way
        release.set()
        assert first.result() is None
        assert waiter.result() == 7
    assert calls == ["first", "own"]


def test_a_failed_computation_wakes_its_waiters_and_is_not_kept() -> None:
    memo: Memo[str, int] = Memo(8)
    started, release = threading.Event(), threading.Event()

    def failing() -> int:
        started.set()
        assert release.wait(5)
        raise RuntimeError("boom")

    with ThreadPoolExecutor(2) as pool:
        first = pool.submit(memo.get_or_compute, "k", failing)
        assert started.wait(5)
        waiter = pool.submit(memo.get_or_compute, "k", lambda: 3)
        release.set()
        with pytest.raises(RuntimeError):
            first.result()
        assert waiter.result() == 3
    assert memo.get("k") == 3
    # Nothing is left marked as under way: a later ask computes at once.
    memo.clear()
    assert memo.get_or_compute("k", lambda: 5) == 5


def test_an_answer_not_kept_would_wait_under_nonblocking_and_marks_nothing() -> None:
    memo: Memo[str, int] = Memo(8)
    with nonblocking(), pytest.raises(WouldWait):
        memo.get_or_compute("k", lambda: 1)
    assert memo.get_or_compute("k", lambda: 2) == 2  # not left waiting on a phantom
    with nonblocking():
        assert memo.get_or_compute("k", lambda: 3) == 2  # kept: no wait
