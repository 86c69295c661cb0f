"""The language server (pygls): hover, code lens, commands, live refresh."""

from typing import Final

UNREACHABLE: Final = "poimen-memory: memory store unreachable"
"""What hovers, messages and command errors say while the store does not answer (the editor
clients look for it)."""
