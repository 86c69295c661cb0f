"""Git anchoring values: commit metadata and where an L0 node's evidence sits in a file."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from poimen_memory.domain import checks
from poimen_memory.domain.checks import ContentError
from poimen_memory.domain.ids import CommitSha, ProjectId, RepoId, Sha256Hash, check_repo_path


@dataclass(frozen=True, slots=True)
class CommitInfo:
    """Commit metadata taken from the repository at ingest (mailmap applied to the author)."""

    repo: RepoId
    sha: CommitSha
    message: str
    author_name: str
    author_email: str
    author_date: datetime
    # What the commit changed, independent of line numbers and whitespace (gitio.history):
    # a rebased or cherry-picked copy has the same one. Not part of the commit's identity.
    patch_id: str | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        checks.check_text("commit.message", self.message)
        checks.check_text("commit.author_name", self.author_name)
        checks.check_text("commit.author_email", self.author_email)
        checks.parse_timestamp("commit.author_date", self.author_date)

    @property
    def summary(self) -> str:
        """The first line of the message."""
        return self.message.split("\n", 1)[0]

    def to_json(self) -> dict[str, Any]:
        """The JSON object form."""
        return {
            "repo": self.repo.value,
            "sha": self.sha.value,
            "message": self.message,
            "author_name": self.author_name,
            "author_email": self.author_email,
            "author_date": checks.format_timestamp(self.author_date),
        }

    @classmethod
    def from_json(cls, obj: object) -> CommitInfo:
        """Parse the JSON object form; errors name the field."""
        o = checks.require_keys(
            "commit", obj, ("repo", "sha", "message", "author_name", "author_email", "author_date")
        )
        return cls(
            repo=RepoId(o["repo"]),
            sha=CommitSha(o["sha"]),
            message=o["message"],
            author_name=o["author_name"],
            author_email=o["author_email"],
            author_date=checks.parse_timestamp("commit.author_date", o["author_date"]),
        )


@dataclass(frozen=True, slots=True)
class Anchor:
    """Where an L0 node's evidence sits: lines of ``file`` in ``commit``'s version of it.

    ``line_start == line_end == 0`` anchors the whole file. Lines are 1-based, inclusive.
    """

    project: ProjectId
    node: Sha256Hash
    repo: RepoId
    commit: CommitSha
    file: str
    line_start: int
    line_end: int
    # Facts for finding the anchor again after its commit is rewritten, not part of its
    # identity: the hash of each line's text (gitio.history.line_hash; None for a trivial
    # line), and where line_start sits among the lines its commit added to the file.
    line_hashes: tuple[int | None, ...] | None = field(default=None, compare=False)
    added_from: int | None = field(default=None, compare=False)
    # Where the lines were when they were recorded, when that is not ``file`` (renamed since
    # the commit): the place to look for lines whose texts cannot be told apart.
    found_in: str | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        check_repo_path("file", self.file)
        if self.found_in is not None:
            check_repo_path("found_in", self.found_in)
        checks.check_int("line_start", self.line_start, 0, checks.INT4_MAX)
        checks.check_int("line_end", self.line_end, 0, checks.INT4_MAX)
        if (self.line_start == 0) != (self.line_end == 0):
            raise ContentError(
                f"line_end: whole-file anchors have line_start = line_end = 0, "
                f"got {self.line_start}..{self.line_end}"
            )
        if self.line_end < self.line_start:
            raise ContentError(f"line_end: {self.line_end} is before line_start {self.line_start}")

    def covers(self, line: int) -> bool:
        """Whether ``line`` (1-based, in the anchor's commit) falls in the anchor."""
        return self.line_start == 0 or self.line_start <= line <= self.line_end

    def to_json(self) -> dict[str, Any]:
        """The JSON object form."""
        return {
            "project": self.project.value,
            "node": self.node.value,
            "repo": self.repo.value,
            "commit_sha": self.commit.value,
            "file": self.file,
            "line_start": self.line_start,
            "line_end": self.line_end,
        }

    @classmethod
    def from_json(cls, obj: object) -> Anchor:
        """Parse the JSON object form; errors name the field."""
        o = checks.require_keys(
            "anchor",
            obj,
            ("project", "node", "repo", "commit_sha", "file", "line_start", "line_end"),
        )
        return cls(
            project=ProjectId(o["project"]),
            node=Sha256Hash(o["node"]),
            repo=RepoId(o["repo"]),
            commit=CommitSha(o["commit_sha"]),
            file=o["file"],
            line_start=o["line_start"],
            line_end=o["line_end"],
        )


BlameCommitRow = tuple[str, str, str, int, str, bool]
"""A blamed commit: ``(sha, author_name, author_email, author_time (epoch s), summary,
boundary)``."""

BlameRunRow = tuple[str, str, int, int]
"""A run: ``(orig_commit, orig_path, orig_start, length)``: the next ``length`` lines of the
file are lines ``orig_start..orig_start+length-1`` of ``orig_path`` at ``orig_commit``."""


@dataclass(frozen=True, slots=True)
class SharedBlame:
    """A whole-file blame as a team shares it (gitio writes and checks it, the store keeps
    it): the file's lines as runs, in order, keyed by path, the last commit that touched it
    and the settings fingerprint, with the file's blob id to check it against."""

    path: str
    commit: str
    fingerprint: str
    blob_id: str
    line_count: int
    commits: tuple[BlameCommitRow, ...]
    runs: tuple[BlameRunRow, ...]


@dataclass(frozen=True, slots=True)
class SharedBlameLine:
    """One line's part of a stored shared blame, as stored (nothing checked): the commit the
    blame is keyed by, the file's line count, and the last run starting at or before the line
    with the line it starts at (None: no such run)."""

    commit: str
    line_count: int
    run: BlameRunRow | None
    run_start: int | None


@dataclass(frozen=True, slots=True)
class PendingAnchor:
    """Lines an agent remembered before they were committed: a node waits for them in
    ``file``. They are known by the hash of each line's text (``pending_line_hash``), as
    consecutive lines from ``line_start`` of the work tree on top of ``base`` (None: a
    repository with no commit yet). Once a commit after ``base`` holds them, they become
    anchors at their origin; after ``expires_at`` they are forgotten."""

    project: ProjectId
    node: Sha256Hash
    repo: RepoId
    file: str
    base: CommitSha | None
    line_start: int
    line_hashes: tuple[int, ...]
    recorded_at: datetime
    expires_at: datetime

    def __post_init__(self) -> None:
        check_repo_path("file", self.file)
        checks.check_int("line_start", self.line_start, 1, checks.INT4_MAX)
        if not self.line_hashes:
            raise ContentError("line_hashes: a pending anchor holds at least one line")
        checks.parse_timestamp("recorded_at", self.recorded_at)
        checks.parse_timestamp("expires_at", self.expires_at)

    @property
    def line_end(self) -> int:
        """The last line, as the work tree numbered it when it was recorded."""
        return self.line_start + len(self.line_hashes) - 1


def pending_line_hash(text: str) -> int:
    """The hash a pending anchor keeps of a line: of its text without a trailing CR and
    trailing blanks, as a signed 64-bit integer (a Postgres bigint)."""
    digest = hashlib.blake2b(
        text.rstrip("\r").rstrip().encode("utf-8", "surrogateescape"), digest_size=8
    ).digest()
    return int.from_bytes(digest, "big", signed=True)
