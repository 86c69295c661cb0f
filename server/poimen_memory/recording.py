"""Memories agents record: ``remember`` for every surface (MCP, LSP, CLI), and the pending
anchors of lines remembered before they were committed, resolved on the next lookup of
their file (the service is built with ``pending_resolver``) or by ``mem db
resolve-pending``."""

from __future__ import annotations

from dataclasses import dataclass, field

from poimen_memory.domain import CommitSha, ContentError, ProjectId, RepoId
from poimen_memory.domain.checks import format_timestamp
from poimen_memory.gitio import Blamer, GitError, Untracked
from poimen_memory.ingest.remember import PENDING_DAYS, RememberRejected, remember, resolve_file
from poimen_memory.lookup import (
    LookupFailed,
    LookupInputError,
    LookupService,
    NotInRepository,
    PendingOut,
    PendingResolver,
    PlacedOut,
    RememberRequest,
    RememberResponse,
)
from poimen_memory.store import Store

__all__ = ["PENDING_DAYS", "Recorder", "Resolved", "pending_resolver"]


def pending_resolver(store: Store) -> PendingResolver:
    """What a lookup service calls to anchor a file's remembered lines once a commit holds
    them (given to it when it is built)."""

    def resolve(
        project: ProjectId, repo_id: RepoId, blamer: Blamer, file: str, head: CommitSha
    ) -> int:
        return resolve_file(store, blamer, repo_id, project, file, head)

    return resolve


@dataclass(slots=True)
class Resolved:
    """What ``Recorder.resolve_pending`` did for one repository."""

    project: ProjectId
    repo: RepoId
    anchors: int = 0
    files: list[str] = field(default_factory=list)
    skipped: str | None = None  # why the repository was not looked at


class Recorder:
    """Records memories over a lookup service's store and checkouts; resolves their pending
    anchors when the service looks a file up."""

    def __init__(self, service: LookupService, pending_days: float = PENDING_DAYS) -> None:
        self.service = service
        self.pending_days = pending_days

    def remember(self, req: RememberRequest) -> RememberResponse:
        """Record ``req``; LookupInputError names a bad field, NotInRepository an unknown
        file, LookupFailed a git failure; the store's errors pass through."""
        repo_id, blamer = self.service.checkouts.blamer(req.repo)
        project = req.project or self.service.project_for_repo(repo_id)
        try:
            done = remember(
                self.service.store,
                blamer,
                repo_id,
                project,
                file=req.file,
                start=req.line_start,
                end=req.line_end,
                text=req.text,
                brief=req.brief,
                query_id=req.query,
                pending_days=self.pending_days,
            )
        except RememberRejected as exc:
            raise LookupInputError(exc.field, str(exc).split(": ", 1)[1]) from None
        except Untracked as exc:
            raise NotInRepository("file", str(exc)) from None
        except GitError as exc:
            raise LookupFailed(str(exc)) from None
        self.service.forget_pending(repo_id, project)
        self.service.invalidate(repo_id, project)
        return RememberResponse(
            project=project.value,
            repo=repo_id.value,
            file=req.file,
            lines=(req.line_start, req.line_end),
            node=done.node.sha256.value,
            brief_node=None if done.brief is None else done.brief.sha256.value,
            created=done.created,
            anchored=[
                PlacedOut(
                    commit=a.commit.value, file=a.file, line_start=a.line_start, line_end=a.line_end
                )
                for a in done.anchors
            ],
            pending=[
                PendingOut(
                    file=p.file,
                    line_start=p.line_start,
                    line_end=p.line_end,
                    base=None if p.base is None else p.base.value,
                    expires_at=format_timestamp(p.expires_at),
                )
                for p in done.pending
            ],
            redacted=done.redacted,
        )

    def resolve_pending(self, project: ProjectId | None = None) -> tuple[int, list[Resolved]]:
        """Expire old pending anchors, then resolve the others of every repository with a
        local checkout known to the service (of ``project``, or of every project): (how
        many expired, what was done per repository)."""
        store = self.service.store
        expired = store.expire_pending(project)
        known = set(self.service.checkouts.identities())
        done: list[Resolved] = []
        for scope, repo_id in store.pending_repos(project):
            result = Resolved(scope, repo_id)
            done.append(result)
            if repo_id not in known:
                result.skipped = "no local checkout (give its work tree with --repo)"
                continue
            _, blamer = self.service.checkouts.blamer(repo_id)
            try:
                head = blamer.repo.head()
            except GitError as exc:
                result.skipped = str(exc)
                continue
            for file in sorted(store.pending_files(scope, repo_id)):
                try:
                    added = resolve_file(store, blamer, repo_id, scope, file, head)
                except (GitError, ContentError) as exc:
                    result.skipped = f"{file}: {exc}"
                    continue
                if added:
                    result.anchors += added
                    result.files.append(file)
            if result.anchors:
                self.service.invalidate(repo_id, scope)
        return expired, done
