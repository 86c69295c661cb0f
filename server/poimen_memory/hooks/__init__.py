"""Automatic capture from Claude Code: its hooks run ``mem hooks run claude-code`` when a session
stops or ends, which ingests the session's transcript; ``mem mcp install`` registers the MCP
server the same way.

- ``claude``: Claude Code's events and where each scope keeps its settings and MCP servers;
- ``codex``: the Codex CLI's events and where its hooks files are;
- ``githook``: the opt-in git post-commit hook that places pending anchors after a commit;
- ``jsonfile``: reading its JSON settings files and writing them atomically, as a ``Change``;
- ``installers``: the hook command and the MCP entry, merged into (or removed from) those
  files, every other key, hook and server kept as it was; which project to write into them;
- ``payload``: the payload Claude Code writes on the hook's stdin;
- ``run``: the hook returns at once and a detached worker ingests the transcript, one run per
  transcript at a time, into the project ``lookup.decide_project`` names;
- ``state``: the log, one JSON line per run under the user's cache directory, bounded in size,
  and the transcripts' lock files;
- ``status``: what ``mem hooks status`` reports.

The hook never fails the agent: every problem ends up as a line in the log.
"""

from poimen_memory.hooks import claude, codex, githook, installers, payload, run, status
from poimen_memory.hooks.claude import *  # noqa: F403  (the package's API, as listed below)
from poimen_memory.hooks.codex import *  # noqa: F403
from poimen_memory.hooks.githook import *  # noqa: F403
from poimen_memory.hooks.installers import *  # noqa: F403
from poimen_memory.hooks.jsonfile import Change, read_json
from poimen_memory.hooks.payload import *  # noqa: F403
from poimen_memory.hooks.run import *  # noqa: F403
from poimen_memory.hooks.state import (
    LOCKS_KEPT_S,
    LOG_MAX_BYTES,
    log_path,
    read_log,
    transcript_locks,
)
from poimen_memory.hooks.status import *  # noqa: F403

__all__ = [
    "LOCKS_KEPT_S",
    "LOG_MAX_BYTES",
    "Change",
    "log_path",
    "read_json",
    "read_log",
    "transcript_locks",
]
__all__ += claude.__all__
__all__ += codex.__all__
__all__ += githook.__all__
__all__ += installers.__all__
__all__ += payload.__all__
__all__ += run.__all__
__all__ += status.__all__
