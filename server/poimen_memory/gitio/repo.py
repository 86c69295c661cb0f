"""A git work tree: discovery, identity, HEAD, blobs, commit metadata and blame.

Every git process goes through a GitRunner (never a shell, ``--`` before paths); every value
that reaches git's command line is validated first. Only GitError subclasses leave here.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path

from poimen_memory.domain import CommitInfo, CommitSha, ContentError, RepoId, parse_timestamp
from poimen_memory.gitio.blame import Blame, parse_porcelain
from poimen_memory.gitio.errors import (
    BinaryFile,
    EmptyRepository,
    GitError,
    GitFailed,
    NotARepository,
    OutsideRepository,
    UnknownCommit,
    UnsafeArgument,
    Untracked,
)
from poimen_memory.gitio.identity import local_identity, normalize_remote
from poimen_memory.gitio.runner import GitRunner, check_not_option, finish_stream

__all__ = ["GitRepo"]

_HEX_PREFIX = re.compile(r"[0-9a-fA-F]{4,64}")
_BLAME_FLAGS = ("--root",)
# Moved and copied lines: more history kept for reorganized code, at about twice the cost.
_MOVE_FLAGS = ("-M", "-C")
_NUL_PROBE = 8000  # git's own heuristic: a NUL in the first 8000 bytes means binary


@dataclass
class GitRepo:
    """A work tree at ``root`` (absolute, symlinks resolved)."""

    root: Path
    runner: GitRunner = field(default_factory=GitRunner)
    git_dir: Path | None = None
    common_dir: Path | None = None
    detect_moves: bool = False
    _identity: RepoId | None = field(default=None, repr=False)
    _ignore_revs: list[str] | None = field(default=None, repr=False)
    _ignore_file: Path | None = field(default=None, repr=False)

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
        start = Path(path).expanduser()
        try:
            start = start.resolve()
        except OSError as exc:
            raise NotARepository(f"{path}: {exc.strerror}") from None
        probe = start if start.is_dir() else start.parent
        while not probe.exists():
            probe = probe.parent
        try:
            done = runner.run(
                probe, ["rev-parse", "--show-toplevel", "--absolute-git-dir", "--git-common-dir"]
            )
        except GitFailed:
            raise NotARepository(f"{path} is not inside a git work tree") from None
        out = done.stdout.decode("utf-8", "surrogateescape").splitlines()
        if len(out) != 3 or not out[0]:
            raise NotARepository(f"{path} is not inside a git work tree (bare repository?)")
        top, git_dir, common = Path(out[0]).resolve(), Path(out[1]), Path(out[2])
        common = common if common.is_absolute() else (probe / common)
        return cls(
            top, runner, git_dir=git_dir, common_dir=common.resolve(), detect_moves=detect_moves
        )

    def identity(self, override: str | None = None) -> RepoId:
        """The normalized identity: ``override`` if given, else origin's (or the first remote's)
        URL, else a local identity from the root commit (or the path, for an empty repo)."""
        if override:
            return normalize_remote(override)
        if self._identity is None:
            self._identity = self._compute_identity()
        return self._identity

    def _compute_identity(self) -> RepoId:
        done = self.runner.run(
            self.root, ["config", "--get-regexp", r"^remote\..*\.url$"], ok_codes=(0, 1)
        )
        remotes: dict[str, str] = {}
        for line in done.stdout.decode("utf-8", "replace").splitlines():
            key, _, url = line.partition(" ")
            remotes[key.removeprefix("remote.").removesuffix(".url")] = url
        if remotes:
            name = "origin" if "origin" in remotes else sorted(remotes)[0]
            try:
                return normalize_remote(remotes[name])
            except GitError:
                pass  # an unusable remote URL: fall back to the local identity
        roots = self.runner.run(
            self.root, ["rev-list", "--max-parents=0", "HEAD", "--"], ok_codes=(0, 128)
        )
        found = sorted(roots.stdout.decode("ascii", "replace").split())
        return local_identity(found[0] if found else str(self.root))

    # -- paths ----------------------------------------------------------------------------

    def relpath(self, path: str | os.PathLike[str]) -> str:
        """``path`` (absolute, or relative to the root) as a '/'-separated path in the tree.

        Links are resolved first, so a link that points out of the work tree is refused.
        """
        raw = Path(path)
        absolute = raw if raw.is_absolute() else self.root / raw
        try:
            resolved = absolute.resolve()
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

        Read from the ref files in process when they are plain (no git process per hover);
        anything unusual (reftable, symbolic chains) asks git.
        """
        fast = self._read_head_files()
        if fast is not None:
            return fast
        done = self.runner.run(
            self.root, ["rev-parse", "--verify", "--quiet", "HEAD^{commit}"], ok_codes=(0, 1, 128)
        )
        sha = done.stdout.decode("ascii", "replace").strip()
        if done.returncode != 0 or not sha:
            raise EmptyRepository(f"the repository at {self.root} has no commits yet")
        return CommitSha(sha)

    def _read_head_files(self) -> CommitSha | None:
        if self.git_dir is None or self.common_dir is None:
            return None
        try:
            head = (self.git_dir / "HEAD").read_text("ascii").strip()
            if not head.startswith("ref: "):
                return CommitSha(head)
            ref = head.removeprefix("ref: ").strip()
            if not ref.startswith("refs/") or ".." in ref:
                return None
            for base in (self.git_dir, self.common_dir):
                loose = base / ref
                if loose.is_file():
                    return CommitSha(loose.read_text("ascii").strip())
            packed = self.common_dir / "packed-refs"
            if packed.is_file():
                for line in packed.read_text("ascii").splitlines():
                    sha, _, name = line.partition(" ")
                    if name == ref:
                        return CommitSha(sha)
        except (OSError, UnicodeDecodeError, ContentError):
            return None
        return None  # an unborn branch or another layout: let git decide

    def resolve_commit(self, value: str) -> CommitSha:
        """A full commit id from a full id or a unique prefix (at least 4 hex digits)."""
        if not isinstance(value, str) or not _HEX_PREFIX.fullmatch(value):
            raise UnsafeArgument(f"commit_sha: expected 4 to 64 hex digits, got {value!r}")
        done = self.runner.run(
            self.root,
            ["rev-parse", "--verify", "--quiet", f"{value.lower()}^{{commit}}"],
            ok_codes=(0, 1, 128),
        )
        sha = done.stdout.decode("ascii", "replace").strip()
        if done.returncode != 0 or not sha:
            raise UnknownCommit(
                f"commit_sha: {value!r} is not a commit in {self.root} (or is ambiguous)"
            )
        return CommitSha(sha)

    def last_commit(self, path: str, rev: CommitSha) -> CommitSha:
        """The last commit at or before ``rev`` that touched ``path`` (Untracked if none)."""
        check_not_option("file", path)
        done = self.runner.run(self.root, ["log", "-1", "--format=%H", rev.value, "--", path])
        sha = done.stdout.decode("ascii", "replace").strip()
        if not sha:
            raise Untracked(f"{path} is not in commit {rev.short()}")
        return CommitSha(sha)

    def blob(self, rev: CommitSha, path: str) -> bytes:
        """The bytes of ``path`` at ``rev``; Untracked when it is not there."""
        check_not_option("file", path)
        done = self.runner.run(
            self.root, ["cat-file", "blob", f"{rev.value}:{path}"], ok_codes=(0, 128)
        )
        if done.returncode != 0:
            raise Untracked(f"{path} is not in commit {rev.short()}")
        return done.stdout

    def existing(
        self, specs: Iterable[tuple[CommitSha, str | None]]
    ) -> set[tuple[CommitSha, str | None]]:
        """Which of ``(commit, path)`` (or ``(commit, None)``) exist, in one git process."""
        wanted = list(dict.fromkeys(specs))
        if not wanted:
            return set()
        lines = []
        for sha, path in wanted:
            if path is not None and ("\n" in path):
                lines.append(f"{sha.value}:missing-newline-path")
            else:
                lines.append(sha.value if path is None else f"{sha.value}:{path}")
        done = self.runner.run(
            self.root,
            ["cat-file", "--batch-check=%(objectname) %(objecttype)"],
            stdin=("\n".join(lines) + "\n").encode("utf-8", "surrogateescape"),
        )
        answers = done.stdout.decode("utf-8", "surrogateescape").splitlines()
        found: set[tuple[CommitSha, str | None]] = set()
        for spec, answer in zip(wanted, answers, strict=False):
            kind = answer.rsplit(" ", 1)[-1]
            if (
                not answer.endswith(" missing")
                and kind in ("commit", "blob")
                and (spec[1] is None) == (kind == "commit")
            ):
                found.add(spec)
        return found

    def resolve_commits(self, names: Iterable[str]) -> dict[str, CommitSha | None]:
        """Full ids for many commit ids or unique prefixes, in one git process (None: unknown
        or ambiguous). Anything but 4 to 64 hex digits is refused before git sees it."""
        wanted = list(dict.fromkeys(names))
        for name in wanted:
            if not isinstance(name, str) or not _HEX_PREFIX.fullmatch(name):
                raise UnsafeArgument(f"commit_sha: expected 4 to 64 hex digits, got {name!r}")
        if not wanted:
            return {}
        done = self.runner.run(
            self.root,
            ["cat-file", "--batch-check=%(objectname) %(objecttype)"],
            stdin="".join(f"{n.lower()}^{{commit}}\n" for n in wanted).encode("ascii"),
        )
        answers = done.stdout.decode("utf-8", "replace").splitlines()
        out: dict[str, CommitSha | None] = {}
        for name, answer in zip(wanted, answers, strict=False):
            sha, _, kind = answer.partition(" ")
            out[name] = CommitSha(sha) if kind == "commit" else None
        for name in wanted:
            out.setdefault(name, None)
        return out

    def blobs(
        self, specs: Iterable[tuple[CommitSha, str]]
    ) -> dict[tuple[CommitSha, str], bytes | None]:
        """The contents of many ``(commit, path)`` in one git process (None: not there)."""
        wanted = list(dict.fromkeys(specs))
        if not wanted:
            return {}
        request = bytearray()
        out: dict[tuple[CommitSha, str], bytes | None] = {}
        safe = []
        for sha, path in wanted:
            # Read from stdin, so no path can act as an option; a newline would split a line.
            try:
                line = f"{sha.value}:{path}\n".encode("utf-8", "surrogateescape")
            except UnicodeEncodeError:
                line = b""
            if not line or "\n" in path:
                out[(sha, path)] = None
                continue
            safe.append((sha, path))
            request += line
        wanted = safe
        if not wanted:
            return out
        done = self.runner.run(self.root, ["cat-file", "--batch"], stdin=bytes(request))
        data, pos = done.stdout, 0
        for spec in wanted:
            end = data.find(b"\n", pos)
            if end < 0:
                break
            header = data[pos:end].split(b" ")
            pos = end + 1
            if len(header) == 3 and header[1] == b"blob":
                size = int(header[2])
                out[spec] = data[pos : pos + size]
                pos += size + 1
            elif len(header) == 3:
                pos += int(header[2]) + 1  # a tree or another object: not a file
                out[spec] = None
            else:
                out[spec] = None  # "<name> missing" / "ambiguous"
        for spec in wanted:
            out.setdefault(spec, None)
        return out

    def commits(
        self, shas: Iterable[CommitSha], identity: RepoId | None = None
    ) -> dict[CommitSha, CommitInfo]:
        """Metadata of many commits in one git process (.mailmap applied to the author).

        Commits the repository does not have are absent from the result.
        """
        wanted = list(dict.fromkeys(shas))
        if not wanted:
            return {}
        present = [s for s, _ in self.existing((s, None) for s in wanted)]
        if not present:
            return {}
        identity = identity or self.identity()
        done = self.runner.run(
            self.root,
            [
                "log",
                "--no-walk=unsorted",
                "--stdin",
                "--format=%H%x00%aN%x00%aE%x00%aI%x00%B%x00%x1e",
            ],
            stdin=("\n".join(s.value for s in present) + "\n").encode("ascii"),
        )
        out: dict[CommitSha, CommitInfo] = {}
        for entry in done.stdout.split(b"\x1e"):
            fields = entry.strip(b"\n").split(b"\x00")
            if len(fields) < 5:
                continue
            sha, name, email, date, message = (f.decode("utf-8", "replace") for f in fields[:5])
            try:
                commit = CommitInfo(
                    repo=identity,
                    sha=CommitSha(sha),
                    message=message.rstrip("\n").replace("\x00", ""),
                    author_name=name,
                    author_email=email,
                    author_date=parse_timestamp("author_date", date),
                )
            except ContentError as exc:
                raise GitFailed(f"git log: unreadable commit {sha}: {exc}") from None
            out[commit.sha] = commit
        return out

    def mailmap(self, author: str) -> set[str]:
        """``author`` (an email) and the canonical email and name .mailmap gives it, lowercased.

        A name, or anything that is not a plain email address, is returned as it is.
        """
        value = author.strip()
        if not re.fullmatch(r"[^\s<>@]+@[^\s<>@]+", value):
            return {value.lower()}
        done = self.runner.run(self.root, ["check-mailmap", f"<{value}>"], ok_codes=(0, 128))
        out = {value.lower()}
        match = re.fullmatch(r"(.*?)\s*<([^>]*)>", done.stdout.decode("utf-8", "replace").strip())
        if done.returncode == 0 and match:
            out.add(match.group(2).lower())
            if match.group(1):
                out.add(match.group(1).lower())
        return out

    # -- blame ----------------------------------------------------------------------------

    def blame_args(self, rev: CommitSha, path: str, lines: tuple[int, int] | None) -> list[str]:
        """The argument list of a blame (exposed so benchmarks run the very same command)."""
        check_not_option("file", path)
        args = ["blame", "--porcelain", *self._flags(), *self._ignore_revs_args()]
        if lines is not None:
            start, end = lines
            if not (isinstance(start, int) and isinstance(end, int) and 1 <= start <= end):
                raise UnsafeArgument(f"line: expected 1 <= start <= end, got {lines!r}")
            args.append(f"-L{start},{end}")
        return [*args, rev.value, "--", path]

    def _flags(self) -> tuple[str, ...]:
        return (*_BLAME_FLAGS, *_MOVE_FLAGS) if self.detect_moves else _BLAME_FLAGS

    def _ignore_revs_args(self) -> list[str]:
        return self._blame_config()[0]

    def _blame_config(self) -> tuple[list[str], Path | None]:
        # git reads blame.ignoreRevsFile itself; the conventional file is used when unset.
        # Read once per GitRepo: a changed setting takes effect on the next discovery.
        if self._ignore_revs is None:
            configured = self.runner.run(
                self.root, ["config", "--get", "blame.ignoreRevsFile"], ok_codes=(0, 1)
            )
            conventional = self.root / ".git-blame-ignore-revs"
            if configured.returncode == 0:
                name = configured.stdout.decode("utf-8", "surrogateescape").strip()
                self._ignore_file = self.root / name
                self._ignore_revs = []
            elif conventional.is_file():
                self._ignore_file = conventional
                self._ignore_revs = ["--ignore-revs-file", str(conventional)]
            else:
                self._ignore_file = None
                self._ignore_revs = []
        return self._ignore_revs, self._ignore_file

    def blame_settings(self) -> bytes:
        """What besides history changes a blame: flags, .mailmap and the ignore-revs list."""
        args, ignore_file = self._blame_config()
        parts = [" ".join((*self._flags(), *args)).encode()]
        for f in (self.root / ".mailmap", ignore_file):
            try:
                parts.append(f.read_bytes() if f is not None else b"-")
            except OSError:
                parts.append(b"-")
        return b"\x00".join(parts)

    def blame(self, path: str, rev: CommitSha, lines: tuple[int, int] | None = None) -> Blame:
        """Blame ``path`` as of ``rev`` (whole file, or only ``lines``), parsed as it streams."""
        args = self.blame_args(rev, path, lines)
        with self.runner.stream(self.root, args) as proc:
            assert proc.stdout is not None
            try:
                result = parse_porcelain(proc.stdout, path, rev, complete=lines is None)
            except BinaryFile:
                raise
            except GitFailed:
                finish_stream(proc, args)
                raise
            try:
                finish_stream(proc, args)
            except GitFailed as exc:
                raise self._classify(exc, path, rev) from None
        if lines is None and not result.lines and self._looks_binary(rev, path):
            raise BinaryFile(f"{path} is a binary file")
        return self._mark_shallow(result)

    def _mark_shallow(self, blame: Blame) -> Blame:
        # With --root, git marks no boundary; in a shallow clone the grafted commits are one:
        # their lines may be older than the commit says.
        try:
            shallow = (self.common_dir or self.root / ".git") / "shallow"
            grafted = set(shallow.read_text("ascii").split()) if shallow.is_file() else set()
        except (OSError, UnicodeDecodeError):
            grafted = set()
        for sha in [s for s in blame.commits if s.value in grafted]:
            blame.commits[sha] = replace(blame.commits[sha], boundary=True)
        return blame

    def _classify(self, exc: GitFailed, path: str, rev: CommitSha) -> GitError:
        text = str(exc)
        if "no such path" in text or "no such ref" in text:
            return Untracked(f"{path} is not in commit {rev.short()}")
        if "has only" in text and "lines" in text:
            return UnsafeArgument(f"line: beyond the end of {path}")
        return exc

    def _looks_binary(self, rev: CommitSha, path: str) -> bool:
        try:
            return b"\x00" in self.blob(rev, path)[:_NUL_PROBE]
        except GitError:
            return False

    def is_binary(self, data: bytes) -> bool:
        """git's heuristic: a NUL byte near the start."""
        return b"\x00" in data[:_NUL_PROBE]
