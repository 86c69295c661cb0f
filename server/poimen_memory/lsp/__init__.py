"""The language server (pygls): hover, code lens, commands, live refresh."""

from enum import Enum
from typing import Final, Literal

UNREACHABLE: Final = "poimen-memory: memory store unreachable"
"""What hovers, messages and command errors say while the store does not answer (the editor
clients look for it)."""


class _Waits(Enum):
    WAITS = "waits"


WAITS: Final = _Waits.WAITS
"""What ``PoimenServer.at_once`` answers for work that would wait (run it in a worker)."""
Waits = Literal[_Waits.WAITS]
