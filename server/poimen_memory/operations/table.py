"""The operations table: every operation of poimen-memory, declared once, and what every
surface is generated from.

Each ``Operation`` names its request model, its response model, the handler that answers it
over the ``Services`` a process built, its text rendering and whether it writes. The HTTP
routes (``poimen_memory.http``), MCP tools (``poimen_memory.mcpserver``), language-server
commands (``poimen_memory.lsp.lookups``) and CLI subcommands (``poimen_memory.cli``) are made
by walking ``OPERATIONS``: adding an operation is one entry here (plus its SQL).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Generic, Literal, TypeVar

from pydantic import BaseModel
from pydantic.alias_generators import to_camel

from poimen_memory.gitio import BlameLine, GitError
from poimen_memory.gitio.blame import differences
from poimen_memory.lookup import (
    BlameRequest,
    ByAuthorRequest,
    ByCommitRequest,
    ByGitRequest,
    LookupFailed,
    LookupResponse,
    LookupResult,
    LookupService,
    QueryRequest,
    RememberRequest,
    RememberResponse,
    Request,
    ResolvePendingRequest,
    StatusRequest,
    WhyRequest,
)
from poimen_memory.operations import texts
from poimen_memory.operations.models import (
    BlameDifference,
    BlameLineOut,
    BlameResponse,
    ResolvedOut,
    ResolvePendingResponse,
    StatusResponse,
)
from poimen_memory.recording import Recorder
from poimen_memory.settings import Settings
from poimen_memory.store import Store
from poimen_memory.store.connection import describe_target

__all__ = ["OPERATIONS", "CliSpec", "HttpRoute", "Operation", "Services", "operation"]

Req = TypeVar("Req", bound=Request)
Out = TypeVar("Out")
Resp = TypeVar("Resp", bound=BaseModel)


@dataclass(frozen=True, slots=True)
class Services:
    """What a process built to answer operations: the lookup service (store, checkouts), the
    recorder over it, and the settings in force."""

    service: LookupService
    recorder: Recorder
    settings: Settings

    @property
    def store(self) -> Store:
        """The memory store."""
        return self.service.store

    @classmethod
    def over(cls, service: LookupService) -> Services:
        """The services of an already built lookup service (its settings, a recorder)."""
        return cls(service, Recorder(service, service.settings.pending_days), service.settings)


@dataclass(frozen=True, slots=True)
class HttpRoute:
    """Where an operation is served over HTTP (GET takes the request as query parameters)."""

    method: Literal["GET", "POST"]
    path: str


@dataclass(frozen=True, slots=True)
class CliSpec:
    """How an operation is a ``mem`` subcommand: its words (``("db", "status")``), its
    positional arguments (field or ``location``, metavar), examples; whether it is about the
    store itself (``admin``: the schema is reported as it is, no work tree is read), whether
    it needs a store only when one is configured (``store_optional``: a blame shares through
    a team's store, and the embedded one is not started for it), and whether its blames are
    shared through the store (``shares_blames``); ``many_trees``: it answers for every work
    tree given (``--repo`` repeated), not one."""

    words: tuple[str, ...]
    positional: tuple[tuple[str, str], ...] = ()
    examples: tuple[str, ...] = ()
    admin: bool = False
    store_optional: bool = False
    shares_blames: bool = True
    many_trees: bool = False


@dataclass(frozen=True, slots=True)
class Operation(Generic[Req, Out, Resp]):
    """One operation: ``run`` answers a validated ``request`` over the services; ``answer``
    turns what it returns into the ``response`` model every surface sends; ``text`` renders
    it for people and models."""

    name: str
    title: str
    summary: str
    description: str
    request: type[Req]
    response: type[Resp]
    run: Callable[[Services, Req], Out]
    answer: Callable[[Out], Resp]
    text: Callable[[Req, Out], str]
    writes: bool = False
    http: HttpRoute | None = None
    cli: CliSpec | None = None
    # The CLI's exit status for an answer that is not a failure (``blame --verify``: 1 when a
    # line differs from git's); None: 0.
    exit_status: Callable[[Resp], int] | None = field(default=None)

    @property
    def lsp_command(self) -> str:
        """The ``workspace/executeCommand`` id: ``mem.byGit``."""
        return f"mem.{to_camel(self.name)}"

    @property
    def mcp_tool(self) -> str:
        """The MCP tool's name: ``by_git``."""
        return self.name

    def execute(self, services: Services, body: object) -> Resp:
        """Validate ``body`` (a JSON object) and answer it as the response model."""
        return self.answer(self.run(services, self.request.parse(body)))


def _result(result: LookupResult) -> LookupResponse:
    return result.response()


def _same(answer: Resp) -> Resp:
    return answer


def _blame(services: Services, req: BlameRequest) -> BlameResponse:
    _, blamer = services.service.checkouts.blamer(req.repo)
    try:
        rev = blamer.repo.head() if req.at is None else blamer.repo.resolve_rev(req.at)
        found, source = blamer.blame_known(req.file, rev)
        text = blamer.repo.blob(rev, req.file).decode("utf-8", "replace").split("\n")
        differ = differences(found, blamer.repo.blame(req.file, rev)) if req.verify else None
    except GitError as exc:
        raise LookupFailed(str(exc)) from None
    services.service.checkouts.flush()
    lines = [
        _origin(ln, text[ln.line - 1].rstrip("\r") if ln.line <= len(text) else "")
        for ln in found.lines
    ]
    return BlameResponse(
        file=req.file,
        commit=rev.value,
        source=source,  # type: ignore[arg-type]  # one of the sources blame_known names
        lines=[line for line in lines if line is not None],
        verified=None if differ is None else not differ,
        differences=None
        if differ is None
        else [BlameDifference(line=n, mem=_origin(m), git=_origin(g)) for n, m, g in differ],
    )


def _origin(entry: BlameLine | None, text: str | None = None) -> BlameLineOut | None:
    if entry is None:
        return None
    return BlameLineOut(
        line=entry.line,
        commit=entry.commit.value,
        orig_path=entry.orig_path,
        orig_line=entry.orig_line,
        text=text,
    )


def _status(services: Services, req: StatusRequest) -> StatusResponse:
    counts = dataclasses.asdict(services.store.status())
    nodes = counts.pop("nodes_by_level")
    return StatusResponse(store=describe_target(services.store.dsn), nodes=nodes, **counts)


def _resolve_pending(services: Services, req: ResolvePendingRequest) -> ResolvePendingResponse:
    expired, done = services.recorder.resolve_pending(req.project)
    return ResolvePendingResponse(
        expired=expired,
        repos=[
            ResolvedOut(
                project=r.project.value,
                repo=r.repo.value,
                anchors=r.anchors,
                files=r.files,
                skipped=r.skipped,
            )
            for r in done
        ],
    )


def _verified(answer: BlameResponse) -> int:
    return 1 if answer.verified is False else 0


_FILE = (
    "`file` is a path relative to the repository root, or an absolute path inside a work tree "
    "this server serves; `repo` (the repository identity, e.g. github.com/org/app) is needed "
    "only when the server serves several."
)
_ANSWER = (
    "Answers the memories as text (each with its level L0 evidence / L1 per-question memory / "
    "L2 project synthesis, its text, and where it is anchored with commit, author and date) "
    "and as structured content (`nodes`, evidence first, newest first)."
)
_PAGED = (
    "An answer with `truncated: true` is one page of `limit` anchors, not the whole: call again "
    "with the same arguments and its `cursor` for the next page."
)

OPERATIONS: Final[tuple[Operation[Any, Any, Any], ...]] = (
    Operation(
        name="why",
        title="Why is this line so?",
        summary="why a line or range is the way it is: its memories",
        description="Why is this code the way it is? The memories recorded about a line "
        "(`line`) or a range (`lines: [start, end]`) of a file as it is now: each line is traced "
        "through git blame to the commit that produced it, so only memories about that change "
        "come back, never ones about lines since rewritten. Call it before modifying code whose "
        "reason is not obvious, or when asked why something is done a certain way. `history: "
        f"true` also returns memories about the versions of the line it replaced (one line "
        f"only). {_FILE} {_ANSWER} An answer with no memories means none were recorded for "
        f"these lines. {texts.CITE}",
        request=WhyRequest,
        response=LookupResponse,
        run=lambda s, r: s.service.by_git(ByGitRequest.of(r)),
        answer=_result,
        text=texts.why_text,
        http=HttpRoute("POST", "/memory/why"),
        cli=CliSpec(
            ("why",),
            (("location", "FILE:LINE[-END]"),),
            ("mem why src/app.py:42", "mem why src/app.py:40-60 --json"),
        ),
    ),
    Operation(
        name="by_git",
        title="Memories at a code location",
        summary="memories at FILE:LINE, through blame",
        description="Memories at a code location, with every option of the lookup: a line, a "
        "range or (neither) the whole file; `commit_sha` looks the lines up literally as they "
        "were in that commit, without blame; `at` blames as of that commit instead of HEAD; "
        "`history` adds memories of earlier versions of one line. Prefer `why` for a line as it "
        "is now. `mapped: false` in the answer: no work tree of the repository is known to "
        "blame in, so the lines are matched as the memories stored them, in any commit. "
        f"{_FILE} {_ANSWER} {texts.CITE}",
        request=ByGitRequest,
        response=LookupResponse,
        run=lambda s, r: s.service.by_git(r),
        answer=_result,
        text=texts.lookup_text,
        http=HttpRoute("POST", "/memory/nodes/by-git"),
        cli=CliSpec(
            ("by-git",),
            (("location", "FILE[:LINE[-END]]"),),
            (
                "mem by-git src/app.py:42",
                "mem by-git src/app.py:40-60 --json --project app",
                "mem by-git src/app.py:42 --commit 1a2b3c4d --repo ~/app",
                "mem by-git src/app.py:42 --history",
            ),
        ),
    ),
    Operation(
        name="by_commit",
        title="Memories of a commit",
        summary="memories anchored in a commit",
        description="Every memory whose evidence is anchored in one commit (a full id or a "
        "unique prefix of at least 4 hex digits): what was learned while making that change. "
        f"Use it to review or explain a commit. {_PAGED} {_ANSWER} {texts.CITE}",
        request=ByCommitRequest,
        response=LookupResponse,
        run=lambda s, r: s.service.by_commit(r),
        answer=_result,
        text=texts.lookup_text,
        http=HttpRoute("POST", "/memory/nodes/by-commit"),
        cli=CliSpec(
            ("by-commit",),
            (("commit_sha", "SHA"),),
            (
                "mem by-commit 1a2b3c4d --repo ~/app",
                "mem by-commit 1a2b3c4d --json",
                "mem by-commit 1a2b3c4d --all --json",
            ),
        ),
    ),
    Operation(
        name="by_author",
        title="Evidence by author",
        summary="evidence from an author's commits",
        description="Evidence anchored in the commits of one author (email or name, any case; "
        "the repository's .mailmap applies), newest first, up to `limit`. Use it to see what "
        f"was learned in a person's changes. {_PAGED} {_ANSWER} {texts.CITE}",
        request=ByAuthorRequest,
        response=LookupResponse,
        run=lambda s, r: s.service.by_author(r),
        answer=_result,
        text=texts.lookup_text,
        http=HttpRoute("POST", "/memory/nodes/by-author"),
        cli=CliSpec(
            ("by-author",),
            (("author", "EMAIL"),),
            (
                "mem by-author ada@example.com --repo ~/app",
                "mem by-author 'Ada Lovelace' --json",
                "mem by-author ada@example.com --limit 100 --json",
            ),
        ),
    ),
    Operation(
        name="query",
        title="Search memories",
        summary="full-text search over memories",
        description="Full-text search over all memories of the project (web-search syntax: "
        'words, "a phrase", -excluded, or). Use it when you do not know where in the code '
        "something is, or to find what is known about a topic. With `git_repo`, each result is "
        f"cited by its evidence in that repository. {_ANSWER} {texts.CITE}",
        request=QueryRequest,
        response=LookupResponse,
        run=lambda s, r: s.service.query(r),
        answer=_result,
        text=texts.lookup_text,
        http=HttpRoute("GET", "/memory/query"),
        cli=CliSpec(
            ("query",),
            (("query", "TEXT"),),
            ('mem query "retry budget"', "mem query buffer --git-repo github.com/org/app --json"),
        ),
    ),
    Operation(
        name="remember",
        title="Remember what was learned",
        summary="record a memory on lines of a file (committed or not yet)",
        description="Record what you learned about specific lines so that a later session "
        "asking `why` about them finds it. `text` is the evidence (what was found, decided or "
        "ruled out, and why; self-contained, no secrets); `brief` an optional one-line summary, "
        "kept as a memory above the evidence; `file` with `line` or `lines: [start, end]` the "
        "code it is about (a path relative to the repository root, or an absolute path inside a "
        "served work tree). Lines already committed are anchored at once to the commit that "
        "produced them; new or changed lines not yet committed are kept pending and anchored "
        "when a commit containing them appears (if they are edited before that commit, the "
        "memory stays off the changed lines). Recording the same text twice stores it once. "
        "Answers the node id (sha256), where it was anchored and what is pending. Once anchored "
        "it is found and cited like any memory: `file:line (commit abc1234)`.",
        request=RememberRequest,
        response=RememberResponse,
        run=lambda s, r: s.recorder.remember(r),
        answer=_same,
        text=texts.remembered_text,
        writes=True,
        http=HttpRoute("POST", "/memory/remember"),
        cli=CliSpec(
            ("remember",),
            (("location", "FILE:LINE[-END]"), ("text", "TEXT")),
            (
                'mem remember src/app.py:42 "Three retries: the upstream drops one call in ten."',
                'mem remember src/app.py:40-60 "Why the cache is per tenant" '
                '--brief "per-tenant cache"',
            ),
        ),
    ),
    Operation(
        name="blame",
        title="Blame as lookups compute it",
        summary="a file's blame as the server computes it (cache, checkpoints)",
        description="A file's blame as lookups compute it: from the local cache, the shared "
        "one, a cached ancestor plus the commits since, or git; with `verify`, compared line by "
        "line with git's own `git blame`.",
        request=BlameRequest,
        response=BlameResponse,
        run=_blame,
        answer=_same,
        text=texts.blame_text,
        http=HttpRoute("POST", "/memory/blame"),
        cli=CliSpec(
            ("blame",),
            (("file", "FILE"),),
            (
                "mem blame src/app.py",
                "mem blame src/app.py --at v1.2 --json",
                "mem blame src/app.py --verify",
            ),
            store_optional=True,
        ),
        exit_status=_verified,
    ),
    Operation(
        name="status",
        title="Store status",
        summary="schema version and row counts",
        description="The memory store: its address, schema version and how many nodes, edges, "
        "anchors, commits, projects, shared blames and pending anchors it holds.",
        request=StatusRequest,
        response=StatusResponse,
        run=_status,
        answer=_same,
        text=texts.status_text,
        http=HttpRoute("GET", "/memory/status"),
        cli=CliSpec(
            ("db", "status"),
            (),
            ("mem db status", "mem db status --json --dsn postgresql://me@db.example/mem"),
            admin=True,
        ),
    ),
    Operation(
        name="resolve_pending",
        title="Resolve pending anchors",
        summary="anchor remembered lines committed since; delete expired ones",
        description="Anchor lines remembered before they were committed, in every repository "
        "with a work tree here, where a commit now holds them; delete the pending anchors that "
        "expired.",
        request=ResolvePendingRequest,
        response=ResolvePendingResponse,
        run=_resolve_pending,
        answer=_same,
        text=texts.resolved_text,
        writes=True,
        http=HttpRoute("POST", "/memory/resolve-pending"),
        cli=CliSpec(
            ("db", "resolve-pending"),
            (),
            ("mem db resolve-pending", "mem db resolve-pending --repo ~/app --json"),
            shares_blames=False,
            many_trees=True,
        ),
    ),
)

_BY_NAME: Final[Mapping[str, Operation[Any, Any, Any]]] = {op.name: op for op in OPERATIONS}


def operation(name: str) -> Operation[Any, Any, Any]:
    """The operation called ``name``; KeyError if there is none."""
    return _BY_NAME[name]
