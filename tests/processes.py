"""Whether a process still runs (tests that check nothing is left running)."""

from __future__ import annotations

import os
from pathlib import Path


def running(pid: int) -> bool:
    """Whether ``pid`` is a live process: not ended, nor a zombie its parent has not reaped
    yet (read from /proc)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return not stat.split(") ", 1)[1].startswith("Z")
