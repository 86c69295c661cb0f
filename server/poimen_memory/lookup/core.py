"""What every part of the lookup service shares: the store, the known checkouts, the
settings, the resolver of pending anchors, the caches (each a Memo, bounded by
``CACHE_SIZES``), and the rules every lookup follows to decide its project and repository."""

from __future__ import annotations

import hashlib
import logging
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from poimen_memory.domain import CommitSha, ContentError, ProjectId, RepoId
from poimen_memory.errors import StoreUnavailable, may_wait
from poimen_memory.gitio import Blamer, GitError, GitRepo, blob_id_of
from poimen_memory.lookup.checkouts import Checkouts
from poimen_memory.lookup.errors import LookupInputError
from poimen_memory.lookup.memo import Memo
from poimen_memory.lookup.project import decide_project
from poimen_memory.lookup.requests import LookupRequest, WorkTreePath
from poimen_memory.lookup.results import DocumentMemories, LookupResult
from poimen_memory.lookup.rewrites import file_hashes
from poimen_memory.settings import Settings
from poimen_memory.store import Store

__all__ = ["CACHE_SIZES", "FileAt", "LookupCore", "PendingResolver", "TextFacts"]

log = logging.getLogger("poimen_memory.lookup")

# Anchors lines remembered before they were committed, once a commit holds them: (project,
# repository, its blamer, file, HEAD) -> anchors added. Set by the layer that writes them.
PendingResolver = Callable[[ProjectId, RepoId, Blamer, str, CommitSha], int]


@dataclass(frozen=True, slots=True)
class FileAt:
    """A file of a repository at a commit, as a lookup answers for a project: where the
    memories of its lines are looked for."""

    project: ProjectId
    repo_id: RepoId
    blamer: Blamer
    file: str
    rev: CommitSha


# Every in-memory cache of the service, by name, with its bound (entries).
CACHE_SIZES = {
    "documents": 8,  # a document's memories are big; the lenses built from them are kept
    "buffer_maps": 16,  # buffer line -> HEAD line, per (file, HEAD, buffer text)
    "hovers": 4096,  # answers per blame origin
    "digests": 64,  # sha256, size and line count of buffer texts
    "line_hashes": 16,  # text hashes of a file's lines at HEAD (for rewritten commits)
    "pending_files": 64,  # files with remembered lines waiting for a commit, per HEAD
    "head_facts": 256,  # size, line count and binariness of files at HEAD (the limits)
    "quiet_files": 1024,  # files at HEAD where no memory of the project can be found
}


@dataclass(frozen=True, slots=True)
class TextFacts:
    """What the limits look at in a text, its sha256 (to recognise HEAD's text) and the id
    git gives it as a file (to recognise HEAD's text by the id in HEAD's tree, unread)."""

    sha256: str
    size: int
    lines: int
    binary: bool
    git_id: str = ""

    @classmethod
    def of(cls, repo: GitRepo, data: bytes, hashed: bool = True) -> TextFacts:
        """The facts of ``data`` (lines as git counts them; ``hashed``: with its sha256 and
        its id as git's file)."""
        lines = data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)
        digest = hashlib.sha256(data).hexdigest() if hashed else ""
        git_id = blob_id_of(data) if hashed else ""
        return cls(digest, len(data), lines, repo.is_binary(data), git_id)

    def within(self, max_bytes: int | None, max_lines: int | None) -> bool:
        """A text file within both limits."""
        return (
            not self.binary
            and (max_bytes is None or self.size <= max_bytes)
            and (max_lines is None or self.lines <= max_lines)
        )


class LookupCore:
    """The state the parts of the lookup service share, and the rules they all follow.

    The caches are keyed by project and repository where the answer depends on them
    (``documents`` and ``hovers`` start with both, so ``invalidate`` can pick them)."""

    def __init__(
        self,
        store: Store,
        checkouts: Checkouts,
        settings: Settings,
        pending: PendingResolver | None,
    ) -> None:
        self.store = store
        self.checkouts = checkouts
        self.settings = settings
        self.pending = pending
        # (project, repo, file, HEAD) -> the file's memories by HEAD line.
        self.documents: Memo[tuple[ProjectId, RepoId, str, CommitSha], DocumentMemories] = Memo(
            CACHE_SIZES["documents"]
        )
        # (file, HEAD, hash of the buffer text) -> HEAD line of each buffer line.
        self.buffer_maps: Memo[tuple[str, CommitSha, int], list[int | None]] = Memo(
            CACHE_SIZES["buffer_maps"]
        )
        # (project, repo, commit, original path, original line, history) -> the answer
        # (one without memories stands for none).
        self.hovers: Memo[tuple[ProjectId, RepoId, CommitSha, str, int, int], LookupResult] = Memo(
            CACHE_SIZES["hovers"]
        )
        # (file, length, hash of the buffer text) -> its facts.
        self.digests: Memo[tuple[str, int, int], TextFacts] = Memo(CACHE_SIZES["digests"])
        # (work tree, file, commit) -> the text hash of each line, and how often each occurs.
        self.line_hashes: Memo[
            tuple[str, str, CommitSha], tuple[list[int | None], Counter[int | None]]
        ] = Memo(CACHE_SIZES["line_hashes"])
        # (project, repo, HEAD) -> files with lines waiting for a commit, not yet looked at.
        self.pending_files: Memo[tuple[ProjectId, RepoId, CommitSha], set[str]] = Memo(
            CACHE_SIZES["pending_files"]
        )
        # (project, repo, HEAD, file) -> settling of its pending anchors under way.
        self._settling: dict[tuple[ProjectId, RepoId, CommitSha, str], threading.Event] = {}
        self._settling_lock = threading.Lock()
        # (work tree, file, HEAD) -> the facts of the file at HEAD.
        self.head_facts: Memo[tuple[str, str, CommitSha], TextFacts] = Memo(
            CACHE_SIZES["head_facts"]
        )
        # (project, repo, file, HEAD) -> True when no memory can be found in the file.
        self.quiet_files: Memo[tuple[ProjectId, RepoId, str, CommitSha], bool] = Memo(
            CACHE_SIZES["quiet_files"]
        )

    # -- the project and repository of a lookup ---------------------------------------------

    def project_for_repo(self, repo: RepoId) -> ProjectId:
        """The project a repository's lookups go to when a request names none (the one
        project rule: the settings, else derived from the repository's identity)."""
        found = decide_project(self.settings, repo).project
        assert found is not None  # a repository always gives one
        return found

    def project_of(self, req: LookupRequest) -> ProjectId:
        """The project of a request (the one project rule): named in it, else the settings',
        else derived from the repository it names, or from the only one this service knows;
        ``project: required`` when none of these decides it."""
        repo = getattr(req, "repo", None) or getattr(req, "git_repo", None)
        identity: RepoId | None = None
        if repo is not None and req.project is None and self.settings.project is None:
            identity = self.checkouts.identity(repo, "repo")
        elif repo is None:
            known = self.checkouts.identities()
            identity = known[0] if len(known) == 1 else None
        found = decide_project(self.settings, identity, req.project).project
        if found is None:
            raise LookupInputError(
                "project",
                "required: no project is set (POIMEN_PROJECT, --project, the config file) and "
                "no single repository to derive it from",
            )
        return found

    def known_repo(
        self,
        project: ProjectId,
        repo: RepoId | WorkTreePath | None,
        field_name: str = "repo",
    ) -> RepoId | None:
        """A request's repository as an identity: a path is resolved to the known work tree
        it is in; an identity must be a known work tree's or one ``project`` has memories in.
        LookupInputError names the field and the value otherwise."""
        if repo is None:
            return None
        identity = self.checkouts.identity(repo, field_name)
        if self.checkouts.has(identity) or self.store.repo_known(project, identity):
            return identity
        listed = sorted(
            {r.value for r in self.store.project_repos(project)}
            | {r.value for r in self.checkouts.identities()}
        )
        raise LookupInputError(
            field_name,
            f"{identity.value!r} is not known here: no work tree of it, and project "
            f"{project.value!r} has no memories in it (known: {', '.join(listed) or 'none'})",
        )

    def resolve_commit(
        self, project: ProjectId, repo: RepoId | None, prefix: str
    ) -> CommitSha | None:
        """The commit a full sha or a prefix names among the commits of ``project`` (and
        ``repo``) with memories; None when none does, ``commit_sha`` when several do."""
        if len(prefix) in (40, 64):
            return CommitSha(prefix)
        found = self.store.commits_by_prefix(project, repo, prefix)
        if len(found) > 1:
            raise LookupInputError("commit_sha", f"{prefix!r} is ambiguous; give more digits")
        return found[0] if found else None

    # -- what is remembered -----------------------------------------------------------------

    def invalidate(self, repo: RepoId | None = None, project: ProjectId | None = None) -> int:
        """Forget every remembered answer of ``repo``/``project`` (None: any), and the buffer
        mappings and digests; returns how many answers were dropped."""

        def matches(key: tuple[Any, ...]) -> bool:
            return (repo is None or key[1] == repo) and (project is None or key[0] == project)

        dropped = self.documents.drop_where(matches) + self.hovers.drop_where(matches)
        self.quiet_files.drop_where(matches)
        self.buffer_maps.clear()
        self.digests.clear()
        return dropped

    def settle_pending(
        self,
        project: ProjectId | None,
        repo_id: RepoId,
        blamer: Blamer,
        rel: str,
        head: CommitSha,
    ) -> None:
        """Anchor lines remembered in ``rel`` before they were committed, if a commit now
        holds them: looked at once per (file, HEAD), with one query per (repository, HEAD)
        for the files that have any. A failure leaves them waiting and the lookup goes on."""
        if self.pending is None:
            return
        scope = project or self.project_for_repo(repo_id)

        def compute() -> set[str] | None:
            try:
                return self.store.pending_files(scope, repo_id)
            except (StoreUnavailable, ContentError) as exc:
                log.debug("pending anchors of %s not read: %s", repo_id, exc)
                return None

        files = self.pending_files.get_or_compute((scope, repo_id, head), compute)
        if files is None:
            return
        key = (scope, repo_id, head, rel)
        with self._settling_lock:
            if rel not in files and key not in self._settling:
                return
        may_wait()  # settling writes to the store; waiting for it waits too
        with self._settling_lock:
            # Looked at once per HEAD, whatever comes of it: of lookups at once one settles,
            # and the others wait for it (their answers must see what it anchors).
            settling = self._settling.get(key)
            mine = settling is None and rel in files
            if mine:
                files.discard(rel)
                settling = self._settling[key] = threading.Event()
        if settling is None:
            return
        if not mine:
            settling.wait()
            return
        try:
            added = self.pending(scope, repo_id, blamer, rel, head)
            if added:
                self.invalidate(repo_id, scope)
        except (StoreUnavailable, ContentError, GitError) as exc:
            log.info("pending anchors of %s not resolved: %s", rel, exc)
        finally:
            with self._settling_lock:
                self._settling.pop(key, None)
            settling.set()

    def hashes_at(
        self, blamer: Blamer, rel: str, rev: CommitSha
    ) -> tuple[list[int | None], Counter[int | None]] | None:
        """The text hash of each line of ``rel`` at ``rev``, and how often each occurs (None
        when git cannot read it); remembered per (work tree, file, commit)."""

        def compute() -> tuple[list[int | None], Counter[int | None]] | None:
            try:
                by_line = file_hashes(blamer.head_blob(rel, rev))
            except GitError:
                return None
            return by_line, Counter(by_line)

        key = (str(blamer.repo.root), rel, rev)
        return self.line_hashes.get_or_compute(key, compute)

    def quiet(
        self, project: ProjectId, repo_id: RepoId, blamer: Blamer, rel: str, head: CommitSha
    ) -> bool:
        """Whether no memory of ``project`` can be found on any line of ``rel`` at ``head``,
        known without blaming it: no anchor at that path, none pending there, none anywhere
        in the repository holding one of its line texts (``Store.file_may_have_memories``),
        and the lines of every anchor whose texts cannot tell were recorded at another path
        that is still a file at ``head`` (``_kept_in_place``). A line's memories come from an
        anchor covering its origin, whose texts hold the line's text (blame keeps a line only
        while its text stays), or from a rewritten commit's anchor found by that text.
        Remembered per (project, repository, file, HEAD), forgotten when memories arrive.
        False whenever it cannot tell (git or the store failing): the lookup goes on."""

        def compute() -> bool | None:
            try:
                # First without the texts (no hashing): a file with memories stops here.
                probe = self.store.file_may_have_memories(project, repo_id, rel, None)
                if probe.may or not _kept_in_place(blamer, probe.untexted, rel, head):
                    return False
                hashes = self.hashes_at(blamer, rel, head)
                if hashes is None:
                    return None
                texts = [h for h in hashes[1] if h is not None]
                return not self.store.file_may_have_memories(project, repo_id, rel, texts).may
            except (StoreUnavailable, ContentError, GitError) as exc:
                log.debug("could not tell whether %s has memories: %s", rel, exc)
                return None

        return bool(self.quiet_files.get_or_compute((project, repo_id, rel, head), compute))

    def forget_pending(self, repo: RepoId, project: ProjectId) -> None:
        """Look for pending anchors of ``repo`` again (something was just remembered)."""
        self.pending_files.drop_where(lambda key: key[:2] == (project, repo))


def _kept_in_place(blamer: Blamer, paths: frozenset[str] | None, rel: str, head: CommitSha) -> bool:
    """Whether the lines of anchors recorded at ``paths`` (whose texts cannot tell where
    they went) cannot be in ``rel``: it is not one of them, each is still a file at ``head``
    and blame does not follow lines across files (``blame.detectMoves``). Lines leave a path
    only with the file (git follows a rename when the old path is gone); a path renamed and
    made again later is the case this cannot see, where a memory on such lines is missed,
    never misplaced. False when there are too many paths to check (None)."""
    if paths is None or rel in paths:
        return False
    if not paths:
        return True
    if blamer.repo.detect_moves:
        return False
    wanted = [(head, path) for path in sorted(paths)]
    return len(blamer.repo.existing(wanted)) == len(wanted)
