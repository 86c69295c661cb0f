"""Git behind one door: repository identity, blame (streamed, cached), line mapping, metadata."""

from poimen_memory.gitio.blame import Blame, BlameCommit, BlameEntry, BlameLine
from poimen_memory.gitio.blamer import Blamer
from poimen_memory.gitio.cache import BlameCache, CacheKey, note_activity
from poimen_memory.gitio.errors import (
    BinaryFile,
    EmptyRepository,
    GitError,
    GitFailed,
    GitNotFound,
    NotARepository,
    OutsideRepository,
    UnknownCommit,
    UnsafeArgument,
    Untracked,
)
from poimen_memory.gitio.history import (
    Change,
    FileChange,
    ancestors_of,
    changes,
    commits_since,
    line_hash,
)
from poimen_memory.gitio.identity import local_identity, normalize_remote
from poimen_memory.gitio.linemap import map_buffer_to_head
from poimen_memory.gitio.objects import blob_id_of
from poimen_memory.gitio.repo import GitRepo
from poimen_memory.gitio.runner import GitRunner
from poimen_memory.gitio.runner import stop_all as stop_git

__all__ = [
    "BinaryFile",
    "Blame",
    "BlameCache",
    "BlameCommit",
    "BlameEntry",
    "BlameLine",
    "Blamer",
    "CacheKey",
    "Change",
    "EmptyRepository",
    "FileChange",
    "GitError",
    "GitFailed",
    "GitNotFound",
    "GitRepo",
    "GitRunner",
    "NotARepository",
    "OutsideRepository",
    "UnknownCommit",
    "UnsafeArgument",
    "Untracked",
    "ancestors_of",
    "blob_id_of",
    "changes",
    "commits_since",
    "line_hash",
    "local_identity",
    "map_buffer_to_head",
    "normalize_remote",
    "note_activity",
    "stop_git",
]
