"""Work that runs in a thread of its own while the caller does something else (a second git
process beside the one the caller waits on), and whose value the caller takes afterwards."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

__all__ = ["Meanwhile"]

T = TypeVar("T")


class Meanwhile(Generic[T]):
    """``work`` started now in a daemon thread named ``name``; ``result`` waits for it and
    gives its value, or raises what it raised."""

    def __init__(self, work: Callable[[], T], name: str) -> None:
        self._value: T | None = None
        self._error: BaseException | None = None

        def run() -> None:
            try:
                self._value = work()
            except BaseException as exc:  # handed to the caller, who raises it
                self._error = exc

        self._thread = threading.Thread(target=run, name=name, daemon=True)
        self._thread.start()

    def wait(self) -> None:
        """Wait for the work to end, whatever it gave."""
        self._thread.join()

    def result(self) -> T:
        """The work's value, once it has ended; what it raised is raised here."""
        self.wait()
        if self._error is not None:
            raise self._error
        return self._value  # type: ignore[return-value]  # set when no error was
