"""Lookups at a code location: lines mapped through blame to their origin in a work tree,
the lines of one commit literally, or the lines as stored when no work tree is known; and,
where nothing is anchored at an origin, the memories of rewritten commits that landed there
(and of the versions a line replaced)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace

from poimen_memory.domain import ProjectId, RepoId, Sha256Hash
from poimen_memory.gitio import Blame, BlameLine, Blamer, GitError, UnsafeArgument, Untracked
from poimen_memory.lookup.core import FileAt, LookupCore
from poimen_memory.lookup.earlier import earlier_versions
from poimen_memory.lookup.errors import LookupFailed, LookupInputError, NotInRepository
from poimen_memory.lookup.origins import match_evidence, origin_runs
from poimen_memory.lookup.requests import MAX_LINE, ByGitRequest
from poimen_memory.lookup.results import Earlier, LookupResult, assemble
from poimen_memory.lookup.rewrites import Found, Miss, Rewrites, landed_nodes
from poimen_memory.store import Candidate, Evidence

__all__ = ["LocatedLookups"]


class LocatedLookups:
    """The memories at a location (by_git), and of one line from its blame origin."""

    def __init__(self, core: LookupCore) -> None:
        self._core = core
        self._rewrites = Rewrites(core.store)

    def by_git(self, req: ByGitRequest) -> LookupResult:
        """Memories at a code location: the current lines mapped through blame to their origin
        in a work tree of the repository (``mapped``); with ``commit_sha``, the lines of that
        commit literally, and with no work tree of the repository here, the lines as stored
        in any commit (not ``mapped``); plus the nodes above them."""
        core = self._core
        project = core.project_of(req)
        repo = core.known_repo(project, req.repo)
        if req.commit_sha is not None:
            return replace(self._literal(req, project, repo), mapped=False)
        if not (core.checkouts.has(repo) if repo is not None else core.checkouts.identities()):
            return self._as_stored(req, project, repo)
        return replace(self._blamed(req, project, repo), mapped=True)

    def _literal(self, req: ByGitRequest, project: ProjectId, repo: RepoId | None) -> LookupResult:
        """The anchors at the lines of ``req.commit_sha`` as they were in that commit."""
        assert req.commit_sha is not None
        store = self._core.store
        commit = self._core.resolve_commit(project, repo, req.commit_sha)
        if commit is None:
            return LookupResult(repo, ())
        if repo is None:
            ids = self._core.checkouts.identities()
            if len(ids) != 1:
                raise LookupInputError("repo", "required for a lookup by commit_sha")
            repo = ids[0]
        if req.line_start == req.line_end and req.line_start > 0:
            rows = store.evidence_at_line(project, repo, commit, req.file, req.line_start)
            return assemble(repo, rows)
        first, last = (1, MAX_LINE) if req.line_start == 0 else (req.line_start, req.line_end)
        return assemble(
            repo, store.evidence_for_runs(project, repo, [(commit, req.file, first, last)])
        )

    def _as_stored(
        self, req: ByGitRequest, project: ProjectId, repo: RepoId | None
    ) -> LookupResult:
        """No work tree of the repository is known here: the anchors of the file at the lines
        as stored (the seed's literal lookup), in any commit, newest first."""
        for name, given in (("at", req.at), ("history", req.history)):
            if given:
                where = "" if repo is None else f" of {repo.value!r}"
                raise LookupInputError(
                    name, f"needs a work tree{where} to blame in, and none is known here"
                )
        page = self._core.store.evidence_at_file_lines(
            project, repo, req.file, req.line_start, req.line_end
        )
        return replace(assemble(repo, page.rows), mapped=False, truncated=page.after is not None)

    def _blamed(self, req: ByGitRequest, project: ProjectId, repo: RepoId | None) -> LookupResult:
        """The lines of the file at HEAD (or ``req.at``) through blame to their origins."""
        repo_id, blamer = self._core.checkouts.blamer(repo)
        try:
            at = None if req.at is None else blamer.repo.resolve_commit(req.at)
            if at is None:
                self._core.settle_pending(project, repo_id, blamer, req.file, blamer.repo.head())
            if req.line_start == req.line_end and req.line_start > 0:
                try:
                    origin = blamer.origin(req.file, req.line_start, at)
                except UnsafeArgument:  # git's word for a line past the end, as a cache's None
                    origin = None
                if origin is None:
                    raise LookupInputError(
                        "line", f"{req.line_start} is beyond the end of {req.file}"
                    )
                where = FileAt(project, repo_id, blamer, req.file, at or blamer.repo.head())
                return self.at_origin(where, origin, req.line_start, req.line_start, req.history)
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
        return self._from_blame(project, repo_id, blamer, blame, lines)

    def _from_blame(
        self,
        project: ProjectId,
        repo_id: RepoId,
        blamer: Blamer,
        blame: Blame,
        lines: Iterable[int],
    ) -> LookupResult:
        """The memories of ``lines`` of a blamed file: anchored at their origins, else of
        rewritten commits that landed there."""
        origins = [o for o in (blame.origin(n) for n in lines) if o is not None]
        page = self._core.store.runs_page(project, repo_id, origin_runs(origins))
        matched, lines_of = match_evidence(page.rows, origins)
        covered = {n for hits in lines_of.values() for n in hits}
        missed = [(o, o.line, o.line) for o in origins if o.line not in covered]
        where = FileAt(project, repo_id, blamer, blame.path, blame.rev)
        # Each line as a lookup of that line alone answers it (see Rewrites.find).
        found = self.find_rewritten(where, missed, alone=True)
        result = _with_rewritten(repo_id, matched, lines_of, found)
        return replace(result, truncated=page.after is not None)

    def at_origin(
        self,
        where: FileAt,
        origin: BlameLine,
        line: int,
        rev_line: int,
        history: int,
        read: int | None = None,
    ) -> LookupResult:
        """The memories of one line (``line`` as the caller numbers it, ``rev_line`` at
        ``rev``) from its origin: anchors there, else those of rewritten commits that landed
        there; with ``history``, those of the versions it replaced too. ``read``: only the
        newest that many anchors' memories are read, the rest counted (``evidence_total``;
        what a hover shows)."""
        project, repo_id, blamer = where.project, where.repo_id, where.blamer
        store = self._core.store
        page = store.newest_at_line(
            project, repo_id, origin.commit, origin.orig_path, origin.orig_line, read
        )
        rows = page.rows
        found = [] if rows else self.find_rewritten(where, [(origin, line, rev_line)])
        earlier = (
            earlier_versions(
                store,
                project,
                repo_id,
                blamer,
                origin,
                history,
                lambda c: self._rewrites.change(blamer.repo, c),
            )
            if history
            else []
        )
        lines_of: dict[Sha256Hash, list[int]] = {r.node.sha256: [line] for r in rows}
        result = _with_rewritten(repo_id, rows, lines_of, found, earlier, line)
        if read is None or page.nodes <= len(lines_of):
            return result
        # The evidence not read, counted: the line's in all is that and what was read.
        return replace(result, evidence_total=len(result.evidence) + page.nodes - len(lines_of))

    def prefetch_rewritten(self, where: FileAt) -> list[Candidate] | None:
        """The candidates for all of a file's line texts (``Rewrites.prefetch``), read while
        it is blamed; None when they cannot be (then ``find_rewritten`` asks the store)."""
        hashes = self._core.hashes_at(where.blamer, where.file, where.rev)
        if hashes is None:
            return None
        return self._rewrites.prefetch(where.project, where.repo_id, hashes[0])

    def find_rewritten(
        self,
        where: FileAt,
        missed: Sequence[tuple[BlameLine, int, int]],
        *,
        alone: bool = False,
        known: Sequence[Candidate] | None = None,
    ) -> list[Found]:
        """The evidence of rewritten commits whose change landed on lines with nothing
        anchored at their origin; ``missed``: (origin, line as the caller numbers it, line at
        ``rev``); ``alone``: each line as a lookup of it alone decides (see Rewrites.find);
        ``known``: what ``prefetch_rewritten`` read."""
        if not missed:
            return []
        blamer, rev = where.blamer, where.rev
        hashes = self._core.hashes_at(blamer, where.file, rev)
        if hashes is None:
            return []
        by_line, counts = hashes
        misses = [
            Miss(origin, line, by_line[at - 1] if 1 <= at <= len(by_line) else None)
            for origin, line, at in missed
        ]
        return self._rewrites.find(
            where.project, where.repo_id, blamer.repo, rev, misses, counts, alone=alone,
            known=known,
        )  # fmt: skip


def _with_rewritten(
    repo_id: RepoId,
    rows: Sequence[Evidence],
    lines_of: dict[Sha256Hash, list[int]],
    found: Sequence[Found],
    earlier: Sequence[tuple[Evidence, Earlier]] = (),
    line: int | None = None,
) -> LookupResult:
    """Evidence found at the lines' origins, plus that of rewritten commits (marked as
    landed) and of earlier versions of ``line`` (marked as such); a node found directly is
    shown as found directly."""
    direct = {r.node.sha256 for r in rows}
    every = list(rows)
    lines = {sha: list(hits) for sha, hits in lines_of.items()}
    for f in found:
        every.append(f.evidence)
        lines.setdefault(f.evidence.node.sha256, []).extend(f.lines)
    landed = {sha: how for sha, how in landed_nodes(found).items() if sha not in direct}
    earlier_of: dict[Sha256Hash, Earlier] = {}
    for row, about in earlier:
        sha = row.node.sha256
        if sha in direct or sha in landed:
            continue
        every.append(row)
        earlier_of.setdefault(sha, about)
        if line is not None:
            lines.setdefault(sha, []).append(line)
    return assemble(repo_id, every, lines, landed, earlier_of)
