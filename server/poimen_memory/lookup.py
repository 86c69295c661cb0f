"""The one lookup service behind every surface (CLI, HTTP, LSP): by git location, by commit,
by author, by text, and every memory of a document for code lens.

Requests are parsed here from plain JSON-like objects, so every surface gives the same
errors (naming the field and value); results are one response model with one JSON form.
"""

from __future__ import annotations

import bisect
import hashlib
import re
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from poimen_memory.domain import (
    CommitInfo,
    CommitSha,
    ContentError,
    Level,
    MemoryNode,
    ProjectId,
    RepoId,
    Sha256Hash,
    check_repo_path,
)
from poimen_memory.gitio import (
    Blame,
    BlameCache,
    BlameLine,
    Blamer,
    GitError,
    GitRepo,
    NotARepository,
    OutsideRepository,
    UnsafeArgument,
    Untracked,
    map_buffer_to_head,
    normalize_remote,
)
from poimen_memory.store import (
    ConfigError,
    Evidence,
    IngestListener,
    Store,
    StoreUnavailable,
    embedded_dsn,
    resolve_dsn,
)

__all__ = [
    "ByAuthorRequest",
    "ByCommitRequest",
    "ByGitRequest",
    "Checkouts",
    "Citation",
    "ConfigError",
    "DocumentMemories",
    "IngestListener",
    "LineMemory",
    "LookupFailed",
    "LookupInputError",
    "LookupResult",
    "LookupService",
    "Memory",
    "NotInRepository",
    "QueryRequest",
    "StoreUnavailable",
    "build_service",
    "new_checkouts",
    "open_store",
    "project_for",
    "scratch_dir",
]

_HEX_PREFIX = re.compile(r"[0-9a-fA-F]{4,64}")
_MAX_TEXT = 1000
_MAX_LINE = 2**31 - 1


class LookupInputError(ContentError):
    """A request field with a bad value; the message names the field and the value."""

    def __init__(self, field_name: str, message: str) -> None:
        super().__init__(f"{field_name}: {message}")
        self.field = field_name


class LookupFailed(RuntimeError):
    """The lookup could not be answered (no checkout of the repository, git failed)."""


class NotInRepository(LookupFailed, LookupInputError):
    """A path given by the user that is no file or directory of a git work tree: bad input
    (exit 2, HTTP 422), and still a LookupFailed where a hover simply finds nothing."""

    def __init__(self, field_name: str, message: str) -> None:
        LookupInputError.__init__(self, field_name, message)


def _show(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


# -- requests ---------------------------------------------------------------------------------


def _obj(value: object) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise LookupInputError("arguments", f"expected a JSON object, got {_show(value)}")
    return value


def _opt_str(obj: Mapping[str, Any], key: str, limit: int = 512) -> str | None:
    value = obj.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise LookupInputError(key, f"expected a non-empty string, got {_show(value)}")
    if len(value) > limit:
        raise LookupInputError(key, f"longer than {limit} characters")
    if "\x00" in value:
        raise LookupInputError(key, "contains a NUL character")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise LookupInputError(key, "not valid Unicode text (lone surrogate)") from None
    return value


def _project(obj: Mapping[str, Any], default: ProjectId | None) -> ProjectId:
    value = obj.get("project")
    if value is None:
        if default is None:
            raise LookupInputError("project", "required")
        return default
    try:
        return ProjectId(value)
    except ContentError as exc:
        raise LookupInputError("project", str(exc).removeprefix("project: ")) from None


def _repo(obj: Mapping[str, Any], key: str = "repo") -> RepoId | None:
    value = _opt_str(obj, key)
    if value is None:
        return None
    try:
        return normalize_remote(value)
    except GitError as exc:
        raise LookupInputError(key, str(exc).removeprefix("repo: ")) from None


def _line(key: str, value: object, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise LookupInputError(key, f"expected an integer, got {_show(value)}")
    if not minimum <= value <= _MAX_LINE:
        raise LookupInputError(key, f"expected a line number >= {minimum}, got {value}")
    return value


def _commit_prefix(key: str, value: object) -> str:
    if not isinstance(value, str) or not _HEX_PREFIX.fullmatch(value):
        raise LookupInputError(key, f"expected 4 to 64 hex digits, got {_show(value)}")
    return value.lower()


DEFAULT_ANCHOR_LIMIT = 500
MAX_ANCHOR_LIMIT = 10_000


def _limit(obj: Mapping[str, Any], default: int, maximum: int) -> int:
    limit = obj.get("limit", default)
    if isinstance(limit, str) and limit.isdigit():
        limit = int(limit)
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= maximum:
        raise LookupInputError(
            "limit", f"expected an integer from 1 to {maximum}, got {_show(limit)}"
        )
    return limit


@dataclass(frozen=True, slots=True)
class ByGitRequest:
    """Memories at a code location: ``file`` lines ``line_start..line_end`` (0..0: all)."""

    project: ProjectId
    file: str
    line_start: int
    line_end: int
    repo: RepoId | None = None
    commit: str | None = None  # given: a literal lookup in that commit, no blame
    at: str | None = None  # blame as of this commit instead of HEAD

    @classmethod
    def from_json(cls, value: object, default_project: ProjectId | None = None) -> ByGitRequest:
        """Parse ``{"file", "line" | "lines": [a, b], "project", "repo", "commit_sha", "at"}``."""
        obj = _obj(value)
        if "file" not in obj:
            raise LookupInputError("file", "required")
        try:
            file = check_repo_path("file", obj["file"])
        except ContentError as exc:
            raise LookupInputError("file", str(exc).removeprefix("file: ")) from None
        if "line" in obj and "lines" in obj:
            raise LookupInputError("lines", "give either line or lines, not both")
        if "lines" in obj:
            pair = obj["lines"]
            if not (isinstance(pair, list | tuple) and len(pair) == 2):
                raise LookupInputError("lines", f"expected [start, end], got {_show(pair)}")
            start, end = _line("lines[0]", pair[0], 1), _line("lines[1]", pair[1], 1)
            if end < start:
                raise LookupInputError("lines", f"end {end} is before start {start}")
        else:
            start = end = _line("line", obj.get("line", 0), 0)
        commit = obj.get("commit_sha")
        at = obj.get("at")
        return cls(
            project=_project(obj, default_project),
            file=file,
            line_start=start,
            line_end=end,
            repo=_repo(obj),
            commit=None if commit is None else _commit_prefix("commit_sha", commit),
            at=None if at is None else _commit_prefix("at", at),
        )


@dataclass(frozen=True, slots=True)
class ByCommitRequest:
    """Every memory whose evidence is anchored in a commit (full id or unique prefix)."""

    project: ProjectId
    commit_sha: str
    repo: RepoId | None = None
    limit: int = DEFAULT_ANCHOR_LIMIT

    @classmethod
    def from_json(cls, value: object, default_project: ProjectId | None = None) -> ByCommitRequest:
        """Parse ``{"commit_sha", "project", "repo", "limit"}``."""
        obj = _obj(value)
        if "commit_sha" not in obj:
            raise LookupInputError("commit_sha", "required")
        return cls(
            project=_project(obj, default_project),
            commit_sha=_commit_prefix("commit_sha", obj["commit_sha"]),
            repo=_repo(obj),
            limit=_limit(obj, DEFAULT_ANCHOR_LIMIT, MAX_ANCHOR_LIMIT),
        )


@dataclass(frozen=True, slots=True)
class ByAuthorRequest:
    """Evidence from an author's commits (email or name, any case, .mailmap applied)."""

    project: ProjectId
    author: str
    repo: RepoId | None = None
    limit: int = DEFAULT_ANCHOR_LIMIT

    @classmethod
    def from_json(cls, value: object, default_project: ProjectId | None = None) -> ByAuthorRequest:
        """Parse ``{"author", "project", "repo", "limit"}``."""
        obj = _obj(value)
        author = _opt_str(obj, "author", 320)
        if author is None:
            raise LookupInputError("author", "required")
        return cls(
            project=_project(obj, default_project),
            author=author.strip(),
            repo=_repo(obj),
            limit=_limit(obj, DEFAULT_ANCHOR_LIMIT, MAX_ANCHOR_LIMIT),
        )


@dataclass(frozen=True, slots=True)
class QueryRequest:
    """Full-text search; with ``git_repo`` each result is cited by its evidence in that repo."""

    project: ProjectId
    query: str
    git_repo: RepoId | None = None
    limit: int = 20

    @classmethod
    def from_json(cls, value: object, default_project: ProjectId | None = None) -> QueryRequest:
        """Parse ``{"query", "project", "git_repo", "limit"}``."""
        obj = _obj(value)
        text = _opt_str(obj, "query", _MAX_TEXT)
        if text is None:
            raise LookupInputError("query", "required")
        limit = obj.get("limit", 20)
        if isinstance(limit, str) and limit.isdigit():
            limit = int(limit)
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 100:
            raise LookupInputError(
                "limit", f"expected an integer from 1 to 100, got {_show(limit)}"
            )
        return cls(
            project=_project(obj, default_project),
            query=text,
            git_repo=_repo(obj, "git_repo"),
            limit=limit,
        )


# -- the response model -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Citation:
    """A place in code that a memory's evidence is anchored to, with its commit."""

    repo: RepoId
    file: str
    line_start: int
    line_end: int
    commit: CommitInfo

    @property
    def git_ref(self) -> str:
        """``file:line``, ``file:start-end`` or ``file`` (whole file): ready to cite."""
        if self.line_start == 0:
            return self.file
        if self.line_start == self.line_end:
            return f"{self.file}:{self.line_start}"
        return f"{self.file}:{self.line_start}-{self.line_end}"

    def cite(self) -> str:
        """``src/kong/buffer.rs:42 (commit abc1234)``."""
        return f"{self.git_ref} (commit {self.commit.sha.short()})"

    def git_commit_json(self) -> dict[str, Any]:
        """The seed's ``git_commit`` object."""
        return {
            "sha": self.commit.sha.value,
            "message": self.commit.message,
            "author": self.commit.author_email,
            "author_name": self.commit.author_name,
            "date": self.commit.author_date.isoformat(),
        }

    def git_context_json(self) -> dict[str, Any]:
        """The seed's ``git_context`` object."""
        return {
            "repo": self.repo.value,
            "file": self.file,
            "line": self.line_start,
            "line_end": self.line_end,
            "commit_sha": self.commit.sha.value,
            "commit_msg": self.commit.message,
            "author": self.commit.author_email,
            "author_name": self.commit.author_name,
            "author_date": self.commit.author_date.isoformat(),
        }


@dataclass(frozen=True, slots=True)
class Memory:
    """A node as a lookup returns it: cited by its evidence (for L1/L2: the evidence below
    it), with the nodes above it, each carrying the same citation."""

    node: MemoryNode
    citation: Citation | None
    citations: tuple[Citation, ...] = ()
    parents: tuple[Memory, ...] = ()
    lines: tuple[int, ...] = ()  # current lines of the looked-up file it is attached to

    def to_json(self, with_parents: bool = True) -> dict[str, Any]:
        """The seed's node object."""
        c = self.citation
        out: dict[str, Any] = {
            "sha256": self.node.sha256.value,
            "level": self.node.level.value,
            "brief": self.node.brief,
            "text": self.node.text,
            "created_at": self.node.created_at.isoformat(),
            "query_id": None if self.node.query_id is None else self.node.query_id.value,
            "run_id": self.node.run_id.value,
            "git_ref": None if c is None else c.git_ref,
            "git_commit": None if c is None else c.git_commit_json(),
            "git_context": None if c is None else c.git_context_json(),
        }
        if self.citations:
            out["anchors"] = [a.git_context_json() for a in self.citations]
        if self.lines:
            out["lines"] = list(self.lines)
        if with_parents:
            out["parents"] = [p.to_json(with_parents=False) for p in self.parents]
        return out


@dataclass(frozen=True, slots=True)
class LookupResult:
    """The answer to any lookup: L0 evidence first (newest first), then the nodes above it."""

    repo: RepoId | None
    memories: tuple[Memory, ...]

    def to_json(self) -> dict[str, Any]:
        """The one JSON form every surface returns."""
        return {
            "repo": None if self.repo is None else self.repo.value,
            "nodes": [m.to_json() for m in self.memories],
        }

    @property
    def evidence(self) -> list[Memory]:
        """The L0 memories."""
        return [m for m in self.memories if m.node.level is Level.L0]


@dataclass(frozen=True, slots=True)
class LineMemory:
    """A memory on a line, as code lens needs it: which node, cited where (no text)."""

    sha: Sha256Hash
    citation: Citation


@dataclass(frozen=True, slots=True)
class DocumentMemories:
    """Every memory of a file, by current line (1-based), for code lens."""

    repo: RepoId
    path: str
    by_line: dict[int, tuple[LineMemory, ...]]

    @property
    def total(self) -> int:
        """Distinct L0 memories in the file."""
        return len({m.sha for ms in self.by_line.values() for m in ms})


def _citation(e: Evidence) -> Citation:
    return Citation(e.anchor.repo, e.anchor.file, e.anchor.line_start, e.anchor.line_end, e.commit)


def _citation_key(c: Citation) -> tuple[str, str, str, int, int]:
    return (c.repo.value, c.commit.sha.value, c.file, c.line_start, c.line_end)


def assemble(
    repo: RepoId | None,
    rows: Iterable[Evidence],
    lines_of: Mapping[Sha256Hash, Iterable[int]] | None = None,
) -> LookupResult:
    """Evidence rows -> one Memory per L0 node (its matched anchors as citations) followed by
    each node above them once, cited by the first evidence that reached it. Newest first."""
    by_node: dict[Sha256Hash, list[Evidence]] = {}
    for row in rows:
        by_node.setdefault(row.node.sha256, []).append(row)
    l0s: list[Memory] = []
    above: dict[Sha256Hash, tuple[MemoryNode, int, Citation]] = {}
    for sha, group in by_node.items():
        citations = sorted(
            {_citation_key(c): c for c in map(_citation, group)}.values(), key=_citation_key
        )
        primary = citations[0]
        ancestors = group[0].ancestors
        parents = tuple(Memory(node, primary) for node, _ in ancestors)
        lines = tuple(sorted(set(lines_of.get(sha, ()) if lines_of else ())))
        l0s.append(Memory(group[0].node, primary, tuple(citations), parents, lines))
        for node, depth in ancestors:
            if node.sha256 not in above or depth < above[node.sha256][1]:
                above[node.sha256] = (node, depth, primary)
    l0s.sort(key=lambda m: (m.node.created_at, m.node.sha256.value), reverse=True)
    uppers = sorted(
        above.values(),
        key=lambda t: (-t[0].level.rank, -t[0].created_at.timestamp(), t[0].sha256.value),
    )
    up_memories = [Memory(node, citation) for node, _, citation in uppers]
    # L1 before L2 in the flat list: evidence, then what was learned from it, then synthesis.
    up_memories.sort(key=lambda m: (m.node.level.rank, -m.node.created_at.timestamp()))
    return LookupResult(repo, tuple(l0s + up_memories))


# -- checkouts --------------------------------------------------------------------------------


class Checkouts:
    """The local work trees this process knows, by repository identity, each with a Blamer."""

    def __init__(
        self, cache: BlameCache, repo_override: str | None = None, detect_moves: bool = False
    ) -> None:
        self.cache = cache
        self.repo_override = repo_override
        self.detect_moves = detect_moves
        self._by_root: dict[Path, tuple[RepoId, Blamer]] = {}
        self._by_id: dict[RepoId, Blamer] = {}
        self._lock = threading.Lock()

    def add(self, path: str | Path, field_name: str = "repo") -> tuple[RepoId, Blamer]:
        """Register the work tree containing ``path``; NotInRepository if there is none,
        LookupFailed if git fails."""
        try:
            repo = GitRepo.discover(path, detect_moves=self.detect_moves)
            with self._lock:
                known = self._by_root.get(repo.root)
            if known is not None:
                return known
            identity = repo.identity(self.repo_override)
        except (NotARepository, OutsideRepository, UnsafeArgument) as exc:
            raise NotInRepository(field_name, str(exc).removeprefix("repo: ")) from None
        except GitError as exc:
            raise LookupFailed(str(exc)) from None
        blamer = Blamer(repo, self.cache)
        try:
            repo.blame_settings()  # reads blame config now, not on the first hover
        except GitError as exc:
            raise LookupFailed(str(exc)) from None
        with self._lock:
            self._by_root.setdefault(repo.root, (identity, blamer))
            self._by_id.setdefault(identity, blamer)
            return self._by_root[repo.root]

    def locate(self, path: str | Path) -> tuple[RepoId, Blamer, str]:
        """(identity, blamer, path in the tree) for a file path; NotInRepository outside a
        tree."""
        absolute = Path(path).expanduser().absolute()
        with self._lock:
            known = [
                entry for root, entry in self._by_root.items() if absolute.is_relative_to(root)
            ]
        if known:
            identity, blamer = known[0]
        else:
            identity, blamer = self.add(
                absolute if absolute.is_dir() else absolute.parent, field_name="file"
            )
        try:
            return identity, blamer, blamer.repo.relpath(absolute)
        except (NotARepository, OutsideRepository, UnsafeArgument) as exc:
            raise NotInRepository("file", str(exc)) from None
        except GitError as exc:
            raise LookupFailed(str(exc)) from None

    def blamer(self, repo: RepoId | None) -> tuple[RepoId, Blamer]:
        """The checkout of ``repo`` (or the only one known, when ``repo`` is None)."""
        with self._lock:
            if repo is not None:
                found = self._by_id.get(repo)
                if found is None:
                    known = ", ".join(sorted(r.value for r in self._by_id)) or "none"
                    raise LookupInputError(
                        "repo",
                        f"no local checkout of {repo.value!r} is known here (known: {known}); "
                        "give commit_sha for a lookup without blame",
                    )
                return repo, found
            if len(self._by_id) == 1:
                return next(iter(self._by_id.items()))
        raise LookupInputError(
            "repo",
            "required: this server knows several checkouts, or none"
            if self._by_id
            else "required: no local checkout is known; give commit_sha for a lookup without blame",
        )

    def identities(self) -> list[RepoId]:
        """Identities of the known checkouts."""
        with self._lock:
            return sorted(self._by_id)


# -- the service ------------------------------------------------------------------------------


_DOC_CACHE = 8  # documents' memories are big; lenses are what editors keep
_HOVER_CACHE = 4096


def project_for(repo: RepoId) -> ProjectId:
    """The project a repository's memories go to when none is configured: its last path
    segment (``github.com/org/poimen`` -> ``poimen``)."""
    name = repo.value.rstrip("/").rsplit("/", 1)[-1]
    try:
        return ProjectId(name)
    except ContentError:
        return ProjectId("default")


@dataclass
class LookupService:
    """Every lookup, over one store and the known checkouts."""

    store: Store
    checkouts: Checkouts
    default_project: ProjectId | None = None

    def __post_init__(self) -> None:
        self._docs: OrderedDict[tuple[ProjectId, RepoId, str, CommitSha], DocumentMemories] = (
            OrderedDict()
        )
        self._maps: OrderedDict[tuple[str, CommitSha, int], list[int | None]] = OrderedDict()
        self._hovers: OrderedDict[
            tuple[ProjectId, RepoId, CommitSha, str, int], LookupResult | None
        ] = OrderedDict()
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="poimen-lookup")
        self._digests: OrderedDict[tuple[str, int, int], str] = OrderedDict()

    # -- editor lookups ---------------------------------------------------------------------

    def _open_file(
        self, path: str | Path, max_bytes: int | None
    ) -> tuple[RepoId, Blamer, str, CommitSha, str] | None:
        """(identity, blamer, path in tree, HEAD, HEAD text) of a file worth blaming, or None
        for a file outside any repository, untracked, binary or over ``max_bytes``."""
        try:
            repo_id, blamer, rel = self.checkouts.locate(path)
            head = blamer.repo.head()
            data = blamer.head_blob(rel, head)
        except (LookupFailed, GitError):
            return None
        if not _worth_blaming(blamer.repo, data, max_bytes):
            return None
        return repo_id, blamer, rel, head, data.decode("utf-8", "replace")

    def _buffer_to_head(
        self, rel: str, head: CommitSha, head_text: str, buffer_text: str | None
    ) -> list[int | None] | None:
        """Buffer line (0-based) -> HEAD line; None when the buffer is HEAD's text."""
        if buffer_text is None or buffer_text == head_text:
            return None
        key = (rel, head, hash(buffer_text))
        with self._lock:
            hit = self._maps.get(key)
        if hit is None:
            hit = map_buffer_to_head(head_text, buffer_text)
            with self._lock:
                self._maps[key] = hit
                while len(self._maps) > 16:
                    self._maps.popitem(last=False)
        return hit

    def hover(
        self,
        path: str | Path,
        line: int,
        buffer_text: str | None = None,
        project: ProjectId | None = None,
        max_bytes: int | None = None,
    ) -> LookupResult | None:
        """The memories of one buffer line (1-based): mapped to HEAD in process, then through
        blame to its origin. None for a line without memories or one typed in the buffer.

        A buffer whose text is HEAD's (recognised by its hash) needs no blob; on a cold file
        the blob is read while ``git blame -L`` runs, so the first hover costs one blame."""
        try:
            repo_id, blamer, rel = self.checkouts.locate(path)
            head = blamer.repo.head()
        except (LookupFailed, GitError):
            return None
        head_line: int | None = line
        if buffer_text is not None:
            digest = self._digest(rel, buffer_text)
            known = blamer.text_sha(rel, head)
            if known != digest:
                # Unknown text: blame the line as if the buffer were HEAD while the blob is read.
                speculative = (
                    self._pool.submit(blamer.origin, rel, line, head) if known is None else None
                )
                try:
                    data = blamer.head_blob(rel, head)
                except GitError:
                    if speculative is not None:
                        speculative.cancel()
                    return None
                if not _worth_blaming(blamer.repo, data, max_bytes):
                    return None
                if speculative is not None and blamer.text_sha(rel, head) == digest:
                    try:
                        return self._answer(
                            blamer, repo_id, rel, head, line, line, project, speculative.result()
                        )
                    except GitError:
                        return None
                mapping = self._buffer_to_head(
                    rel, head, data.decode("utf-8", "replace"), buffer_text
                )
                if mapping is not None:
                    head_line = mapping[line - 1] if 1 <= line <= len(mapping) else None
        if head_line is None:
            return None
        try:
            origin = blamer.origin(rel, head_line, head, warm=True)
        except GitError:
            return None
        return self._answer(blamer, repo_id, rel, head, line, head_line, project, origin)

    def _digest(self, rel: str, text: str) -> str:
        """sha256 of a buffer's text, remembered per text (str hashes are cached on the
        object, so a warm hover does not rehash a large buffer)."""
        key = (rel, len(text), hash(text))
        with self._lock:
            found = self._digests.get(key)
        if found is None:
            found = hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()
            with self._lock:
                self._digests[key] = found
                while len(self._digests) > 64:
                    self._digests.popitem(last=False)
        return found

    def _answer(
        self,
        blamer: Blamer,
        repo_id: RepoId,
        rel: str,
        head: CommitSha,
        line: int,
        head_line: int,
        project: ProjectId | None,
        origin: BlameLine | None,
    ) -> LookupResult | None:
        blamer.warm(rel, head)
        if origin is None:
            return None
        scope = project or self.default_project or project_for(repo_id)
        key = (scope, repo_id, origin.commit, origin.orig_path, origin.orig_line)
        with self._lock:
            if key in self._hovers:
                self._hovers.move_to_end(key)
                return self._hovers[key]
        rows = self.store.evidence_at_line(
            scope, repo_id, origin.commit, origin.orig_path, origin.orig_line
        )
        result = assemble(repo_id, rows, {r.node.sha256: (line,) for r in rows})
        found = result if result.memories else None
        with self._lock:
            self._hovers[key] = found
            while len(self._hovers) > _HOVER_CACHE:
                self._hovers.popitem(last=False)
        return found

    def needs_blame(self, path: str | Path) -> bool:
        """Whether a document lookup of ``path`` would run a whole-file blame (for progress)."""
        try:
            _, blamer, rel = self.checkouts.locate(path)
            return blamer.cached(rel, blamer.repo.head()) is None
        except (LookupFailed, GitError):
            return False

    def document(
        self,
        path: str | Path,
        buffer_text: str | None = None,
        project: ProjectId | None = None,
        max_bytes: int | None = None,
    ) -> DocumentMemories | None:
        """Every memory of a file by buffer line (1-based): one blame and one store query per
        (file, HEAD), remembered; unsaved edits are mapped in process, so lenses move with
        their lines and a typed line has none."""
        opened = self._open_file(path, max_bytes)
        if opened is None:
            return None
        repo_id, blamer, rel, head, head_text = opened
        scope = project or self.default_project or project_for(repo_id)
        key = (scope, repo_id, rel, head)
        with self._lock:
            doc = self._docs.get(key)
        if doc is None:
            try:
                blame = blamer.blame_file(rel, head)
            except GitError:
                return None
            doc = self.for_document(scope, repo_id, blame)
            with self._lock:
                self._docs[key] = doc
                while len(self._docs) > _DOC_CACHE:
                    self._docs.popitem(last=False)
        mapping = self._buffer_to_head(rel, head, head_text, buffer_text)
        if mapping is None:
            return doc
        by_line: dict[int, tuple[LineMemory, ...]] = {}
        for index, head_line in enumerate(mapping):
            if head_line is not None and head_line in doc.by_line:
                by_line[index + 1] = doc.by_line[head_line]
        return DocumentMemories(repo_id, rel, by_line)

    def invalidate(self, repo: RepoId | None = None, project: ProjectId | None = None) -> int:
        """Forget remembered document memories (of ``repo``/``project``, or all); a count."""
        with self._lock:
            doomed = [
                k
                for k in self._docs
                if (repo is None or k[1] == repo) and (project is None or k[0] == project)
            ]
            for k in doomed:
                del self._docs[k]
            stale = [
                h
                for h in self._hovers
                if (repo is None or h[1] == repo) and (project is None or h[0] == project)
            ]
            for h in stale:
                del self._hovers[h]
        return len(doomed) + len(stale)

    # -- lookups by request -------------------------------------------------------------------

    def by_git(self, req: ByGitRequest) -> LookupResult:
        """Memories at a code location: the current lines mapped through blame to their origin
        (or, with ``commit``, the lines of that commit literally), plus the nodes above them."""
        if req.commit is not None:
            return self._by_git_literal(req)
        repo_id, blamer = self.checkouts.blamer(req.repo)
        try:
            at = None if req.at is None else blamer.repo.resolve_commit(req.at)
            if req.line_start == req.line_end and req.line_start > 0:
                origin = blamer.origin(req.file, req.line_start, at)
                if origin is None:
                    raise LookupInputError(
                        "line", f"{req.line_start} is beyond the end of {req.file}"
                    )
                rows = self.store.evidence_at_line(
                    req.project, repo_id, origin.commit, origin.orig_path, origin.orig_line
                )
                return assemble(repo_id, rows, {r.node.sha256: (req.line_start,) for r in rows})
            blame = blamer.blame_file(req.file, at)
        except UnsafeArgument as exc:
            raise LookupInputError("line", str(exc).removeprefix("line: ")) from None
        except Untracked as exc:
            raise NotInRepository("file", str(exc)) from None
        except GitError as exc:
            raise LookupFailed(str(exc)) from None
        if req.line_start == 0:
            lines = range(1, len(blame.lines) + 1)
        else:
            if req.line_end > len(blame.lines):
                raise LookupInputError(
                    "lines",
                    f"{req.line_end} is beyond the end of {req.file} ({len(blame.lines)} lines)",
                )
            lines = range(req.line_start, req.line_end + 1)
        return self._from_blame(req.project, repo_id, blame, lines)

    def _from_blame(
        self, project: ProjectId, repo_id: RepoId, blame: Blame, lines: Iterable[int]
    ) -> LookupResult:
        origins = [o for o in (blame.origin(n) for n in lines) if o is not None]
        rows = self.store.evidence_for_runs(project, repo_id, _runs(origins))
        matched, lines_of = _match(rows, origins)
        return assemble(repo_id, matched, lines_of)

    def _by_git_literal(self, req: ByGitRequest) -> LookupResult:
        assert req.commit is not None
        repo = req.repo
        commit = self._resolve_commit(req.project, repo, req.commit)
        if commit is None:
            return LookupResult(repo, ())
        if repo is None:
            ids = self.checkouts.identities()
            if len(ids) != 1:
                raise LookupInputError("repo", "required for a lookup by commit_sha")
            repo = ids[0]
        if req.line_start == req.line_end and req.line_start > 0:
            rows = self.store.evidence_at_line(req.project, repo, commit, req.file, req.line_start)
            return assemble(repo, rows)
        first, last = (1, _MAX_LINE) if req.line_start == 0 else (req.line_start, req.line_end)
        return assemble(
            repo, self.store.evidence_for_runs(req.project, repo, [(commit, req.file, first, last)])
        )

    def _resolve_commit(
        self, project: ProjectId, repo: RepoId | None, prefix: str
    ) -> CommitSha | None:
        if len(prefix) in (40, 64):
            return CommitSha(prefix)
        found = self.store.commits_by_prefix(project, repo, prefix)
        if len(found) > 1:
            raise LookupInputError("commit_sha", f"{prefix!r} is ambiguous; give more digits")
        return found[0] if found else None

    def by_commit(self, req: ByCommitRequest) -> LookupResult:
        """Every L0 anchored in the commit, plus the nodes above them."""
        commit = self._resolve_commit(req.project, req.repo, req.commit_sha)
        if commit is None:
            return LookupResult(req.repo, ())
        rows = self.store.evidence_for_commits(req.project, req.repo, [commit], req.limit)
        return assemble(req.repo, rows)

    def by_author(self, req: ByAuthorRequest) -> LookupResult:
        """L0 evidence from the author's commits, plus the nodes above it."""
        authors = {req.author}
        if req.repo is not None or len(self.checkouts.identities()) == 1:
            try:
                _, blamer = self.checkouts.blamer(req.repo)
                authors |= blamer.repo.mailmap(req.author)
            except (LookupInputError, GitError):
                pass  # no checkout to ask: match what was stored (already mailmap-normalized)
        rows = self.store.evidence_for_author(req.project, req.repo, authors, req.limit)
        return assemble(req.repo, rows)

    def query(self, req: QueryRequest) -> LookupResult:
        """Full-text search, best first; with ``git_repo`` each result is cited by its evidence
        in that repository (for L1/L2: the evidence they were built from)."""
        found = self.store.search(req.project, req.query, req.limit)
        nodes = [n for n, _ in found]
        walked = {
            w.node.sha256: w for w in self.store.walk_up(req.project, [n.sha256 for n in nodes])
        }
        citations: dict[Sha256Hash, Citation] = {}
        if req.git_repo is not None and nodes:
            below = self.store.evidence_below(req.project, [n.sha256 for n in nodes])
            l0s = {s for shas in below.values() for s in shas}
            first: dict[Sha256Hash, Citation] = {}
            for row in self.store.evidence_for_nodes(req.project, req.git_repo, l0s):
                c = _citation(row)
                if row.node.sha256 not in first or _citation_key(c) < _citation_key(
                    first[row.node.sha256]
                ):
                    first[row.node.sha256] = c
            for n in nodes:
                options = [first[s] for s in below.get(n.sha256, []) if s in first]
                if options:
                    citations[n.sha256] = min(options, key=_citation_key)
        memories = []
        for n in nodes:
            citation = citations.get(n.sha256)
            parents = tuple(
                Memory(w.node, citation) for w in walked.values() if n.sha256 in w.origins
            )
            memories.append(Memory(n, citation, (citation,) if citation else (), parents))
        return LookupResult(req.git_repo, tuple(memories))

    def for_document(self, project: ProjectId, repo_id: RepoId, blame: Blame) -> DocumentMemories:
        """Every memory of a blamed file, by current line: one store query for the anchors
        (and commits) over what blame says the lines came from; no node text is read."""
        index = _origin_index(blame.lines)
        by_line: dict[int, list[LineMemory]] = {}
        anchors, commits = self.store.anchors_for_runs(project, repo_id, _runs(blame.lines))
        # One LineMemory per (node, commit): lenses need who and when, not each anchor.
        shared: dict[tuple[str, str], LineMemory] = {}
        for node, sha, file, start, end in anchors:
            commit = commits[sha]
            lines = _covered(index, commit.sha, file, start, end)
            if not lines:
                continue
            memory = shared.get((node, sha))
            if memory is None:
                memory = shared[(node, sha)] = LineMemory(
                    Sha256Hash(node), Citation(repo_id, file, start, end, commit)
                )
            for line in lines:
                by_line.setdefault(line, []).append(memory)
        return DocumentMemories(
            repo_id,
            blame.path,
            {k: tuple(dict.fromkeys(v)) for k, v in sorted(by_line.items())},
        )


def _worth_blaming(repo: GitRepo, data: bytes, max_bytes: int | None) -> bool:
    """A text file within the size limit (binary and oversized files get no memories)."""
    return not repo.is_binary(data) and (max_bytes is None or len(data) <= max_bytes)


def _runs(origins: Iterable[BlameLine]) -> list[tuple[CommitSha, str, int, int]]:
    """Original lines grouped into runs ``(commit, path, first, last)`` of consecutive lines."""
    by_source: dict[tuple[CommitSha, str], list[int]] = {}
    for o in origins:
        by_source.setdefault((o.commit, o.orig_path), []).append(o.orig_line)
    runs: list[tuple[CommitSha, str, int, int]] = []
    for (commit, path), lines in by_source.items():
        lines.sort()
        start = prev = lines[0]
        for n in lines[1:]:
            if n != prev + 1:
                runs.append((commit, path, start, prev))
                start = n
            prev = n
        runs.append((commit, path, start, prev))
    return runs


def _origin_index(
    origins: Iterable[BlameLine],
) -> dict[tuple[CommitSha, str], list[tuple[int, int]]]:
    """(commit, original path) -> sorted (original line, current line)."""
    index: dict[tuple[CommitSha, str], list[tuple[int, int]]] = {}
    for o in origins:
        index.setdefault((o.commit, o.orig_path), []).append((o.orig_line, o.line))
    for entries in index.values():
        entries.sort()
    return index


def _covered(
    index: dict[tuple[CommitSha, str], list[tuple[int, int]]],
    commit: CommitSha,
    file: str,
    start: int,
    end: int,
) -> list[int]:
    """Current lines whose origin falls in an anchor (``start == 0``: the whole file)."""
    entries = index.get((commit, file), [])
    if start == 0:
        return [current for _, current in entries]
    lo = bisect.bisect_left(entries, (start, -1))
    hi = bisect.bisect_right(entries, (end, _MAX_LINE))
    return [current for _, current in entries[lo:hi]]


def _match(
    rows: Sequence[Evidence], origins: Sequence[BlameLine]
) -> tuple[list[Evidence], dict[Sha256Hash, list[int]]]:
    """Keep the evidence whose anchor covers an origin line; note which current lines."""
    index = _origin_index(origins)
    matched: list[Evidence] = []
    lines_of: dict[Sha256Hash, list[int]] = {}
    for row in rows:
        a = row.anchor
        hits = _covered(index, a.commit, a.file, a.line_start, a.line_end)
        if hits:
            matched.append(row)
            lines_of.setdefault(row.node.sha256, []).extend(hits)
    return matched, lines_of


def build_service(
    store: Store,
    repo_dirs: Iterable[str | Path] = (),
    default_project: ProjectId | None = None,
    repo_override: str | None = None,
    cache_path: Path | None = None,
) -> LookupService:
    """A LookupService with the given work trees registered (LookupFailed if one is not)."""
    from poimen_memory.gitio.cache import default_cache_path

    checkouts = Checkouts(BlameCache(cache_path or default_cache_path()), repo_override)
    for directory in repo_dirs:
        checkouts.add(directory)
    return LookupService(store, checkouts, default_project)


def open_store(
    dsn: str | None,
    *,
    timeout: float = 5.0,
    statement_timeout_ms: int | None = None,
    lazy: bool = False,
) -> Store:
    """The store named by ``dsn``, else by POIMEN_DSN or the config file, else the embedded
    one. ``lazy`` returns at once and connects on first use (and again after a failure)."""
    resolved = resolve_dsn(dsn)
    target = resolved.dsn if resolved is not None else embedded_dsn()
    return Store(target, timeout=timeout, statement_timeout_ms=statement_timeout_ms, lazy=lazy)


def new_checkouts(repo_override: str | None = None, detect_moves: bool = False) -> Checkouts:
    """An empty Checkouts over the user's persistent blame cache."""
    from poimen_memory.gitio.cache import default_cache_path

    return Checkouts(BlameCache(default_cache_path()), repo_override, detect_moves)


def scratch_dir() -> Path:
    """A directory for files shown to the user (rendered memories), under the cache dir."""
    from poimen_memory.gitio.cache import default_cache_path

    return default_cache_path().parent / "memories"
