"""The local work trees a process knows, by repository identity, each with its Blamer."""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path

from cachetools import LRUCache

from poimen_memory.domain import ProjectId, RepoId
from poimen_memory.errors import may_wait
from poimen_memory.gitio import (
    BlameCache,
    Blamer,
    GitError,
    GitRepo,
    NotARepository,
    OutsideRepository,
    UnsafeArgument,
)
from poimen_memory.gitio.shared import SharedBlames
from poimen_memory.lookup.errors import LookupFailed, LookupInputError, NotInRepository
from poimen_memory.lookup.requests import WorkTreePath
from poimen_memory.lookup.shared_blames import SharedBlameGate, StoreSharedBlames
from poimen_memory.store import Store

__all__ = ["Checkouts", "identity_in", "identity_of", "repository_of"]

LOCATED = 1024  # file paths remembered with where they are


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
        self._shared: Callable[[RepoId], SharedBlames] | None = None
        self._gate: SharedBlameGate | None = None
        self.find_timeout: float | None = None
        """Set: a work tree not known yet is found in a daemon thread, waited for this many
        seconds (a read of a FIFO in its .git never ends, and its thread cannot be
        stopped); None: found in the caller's thread."""
        self._finding: dict[Path, tuple[Future[tuple[RepoId, Blamer]], bool]] = {}
        # A file path as asked -> the file it named ((device, inode)) and where it is: asked
        # again (each hover), one stat() shows it still names that file (no realpath, one
        # lstat per component, each time). Emptied when a work tree is registered.
        self._located: LRUCache[str, tuple[tuple[int, int], tuple[RepoId, Blamer, str]]] = LRUCache(
            LOCATED
        )

    def share_through(self, store: Store, project: Callable[[RepoId], ProjectId]) -> None:
        """Share whole-file blames through ``store`` (the project of each repository as
        ``project`` says), for every checkout known now and later."""
        gate = SharedBlameGate(store)

        def shared_for(identity: RepoId) -> SharedBlames:
            return StoreSharedBlames(gate, lambda: project(identity), identity)

        with self._lock:
            self._gate = gate
            self._shared = shared_for
            for identity, blamer in self._by_root.values():
                blamer.shared = shared_for(identity)

    def flush(self, timeout: float = 10.0) -> None:
        """Wait for blames being shared to be written (a command about to exit)."""
        if self._gate is not None:
            self._gate.flush(timeout)

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
        blamer = Blamer(repo, self.cache, self._shared(identity) if self._shared else None)
        try:
            repo.blame_settings()  # reads blame config now, not on the first hover
        except GitError as exc:
            raise LookupFailed(str(exc)) from None
        with self._lock:
            self._by_root.setdefault(repo.root, (identity, blamer))
            self._by_id.setdefault(identity, blamer)
            self._located.clear()  # a tree inside a known one takes its files
            return self._by_root[repo.root]

    def locate(self, path: str | Path) -> tuple[RepoId, Blamer, str]:
        """(identity, blamer, path in the tree) for a file path; NotInRepository outside a
        tree. Remembered per path while it names the same file (device and inode)."""
        asked = os.fspath(path)
        try:
            seen = os.stat(asked)
        except (OSError, ValueError):
            found = None  # not a file yet (a new buffer), or a name the system refuses
        else:
            found = (seen.st_dev, seen.st_ino)
            with self._lock:
                hit = self._located.get(asked)
            if hit is not None and hit[0] == found:
                return hit[1]
        where = self._locate(path)
        if found is not None:
            with self._lock:
                self._located[asked] = (found, where)
        return where

    def _locate(self, path: str | Path) -> tuple[RepoId, Blamer, str]:
        try:
            absolute = _real(Path(path).expanduser())
        except RuntimeError:  # ~name of a user this machine does not know
            raise NotInRepository("file", f"{str(path)!r}: no such user's home") from None
        except (OSError, ValueError) as exc:
            raise NotInRepository("file", f"{str(path)!r}: {exc}") from None
        with self._lock:
            known = [
                (len(root.parts), entry)
                for root, entry in self._by_root.items()
                if absolute.is_relative_to(root)
            ]
        if known:  # the innermost work tree holding the file (a nested one owns its files)
            identity, blamer = max(known, key=lambda found: found[0])[1]
        else:
            may_wait()
            identity, blamer = self._find(absolute if absolute.is_dir() else absolute.parent)
        try:
            return identity, blamer, blamer.repo.relpath(absolute, real=True)
        except (NotARepository, OutsideRepository, UnsafeArgument) as exc:
            raise NotInRepository("file", str(exc)) from None
        except GitError as exc:
            raise LookupFailed(str(exc)) from None

    def _find(self, directory: Path) -> tuple[RepoId, Blamer]:
        """``add`` for a file's directory, within ``find_timeout`` seconds when it is set: a
        search past it fails with LookupFailed, and later ones for that directory fail at
        once until it ends (one thread per directory, however often it is asked)."""
        timeout = self.find_timeout
        if timeout is None:
            return self.add(directory, field_name="file")
        with self._lock:
            finding, late = self._finding.get(directory, (None, False))
            if finding is None:
                finding = Future()
                self._finding[directory] = (finding, False)
                threading.Thread(
                    target=self._search, args=(directory, finding), name="poimen-find", daemon=True
                ).start()
        try:
            return finding.result(timeout=0 if late else timeout)
        except FutureTimeout:
            with self._lock:
                if directory in self._finding:
                    self._finding[directory] = (finding, True)
            raise LookupFailed(
                f"{directory}: its git repository did not answer within {timeout:g} s"
            ) from None

    def _search(self, directory: Path, finding: Future[tuple[RepoId, Blamer]]) -> None:
        try:
            finding.set_result(self.add(directory, field_name="file"))
        except BaseException as exc:  # handed to whoever waits
            finding.set_exception(exc)
        finally:
            with self._lock:
                self._finding.pop(directory, None)

    def work_tree(self, path: WorkTreePath, field_name: str = "repo") -> RepoId:
        """The identity of the known work tree ``path`` is in (its root or any directory
        below); LookupInputError naming ``field_name`` and the known work trees otherwise."""
        try:
            given = Path(path.value).expanduser()
        except RuntimeError:  # ~name of a user this machine does not know
            raise LookupInputError(field_name, f"{path.value!r}: no such user's home") from None
        # The path the system resolves: links followed, then ``..`` taken from what they lead
        # to. ``/x/a/../b`` is ``/x/b``, never work tree ``a``.
        real: Path | None = None
        with contextlib.suppress(OSError, RuntimeError, ValueError):
            real = _real(given)
        with self._lock:
            for root, (identity, _) in self._by_root.items():
                if real is not None and real.is_relative_to(root):
                    return identity
            roots = sorted(str(r) for r in self._by_root)
        known = ", ".join(roots) or "none"
        raise LookupInputError(
            field_name, f"{path.value!r} is not in a work tree known here (known: {known})"
        )

    def identity(self, repo: RepoId | WorkTreePath, field_name: str = "repo") -> RepoId:
        """``repo`` as a repository identity: a path is resolved to its work tree's."""
        return self.work_tree(repo, field_name) if isinstance(repo, WorkTreePath) else repo

    def has(self, repo: RepoId) -> bool:
        """Whether a work tree of ``repo`` is known here."""
        with self._lock:
            return repo in self._by_id

    def blamer(self, repo: RepoId | WorkTreePath | None) -> tuple[RepoId, Blamer]:
        """The checkout of ``repo`` (an identity or a path in a known work tree; the only one
        known, when ``repo`` is None)."""
        if isinstance(repo, WorkTreePath):
            repo = self.work_tree(repo)
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


def identity_of(
    path: str | Path, override: str | None = None, field_name: str = "repo"
) -> tuple[RepoId, Path]:
    """The identity (``override`` if given) and root of the work tree containing ``path``,
    without a blame cache; NotInRepository outside one, LookupFailed if git fails."""
    repo = repository_of(path, field_name)
    return identity_in(repo, override), repo.root


def repository_of(path: str | Path, field_name: str = "repo") -> GitRepo:
    """The work tree containing ``path``; NotInRepository (naming ``field_name``) outside
    one, LookupFailed if git fails."""
    try:
        return GitRepo.discover(path)
    except (NotARepository, OutsideRepository, UnsafeArgument) as exc:
        raise NotInRepository(field_name, str(exc).removeprefix("repo: ")) from None
    except GitError as exc:
        raise LookupFailed(str(exc)) from None


def identity_in(repo: GitRepo, override: str | None = None) -> RepoId:
    """``repo``'s identity (``override`` if given); LookupFailed if git fails."""
    try:
        return repo.identity(override)
    except (NotARepository, OutsideRepository, UnsafeArgument) as exc:
        raise NotInRepository("repo", str(exc).removeprefix("repo: ")) from None
    except GitError as exc:
        raise LookupFailed(str(exc)) from None


def _real(path: Path) -> Path:
    """``path`` made absolute with every link and ``..`` resolved as the system resolves them
    (``Path.absolute()`` keeps ``..``: ``/x/a/../b`` would seem to be inside ``/x/a``)."""
    return Path(os.path.realpath(path))
