"""The shared blame cache: whole-file ``git blame`` results stored once for the whole team, as
a header (``blame_file``) and its run-length rows (``blame_run``).

The git side computes a blame, puts it here, and a teammate's first hover on that file at that
commit reads it back with one query, using it only if their own blob id of the file matches.
Every read and write is scoped by ``(project, repo)``; a blame is keyed by the file's path, the
last commit that touched it and the fingerprint of the blame's flags, ``.mailmap`` and
ignore-revs.

The cache is bounded by a number of files and of runs, evicting the least recently used files
first. No put counts the table: puts are numbered by a sequence every process shares, and one
put in ``evict_every`` (or a put large enough to matter on its own) runs the eviction, which
reads only the headers. Between two evictions the cache can outgrow its bound by at most
``evict_every - 1`` files and ``max_runs / RUN_SLACK_DIVISOR`` runs (plus whatever puts other
processes have in flight at that moment).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

from psycopg.types.json import Jsonb

from poimen_memory.domain import (
    ContentError,
    ProjectId,
    RepoId,
    SharedBlame,
    SharedBlameLine,
    anchors,
    check_repo_path,
)
from poimen_memory.domain.checks import BIGINT_MAX, INT4_MAX, check_int, check_match, check_text
from poimen_memory.store.connector import Connection, Connector
from poimen_memory.store.queries import query

__all__ = [
    "EVICT_EVERY",
    "MAX_BLAMES",
    "MAX_BLAME_RUNS",
    "RUN_SLACK_DIVISOR",
    "TOUCH_AFTER_S",
    "BlameCacheStore",
    "BlameCommitRow",
    "BlameRunRow",
    "SharedBlame",
    "blame_counts",
    "check_blame",
]

# The bound: at most this many blame files and this many runs in all (the least recently used
# files go first).
MAX_BLAMES: Final = 20_000
MAX_BLAME_RUNS: Final = 5_000_000
# One put in this many (counted across every process sharing the store) checks the bound.
EVICT_EVERY: Final = 64
# A put of at least max_runs / (RUN_SLACK_DIVISOR * evict_every) runs checks the bound itself,
# so the puts between two checks add less than max_runs / RUN_SLACK_DIVISOR runs.
RUN_SLACK_DIVISOR: Final = 16
# A read marks a blame used only when its mark is older than this: most reads write nothing.
TOUCH_AFTER_S: Final = 60
# Rough bytes a run row costs beyond its text (tuple header, integers, its index entry).
_RUN_OVERHEAD: Final = 64
_HEADER_OVERHEAD: Final = 256
# Only one process evicts at a time (any constant, the same for every process; not the one of
# the migrations).
_EVICT_LOCK_KEY: Final = 0x626C616D65  # "blame"

_OBJECT_ID: Final = re.compile(r"[0-9a-f]{40}(?:[0-9a-f]{24})?")
_FINGERPRINT: Final = re.compile(r"[0-9a-f]{32}")
_OBJECT_ID_TEXT: Final = "a full git object id (40 or 64 lowercase hex digits)"

BlameCommitRow = anchors.BlameCommitRow
BlameRunRow = anchors.BlameRunRow


def _check_key(path: object, commit: object, fingerprint: object) -> None:
    check_repo_path("path", path)
    check_match("commit", commit, _OBJECT_ID, _OBJECT_ID_TEXT)
    check_match("fingerprint", fingerprint, _FINGERPRINT, "32 lowercase hex digits")


def _check_commits(commits: object) -> set[str]:
    """The shas of well-formed commit rows; ContentError naming the first bad field."""
    if isinstance(commits, str | bytes) or not isinstance(commits, Sequence):
        raise ContentError(f"commits: expected a sequence of commit rows, got {type(commits)}")
    shas: set[str] = set()
    for i, row in enumerate(commits):
        name = f"commits[{i}]"
        if isinstance(row, str | bytes) or not isinstance(row, Sequence) or len(row) != 6:
            raise ContentError(
                f"{name}: expected (sha, author_name, author_email, author_time, summary, boundary)"
            )
        sha, author_name, author_email, author_time, summary, boundary = row
        check_match(f"{name}.sha", sha, _OBJECT_ID, _OBJECT_ID_TEXT)
        check_text(f"{name}.author_name", author_name)
        check_text(f"{name}.author_email", author_email)
        check_int(f"{name}.author_time", author_time, -BIGINT_MAX, BIGINT_MAX)
        check_text(f"{name}.summary", summary)
        if not isinstance(boundary, bool):
            raise ContentError(f"{name}.boundary: expected true or false, got {boundary!r}")
        if sha in shas:
            raise ContentError(f"{name}.sha: {sha} is listed twice")
        shas.add(sha)
    return shas


def check_blame(blame: SharedBlame) -> None:
    """Refuse a blame the cache must not hold, with a ContentError (a ValueError) naming the
    field: its key, its commit rows, and runs that do not cover exactly ``line_count`` lines
    (lengths >= 1, starts >= 1, each run's commit among ``commits``)."""
    _check_key(blame.path, blame.commit, blame.fingerprint)
    check_match("blob_id", blame.blob_id, _OBJECT_ID, _OBJECT_ID_TEXT)
    check_int("line_count", blame.line_count, 0, INT4_MAX)
    shas = _check_commits(blame.commits)
    runs = blame.runs
    if isinstance(runs, str | bytes) or not isinstance(runs, Sequence):
        raise ContentError(f"runs: expected a sequence of runs, got {type(runs)}")
    total = 0
    for i, run in enumerate(runs):
        name = f"runs[{i}]"
        if isinstance(run, str | bytes) or not isinstance(run, Sequence) or len(run) != 4:
            raise ContentError(f"{name}: expected (orig_commit, orig_path, orig_start, length)")
        orig_commit, orig_path, orig_start, length = run
        check_match(f"{name}.orig_commit", orig_commit, _OBJECT_ID, _OBJECT_ID_TEXT)
        if orig_commit not in shas:
            raise ContentError(f"{name}.orig_commit: {orig_commit} is not one of commits")
        check_repo_path(f"{name}.orig_path", orig_path)
        check_int(f"{name}.orig_start", orig_start, 1, INT4_MAX)
        check_int(f"{name}.length", length, 1, INT4_MAX - orig_start + 1)
        total += length
    if total != blame.line_count:
        raise ContentError(
            f"runs: the lengths add up to {total} lines, but line_count is {blame.line_count}"
        )


def _estimate_bytes(commits_json: str, blame: SharedBlame) -> int:
    """Roughly what the blame takes in the store."""
    runs = sum(len(c) + len(p.encode("utf-8")) + _RUN_OVERHEAD for c, p, _, _ in blame.runs)
    return _HEADER_OVERHEAD + len(blame.path.encode("utf-8")) + len(commits_json) + runs


def _commit_row(item: object) -> BlameCommitRow | None:
    if not isinstance(item, list) or len(item) != 6:
        return None
    sha, name, email, time, summary, boundary = item
    if not (
        isinstance(sha, str)
        and isinstance(name, str)
        and isinstance(email, str)
        and isinstance(time, int)
        and not isinstance(time, bool)
        and isinstance(summary, str)
        and isinstance(boundary, bool)
    ):
        return None
    return (sha, name, email, time, summary, boundary)


def _blame_from_row(
    path: str, commit: str, fingerprint: str, row: Mapping[str, Any]
) -> SharedBlame | None:
    """The stored blame, or None (a miss) if the row is not one the cache could have written:
    run count, line count and commits must agree."""
    stored = row["commits"]
    if not isinstance(stored, list):
        return None
    commits = tuple(_commit_row(item) for item in stored)
    runs = tuple(
        zip(row["orig_commits"], row["orig_paths"], row["orig_starts"], row["lengths"], strict=True)
    )
    shas = {c[0] for c in commits if c is not None}
    if (
        None in commits
        or len(runs) != row["run_count"]
        or sum(length for *_, length in runs) != row["line_count"]
        or not {orig for orig, *_ in runs} <= shas
    ):
        return None
    return SharedBlame(
        path=path,
        commit=commit,
        fingerprint=fingerprint,
        blob_id=row["blob_id"],
        line_count=row["line_count"],
        commits=tuple(c for c in commits if c is not None),
        runs=runs,
    )


def blame_counts(conn: Connection) -> tuple[int, int]:
    """``(files, runs)`` of the shared blame cache; ``(0, 0)`` on a schema without it."""
    present = conn.execute(query("blame_cache_present")).fetchone()
    if present is None or not present["present"]:
        return 0, 0
    row = conn.execute(query("blame_status")).fetchone()
    assert row is not None
    return int(row["files"]), int(row["runs"])


class BlameCacheStore:
    """The store's shared blame cache, on its connector. The bound is set by
    ``configure_blame_cache`` (``Store`` does it from its constructor)."""

    _connector: Connector
    _max_blames: int = MAX_BLAMES
    _max_blame_runs: int = MAX_BLAME_RUNS
    _blame_evict_every: int = EVICT_EVERY

    def configure_blame_cache(
        self,
        *,
        max_blames: int = MAX_BLAMES,
        max_runs: int = MAX_BLAME_RUNS,
        evict_every: int = EVICT_EVERY,
    ) -> None:
        """Bound the cache to ``max_blames`` files and ``max_runs`` runs, checked every
        ``evict_every`` puts (of all processes together)."""
        self._max_blames = check_int("max_blames", max_blames, 1, BIGINT_MAX)
        self._max_blame_runs = check_int("max_blame_runs", max_runs, 1, BIGINT_MAX)
        self._blame_evict_every = check_int("blame_evict_every", evict_every, 1, INT4_MAX)

    def put_blame(self, project: ProjectId, repo: RepoId, blame: SharedBlame) -> None:
        """Store a blame, replacing the one stored under its key (header and runs, in one
        transaction); idempotent. A blame of more runs than the whole cache may hold is not
        stored. Then keeps the cache within its bound (see the module)."""
        check_blame(blame)
        if len(blame.runs) > self._max_blame_runs:
            return
        commits_json = json.dumps([list(c) for c in blame.commits], ensure_ascii=False)
        with self._connector.connection() as conn:
            with conn.transaction():
                header = conn.execute(
                    query("blame_put_file"),
                    {
                        "project": project,
                        "repo": repo,
                        "path": blame.path,
                        "commit": blame.commit,
                        "fingerprint": blame.fingerprint,
                        "blob_id": blame.blob_id,
                        "line_count": blame.line_count,
                        "run_count": len(blame.runs),
                        "commits": Jsonb(commits_json, dumps=lambda text: text),
                        "est_bytes": _estimate_bytes(commits_json, blame),
                    },
                ).fetchone()
                assert header is not None
                file = {"project": project, "file_id": header["id"]}
                conn.execute(query("blame_delete_runs"), file)
                if blame.runs:
                    orig_commit, orig_path, orig_start, length = zip(*blame.runs, strict=True)
                    conn.execute(
                        query("blame_put_runs"),
                        {
                            **file,
                            "orig_commit": list(orig_commit),
                            "orig_path": list(orig_path),
                            "orig_start": list(orig_start),
                            "length": list(length),
                        },
                    )
            big = max(1, self._max_blame_runs // (RUN_SLACK_DIVISOR * self._blame_evict_every))
            if int(header["put_no"]) % self._blame_evict_every == 0 or len(blame.runs) >= big:
                self._evict(conn)

    def evict_blames(self) -> int:
        """Evict the least recently used blames beyond the bound now; returns how many files
        went (0 also when another process is evicting at this moment)."""
        with self._connector.connection() as conn:
            return self._evict(conn)

    def _evict(self, conn: Connection) -> int:
        with conn.transaction():
            lock = conn.execute(query("blame_evict_lock"), {"key": _EVICT_LOCK_KEY}).fetchone()
            if lock is None or not lock["got"]:
                return 0
            cur = conn.execute(
                query("blame_evict"),
                {"max_files": self._max_blames, "max_runs": self._max_blame_runs},
            )
            return max(cur.rowcount, 0)

    def get_blame(
        self, project: ProjectId, repo: RepoId, path: str, commit: str, fingerprint: str
    ) -> SharedBlame | None:
        """The stored blame of ``path`` at ``commit`` under ``fingerprint``, or None: one
        query, which also marks it used (at most once a minute)."""
        _check_key(path, commit, fingerprint)
        with self._connector.connection() as conn:
            row = conn.execute(
                query("blame_get"),
                {
                    "project": project,
                    "repo": repo,
                    "path": path,
                    "commit": commit,
                    "fingerprint": fingerprint,
                    "touch_after_s": TOUCH_AFTER_S,
                },
            ).fetchone()
        return None if row is None else _blame_from_row(path, commit, fingerprint, row)

    def blame_line(
        self,
        project: ProjectId,
        repo: RepoId,
        path: str,
        fingerprint: str,
        blob_id: str,
        line: int,
    ) -> list[SharedBlameLine]:
        """Line ``line``'s part of each stored blame of ``path`` under ``fingerprint`` whose
        file is the blob ``blob_id`` (the caller chooses among their commits, and checks the
        run): one query reading one run per blame, which also marks them used."""
        check_repo_path("path", path)
        check_match("fingerprint", fingerprint, _FINGERPRINT, "32 lowercase hex digits")
        check_match("blob_id", blob_id, _OBJECT_ID, _OBJECT_ID_TEXT)
        check_int("line", line, 1, INT4_MAX)
        rows = self._connector.fetch_all(
            "blame_line",
            {
                "project": project,
                "repo": repo,
                "path": path,
                "fingerprint": fingerprint,
                "blob_id": blob_id,
                "line": line,
                "touch_after_s": TOUCH_AFTER_S,
            },
        )
        return [
            SharedBlameLine(
                str(r["commit_sha"]),
                int(r["line_count"]),
                None
                if r["line_start"] is None
                else (r["orig_commit"], r["orig_path"], r["orig_start"], r["length"]),
                r["line_start"],
            )
            for r in rows
        ]

    def blames_at(
        self,
        project: ProjectId,
        repo: RepoId,
        path: str,
        fingerprint: str,
        commits: Sequence[str],
    ) -> set[str]:
        """Which of ``commits`` have a stored blame of ``path`` under ``fingerprint``: one
        query."""
        check_repo_path("path", path)
        check_match("fingerprint", fingerprint, _FINGERPRINT, "32 lowercase hex digits")
        if isinstance(commits, str):
            raise ContentError("commits: expected a sequence of commit ids, got a string")
        for i, commit in enumerate(commits):
            check_match(f"commits[{i}]", commit, _OBJECT_ID, _OBJECT_ID_TEXT)
        wanted = list(dict.fromkeys(commits))
        if not wanted:
            return set()
        rows = self._connector.fetch_all(
            "blame_at_commits",
            {
                "project": project,
                "repo": repo,
                "path": path,
                "fingerprint": fingerprint,
                "commits": wanted,
            },
        )
        return {str(r["commit_sha"]) for r in rows}

    def blame_of_path(self, project: ProjectId, repo: RepoId, path: str, fingerprint: str) -> bool:
        """Whether any blame of ``path`` under ``fingerprint`` is stored (at any commit)."""
        check_repo_path("path", path)
        check_match("fingerprint", fingerprint, _FINGERPRINT, "32 lowercase hex digits")
        rows = self._connector.fetch_all(
            "blame_of_path",
            {"project": project, "repo": repo, "path": path, "fingerprint": fingerprint},
        )
        return bool(rows and rows[0]["present"])

    def blame_cache_status(self) -> tuple[int, int]:
        """``(files, runs)`` the shared blame cache holds."""
        with self._connector.connection() as conn:
            return blame_counts(conn)
