"""A git work tree: discovery, identity, HEAD, objects, commit metadata and blame.

GitPython finds the repository, reads its configuration and refs, and reads objects through
its persistent ``cat-file`` processes; blame and history walks run the git CLI through a
GitRunner (never a shell, ``--`` before paths). Every value that reaches git is validated
first. Only GitError subclasses leave here.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from poimen_memory.domain import CommitInfo, CommitSha, ContentError, RepoId
from poimen_memory.gitio.blame import Blame, BlameEntry
from poimen_memory.gitio.blameconfig import config_values
from poimen_memory.gitio.blamerun import LineRanges
from poimen_memory.gitio.blamerunner import BlameRunner, looks_binary
from poimen_memory.gitio.errors import (
    EmptyRepository,
    GitError,
    GitFailed,
    NotARepository,
    OutsideRepository,
    UnknownCommit,
    UnsafeArgument,
    Untracked,
)
from poimen_memory.gitio.files import bounded_regular_file
from poimen_memory.gitio.identity import local_identity, normalize_remote
from poimen_memory.gitio.mailmap import is_plain_email, mailmapped
from poimen_memory.gitio.objects import CommitRecord, ObjectReader, tree_path_ok
from poimen_memory.gitio.refs import HeadReader
from poimen_memory.gitio.runner import GitRunner, check_not_option

if TYPE_CHECKING:
    import git

__all__ = ["GitRepo"]

log = logging.getLogger(__name__)

_HEX_PREFIX = re.compile(r"[0-9a-fA-F]{4,64}")
_FULL_ID = re.compile(r"[0-9a-f]{40}")


def _hex_names(names: Iterable[str]) -> list[str]:
    wanted = list(dict.fromkeys(names))
    for name in wanted:
        if not isinstance(name, str) or not _HEX_PREFIX.fullmatch(name):
            raise UnsafeArgument(f"commit_sha: expected 4 to 64 hex digits, got {name!r}")
    return wanted


def _rev_parse(runner: GitRunner, root: Path, *rev: str) -> CommitSha | None:
    """The commit ``git rev-parse --verify`` finds for ``rev`` (None: no such commit)."""
    done = runner.run(root, ["rev-parse", "--verify", "--quiet", *rev], ok_codes=(0, 1, 128))
    sha = done.stdout.decode("ascii", "replace").strip()
    return CommitSha(sha) if done.returncode == 0 and sha else None


def _commit_ids(runner: GitRunner, root: Path, shas: Iterable[CommitSha]) -> set[str]:
    """Which of ``shas`` are commits in the repository at ``root``, by one git process."""
    done = runner.run(
        root,
        ["cat-file", "--batch-check=%(objectname) %(objecttype)"],
        stdin="".join(f"{s.value}\n" for s in shas).encode("ascii"),
    )
    found = set()
    for line in done.stdout.decode("ascii", "replace").splitlines():
        name, _, kind = line.partition(" ")
        if kind == "commit":
            found.add(name)
    return found


def _repository_at(path: str | os.PathLike[str], runner: GitRunner) -> git.Repo:
    """The GitPython repository whose work tree holds ``path`` (a file or directory, which
    need not exist yet); NotARepository otherwise."""
    from poimen_memory.gitio.gitpython import open_repository

    runner.require()  # GitPython finds repositories without git: say now if it is missing
    try:
        start = Path(path).expanduser().resolve()
    except RuntimeError:  # ~name of a user this machine does not know
        raise NotARepository(f"{path}: no such user's home directory") from None
    except OSError as exc:
        raise NotARepository(f"{path}: {exc.strerror}") from None
    probe = start if start.is_dir() else start.parent
    while not probe.exists():
        probe = probe.parent
    return open_repository(probe, runner)


def _identity_of(gp: git.Repo, runner: GitRunner, root: Path) -> RepoId:
    """origin's (or the first remote's) URL normalized, else a local identity from the root
    commit (or from ``root``, for an empty repository)."""
    remotes: dict[str, str] = {}
    try:
        for remote in gp.remotes:
            remotes[remote.name] = str(remote.url)
    except (ValueError, AttributeError, KeyError):
        pass  # an unreadable remote section: fall back to the local identity
    if remotes:
        name = "origin" if "origin" in remotes else sorted(remotes)[0]
        try:
            return normalize_remote(remotes[name])
        except GitError:
            pass  # an unusable remote URL: fall back to the local identity
    roots = runner.run(root, ["rev-list", "--max-parents=0", "HEAD", "--"], ok_codes=(0, 128))
    found = sorted(roots.stdout.decode("ascii", "replace").split())
    return local_identity(found[0] if found else str(root))


def _commit_info(
    record: CommitRecord, identity: RepoId, mapped: dict[tuple[str, str], tuple[str, str]]
) -> CommitInfo:
    """``record`` as a CommitInfo of ``identity``, its author as ``mapped`` (.mailmap) says."""
    name, email = mapped.get((record.author_name, record.author_email), ("", ""))
    try:
        return CommitInfo(
            repo=identity,
            sha=CommitSha(record.sha),
            message=record.message.rstrip("\n").replace("\x00", ""),
            author_name=name or record.author_name,
            author_email=email or record.author_email,
            author_date=record.author_date,
        )
    except ContentError as exc:
        raise GitFailed(f"git: unreadable commit {record.sha}: {exc}") from None


@dataclass
class GitRepo:
    """A work tree at ``root`` (absolute, symlinks resolved)."""

    root: Path
    runner: GitRunner = field(default_factory=GitRunner)
    git_dir: Path | None = None
    common_dir: Path | None = None
    detect_moves: bool = False
    _repo: git.Repo | None = field(default=None, repr=False)
    _identity: RepoId | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self._repo is None:
            from poimen_memory.gitio.gitpython import open_repository

            self._repo = open_repository(self.root, self.runner)
        self.git_dir = self.git_dir or Path(self._repo.git_dir).resolve()
        self.common_dir = self.common_dir or Path(self._repo.common_dir).resolve()
        self._objects = ObjectReader(self._repo)
        self._head = HeadReader(self._repo, self.git_dir, self.common_dir)
        self._blames = BlameRunner(self, self._repo, self._objects)

    # -- discovery and identity ---------------------------------------------------------

    @classmethod
    def discover(
        cls,
        path: str | os.PathLike[str],
        runner: GitRunner | None = None,
        detect_moves: bool = False,
    ) -> GitRepo:
        """The work tree containing ``path`` (a file or directory); NotARepository otherwise."""
        runner = runner or GitRunner()
        found = _repository_at(path, runner)
        assert found.working_tree_dir is not None
        return cls(
            Path(found.working_tree_dir).resolve(), runner, detect_moves=detect_moves, _repo=found
        )

    def identity(self, override: str | None = None) -> RepoId:
        """The normalized identity: ``override`` if given, else origin's (or the first remote's)
        URL, else a local identity from the root commit (or the path, for an empty repo)."""
        if override:
            return normalize_remote(override)
        if self._identity is None:
            self._identity = _identity_of(self._gp, self.runner, self.root)
        return self._identity

    @property
    def _gp(self) -> git.Repo:
        assert self._repo is not None
        return self._repo

    def invalidate(self) -> None:
        """Read HEAD, the blame configuration and the files it names from disk again."""
        self._head.forget()
        self._blames.forget()

    def close(self) -> None:
        """Stop the object reader's git processes (restarted by the next read)."""
        self._objects.close()

    def warm(self) -> None:
        """Start the object reader's git process and read HEAD's commit through it now (a
        server does this when it registers the work tree), so that the first lookup does
        not wait for either. Nothing is raised: a lookup finds any problem again."""
        try:
            self._objects.data(self.head().value)
        except GitError as exc:
            log.debug("work tree %s not warmed: %s", self.root, exc)

    # -- paths ----------------------------------------------------------------------------

    def relpath(self, path: str | os.PathLike[str], *, real: bool = False) -> str:
        """``path`` (absolute, or relative to the root) as a '/'-separated path in the tree.

        Links are resolved first, so a link that points out of the work tree is refused
        (``real``: the caller has resolved them, with ``os.path.realpath``).
        """
        raw = Path(path)
        absolute = raw if raw.is_absolute() else self.root / raw
        try:
            resolved = absolute if real and raw.is_absolute() else absolute.resolve()
        except OSError as exc:
            raise OutsideRepository(f"{path}: {exc.strerror}") from None
        try:
            rel = resolved.relative_to(self.root)
        except ValueError:
            raise OutsideRepository(f"{path} is outside the repository at {self.root}") from None
        text = rel.as_posix()
        if text in ("", "."):
            raise OutsideRepository(f"{path} is the repository root, not a file")
        if text == ".git" or text.startswith(".git/"):
            raise OutsideRepository(f"{path} is inside .git")
        return text

    # -- revisions ------------------------------------------------------------------------

    def head(self) -> CommitSha:
        """The commit HEAD points at (detached or not); EmptyRepository when there is none.

        Resolved in process through GitPython and remembered while the ref files are
        unchanged (no git process per hover); anything unusual (reftable) asks git.
        """
        found = self._head.commit()
        if found is None:
            found = _rev_parse(self.runner, self.root, "HEAD^{commit}")
        if found is None:
            raise EmptyRepository(f"the repository at {self.root} has no commits yet")
        return found

    def resolve_commit(self, value: str) -> CommitSha:
        """A full commit id from a full id or a unique prefix (at least 4 hex digits)."""
        found = self.resolve_commits([value])[value]
        if found is None:
            raise UnknownCommit(
                f"commit_sha: {value!r} is not a commit in {self.root} (or is ambiguous)"
            )
        return found

    def resolve_rev(self, value: str) -> CommitSha:
        """The commit a revision expression names (``v1.2``, ``HEAD~3``, an id)."""
        check_not_option("at", value)
        found = _rev_parse(self.runner, self.root, "--end-of-options", f"{value}^{{commit}}")
        if found is None:
            raise UnknownCommit(f"at: {value!r} names no commit in {self.root}")
        return found

    def resolve_commits(self, names: Iterable[str]) -> dict[str, CommitSha | None]:
        """Full ids for many commit ids or unique prefixes (None: unknown or ambiguous).
        Anything but 4 to 64 hex digits is refused before git sees it."""
        out: dict[str, CommitSha | None] = {}
        for name in _hex_names(names):
            found = self._objects.commit_id(name.lower())
            out[name] = None if found is None else CommitSha(found)
        return out

    def is_ignored(self, path: str) -> bool:
        """Whether git ignores the work-tree ``path`` (a file it would never commit)."""
        check_not_option("file", path)
        done = self.runner.run(
            self.root,
            ["check-ignore", "-q", "--", path],
            ok_codes=(0, 1, 128),
            config=self._excludes_config(),
        )
        return done.returncode == 0

    def _excludes_config(self) -> tuple[str, ...]:
        # The user's own ignore rules count (a file they ignore everywhere is one they never
        # commit), but git opens core.excludesFile whatever it is: a FIFO named there would
        # make check-ignore wait for its timeout. Such a file is not read at all.
        values = [v for v in self.config_values("core", "excludesFile") if v]
        if not values:
            return ()
        path = self.root / os.path.expanduser(values[-1])
        if not os.path.lexists(path) or bounded_regular_file(str(path)):
            return ()
        return ("core.excludesFile=/dev/null",)

    def last_commit(self, path: str, rev: CommitSha) -> CommitSha:
        """The last commit at or before ``rev`` that touched ``path`` (Untracked if none)."""
        check_not_option("file", path)
        done = self.runner.run(self.root, ["rev-list", "-1", rev.value, "--", path])
        sha = done.stdout.decode("ascii", "replace").strip()
        if not sha:
            raise Untracked(f"{path} is not in commit {rev.short()}")
        return CommitSha(sha)

    def committed_at(self, rev: CommitSha) -> datetime:
        """When ``rev`` was committed (its committer date; a rebase or an amend sets it)."""
        done = self.runner.run(self.root, ["show", "-s", "--format=%ct", rev.value, "--"])
        try:
            return datetime.fromtimestamp(int(done.stdout.split()[0]), UTC)
        except (IndexError, ValueError, OverflowError, OSError):
            raise GitError(f"no commit time for {rev.short()}") from None

    def next_commit_touching(self, path: str, base: CommitSha, head: CommitSha) -> CommitSha | None:
        """The first commit after ``base`` on the way to ``head`` (its ancestry path) that
        touched ``path``; None when there is none, or ``base`` is not an ancestor of ``head``."""
        check_not_option("file", path)
        done = self.runner.run(
            self.root,
            ["rev-list", "--reverse", "--ancestry-path", f"{base.value}..{head.value}", "--", path],
            ok_codes=(0, 128),
        )
        if done.returncode != 0:
            return None
        first = done.stdout.split(b"\n", 1)[0].decode("ascii", "replace").strip()
        return CommitSha(first) if first else None

    # -- objects --------------------------------------------------------------------------

    def blob(self, rev: CommitSha, path: str) -> bytes:
        """The bytes of ``path`` at ``rev``; Untracked when it is not there."""
        check_not_option("file", path)
        data = self.blobs([(rev, path)])[(rev, path)]
        if data is None:
            raise Untracked(f"{path} is not in commit {rev.short()}")
        return data

    def blobs(
        self, specs: Iterable[tuple[CommitSha, str]]
    ) -> dict[tuple[CommitSha, str], bytes | None]:
        """The contents of many ``(commit, path)`` (None: not there, or not a file)."""
        out: dict[tuple[CommitSha, str], bytes | None] = {}
        for sha, path in dict.fromkeys(specs):
            found = self._objects.data(f"{sha.value}:{path}") if tree_path_ok(path) else None
            out[(sha, path)] = found[1] if found is not None and found[0] == "blob" else None
        return out

    def existing(
        self, specs: Iterable[tuple[CommitSha, str | None]]
    ) -> set[tuple[CommitSha, str | None]]:
        """Which of ``(commit, path)`` (a file) or ``(commit, None)`` (a commit) exist."""
        found: set[tuple[CommitSha, str | None]] = set()
        for sha, path in dict.fromkeys(specs):
            if path is None:
                if self._objects.commit_id(sha.value) == sha.value:
                    found.add((sha, path))
                continue
            if not tree_path_ok(path):
                continue
            header = self._objects.header(f"{sha.value}:{path}")
            if header is not None and header[1] == "blob":
                found.add((sha, path))
        return found

    def blob_id(self, rev: CommitSha | str, path: str) -> str | None:
        """The id of the blob at ``path`` in ``rev`` (None: no such file there)."""
        sha = rev.value if isinstance(rev, CommitSha) else rev
        if not tree_path_ok(path) or not _HEX_PREFIX.fullmatch(sha):
            return None
        header = self._objects.header(f"{sha}:{path}")
        return header[0] if header is not None and header[1] == "blob" else None

    def file_id(self, rev: CommitSha | str, path: str) -> str | None:
        """``blob_id`` found through the commit's trees (``rev`` a full commit id): a few
        small objects read on the process that reads contents, with no other started."""
        sha = rev.value if isinstance(rev, CommitSha) else rev
        if not tree_path_ok(path) or not _FULL_ID.fullmatch(sha):
            return None
        return self._objects.file_id(sha, path)

    def has_commits(self, shas: Iterable[CommitSha]) -> set[CommitSha]:
        """Which of ``shas`` are commits here: one ``cat-file --batch-check`` for many."""
        wanted = list(dict.fromkeys(shas))
        if len(wanted) <= 16:
            return {s for s, _ in self.existing((s, None) for s in wanted)}
        found = _commit_ids(self.runner, self.root, wanted)
        return {s for s in wanted if s.value in found}

    def commits(
        self, shas: Iterable[CommitSha], identity: RepoId | None = None
    ) -> dict[CommitSha, CommitInfo]:
        """Metadata of many commits (.mailmap applied to the author, one git process).

        Commits the repository does not have are absent from the result.
        """
        records = [r for r in map(self._objects.commit, dict.fromkeys(s.value for s in shas)) if r]
        if not records:
            return {}
        identity = identity or self.identity()
        contacts = [(r.author_name, r.author_email) for r in records]
        mapped = (
            mailmapped(self.runner, self.root, self.blame_config, contacts)
            if self._blames.settings().maps_authors
            else {}  # no mailmap for git to read: every author is as recorded
        )
        return {info.sha: info for info in (_commit_info(r, identity, mapped) for r in records)}

    def mailmap(self, author: str) -> set[str]:
        """``author`` (an email) and the canonical email and name .mailmap gives it, lowercased.

        A name, or anything that is not a plain email address, is returned as it is.
        """
        value = author.strip()
        if not is_plain_email(value) or not self._blames.settings().maps_authors:
            return {value.lower()}
        # .mailmap as git reads it (no link followed; mailmap.file and .blob pinned): ask git.
        mapped = mailmapped(self.runner, self.root, self.blame_config, [("", value)])
        name, email = mapped.get(("", value), ("", ""))
        return {value.lower(), *(v.lower() for v in (name, email) if v)}

    # -- blame ----------------------------------------------------------------------------

    def blame_args(
        self, rev: CommitSha, path: str, lines: LineRanges | None, *, incremental: bool = False
    ) -> list[str]:
        """The argument list of a blame of the whole file, one range or several (exposed so
        benchmarks run the very same command); ``incremental``: entries as git finds them."""
        return self._blames.args(rev, path, lines, incremental=incremental)

    def config_values(self, section: str, option: str) -> tuple[str, ...]:
        """Every value of ``section.option`` in the repository's configuration, in order."""
        return config_values(self._gp.config_reader(), section, option)

    def blame_config(self) -> tuple[str, ...]:
        """The ``key=value`` settings every blame of this repository runs with (the mailmap
        pinned): commands that must see what blame sees run with them too."""
        return self._blames.settings().config

    def ignored_revisions(self) -> frozenset[str]:
        """The commit ids blame ignores here (from the ignore-revs files in force)."""
        return self._blames.settings().ignored

    def shared_blame_fingerprint(self) -> str:
        """blame_fingerprint() without any path of this machine: equal in two clones whose
        blames are the same, so a blame can be shared between them."""
        return self._blames.settings().shared_fingerprint

    def blames_by_diff(self) -> bool:
        """Whether blame attributes every line a (non-merge) commit added to that commit: no
        ignore-revs in force and no move detection, so a commit's diff says what blame would."""
        return self._blames.by_diff()

    def blame_settings(self) -> bytes:
        """What besides history changes a blame (flags, .mailmap, ignore-revs), as a digest."""
        return self._blames.settings().fingerprint.encode("ascii")

    def blame_fingerprint(self) -> str:
        """blame_settings() as text: part of every blame cache key."""
        return self._blames.settings().fingerprint

    def blame(
        self,
        path: str,
        rev: CommitSha,
        lines: LineRanges | None = None,
        on_entry: Callable[[BlameEntry], None] | None = None,
        *,
        since: CommitSha | None = None,
    ) -> Blame:
        """Blame ``path`` as of ``rev`` (whole file, or only ``lines``: one range or several),
        parsed as it streams; ``on_entry`` (whole file) gets each entry as git finds it.
        ``since``: git walks no further back than that commit; the lines that reach it are
        its (boundary), numbered as in its version of the file."""
        return self._blames.blame(path, rev, lines, on_entry, since)

    def is_binary(self, data: bytes) -> bool:
        """git's heuristic: a NUL byte near the start."""
        return looks_binary(data)
