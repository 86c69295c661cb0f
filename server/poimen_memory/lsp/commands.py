"""Command ids of the language server (workspace/executeCommand). editors/ mirrors these.
One per operation of the table (``mem.`` and the operation's name in camelCase; a test checks
they agree), and the server's own: showMemories, refresh, ping."""

from __future__ import annotations

from typing import Final

BY_GIT: Final = "mem.byGit"
BY_COMMIT: Final = "mem.byCommit"
BY_AUTHOR: Final = "mem.byAuthor"
QUERY: Final = "mem.query"
SHOW_MEMORIES: Final = "mem.showMemories"
REFRESH: Final = "mem.refresh"
PING: Final = "mem.ping"  # answers {"version"} at once: liveness, and the benchmarks' floor
REMEMBER: Final = "mem.remember"  # records a memory on lines of the saved file
WHY: Final = "mem.why"
BLAME: Final = "mem.blame"
STATUS: Final = "mem.status"
RESOLVE_PENDING: Final = "mem.resolvePending"

ALL: Final = (
    BY_GIT,
    BY_COMMIT,
    BY_AUTHOR,
    QUERY,
    SHOW_MEMORIES,
    REFRESH,
    PING,
    REMEMBER,
    WHY,
    BLAME,
    STATUS,
    RESOLVE_PENDING,
)
