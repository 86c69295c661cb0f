"""Command ids of the language server (workspace/executeCommand). editors/ mirrors these."""

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

ALL: Final = (BY_GIT, BY_COMMIT, BY_AUTHOR, QUERY, SHOW_MEMORIES, REFRESH, PING, REMEMBER)
