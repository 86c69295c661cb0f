"""``mem ingest``: files -> drafts (adapters) -> git enrichment -> store, in batches.

Everything is parsed and checked before anything is written, the size of each node's text
included. By default one bad record means nothing is written; with ``skip_bad`` the good ones
are. Batches are written one transaction each, parents before children, with a NOTIFY on
``poimen_memory_ingest`` after each.
"""

from __future__ import annotations

import enum
import json
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from itertools import islice
from pathlib import Path

from poimen_memory.chunking import DEFAULT_TOKEN_BUDGET
from poimen_memory.domain import (
    Anchor,
    CommitInfo,
    CommitSha,
    ContentError,
    Edge,
    Level,
    MemoryNode,
    PendingAnchor,
    ProjectId,
    RepoId,
    Sha256Hash,
)
from poimen_memory.domain.nodes import check_text_size
from poimen_memory.gitio import BlameCache, Blamer, GitError, GitRepo
from poimen_memory.ingest.agent_trace import looks_like_agent_trace, parse_agent_trace
from poimen_memory.ingest.claude_code import looks_like_claude_code, parse_claude_code
from poimen_memory.ingest.codex import looks_like_codex, parse_codex
from poimen_memory.ingest.enrich import enrich
from poimen_memory.ingest.jsonl import iter_json_lines, parse_jsonl, read_json_document
from poimen_memory.ingest.model import (
    BadRecord,
    Draft,
    IngestError,
    IngestResponse,
    Parsed,
    SourceRef,
    WrittenOut,
)
from poimen_memory.ingest.redact import Redactor
from poimen_memory.ingest.remember import PENDING_DAYS
from poimen_memory.ingest.waiting import WorkTreeLines, expired, pending_of_edits
from poimen_memory.settings import Settings
from poimen_memory.store import NOTIFY_CHANNEL, Batch, InsertCounts, Store
from poimen_memory.store.connector import StoreRejected

__all__ = [
    "NOTIFY_CHANNEL",
    "Format",
    "IngestOptions",
    "IngestRejected",
    "IngestSummary",
    "detect_format",
    "expand_paths",
    "ingest",
]

_SHA = re.compile(r"[0-9a-f]{64}")
# Lines looked at to tell a file's format; bad ones among them are reported when it is parsed.
_DETECT_LINES = 64
# Claude Code entries a transcript may open with, before its first message.
_CLAUDE_CODE_PREAMBLE = frozenset(
    {"summary", "file-history-snapshot", "queue-operation", "attachment"}
)
# Anchors written by one ingest above which the store's statistics are refreshed.
ANALYZE_AFTER = 1000


class Format(enum.Enum):
    """Input formats."""

    AUTO = "auto"
    JSONL = "jsonl"
    CLAUDE_CODE = "claude-code"
    AGENT_TRACE = "agent-trace"
    CODEX = "codex"


class IngestRejected(Exception):
    """Bad records were found and ``skip_bad`` was off: nothing was written."""

    def __init__(self, bad: Sequence[BadRecord]) -> None:
        super().__init__(f"{len(bad)} bad record(s); nothing was written")
        self.bad = list(bad)


@dataclass(frozen=True, slots=True)
class IngestOptions:
    """What to ingest into, and how."""

    project: ProjectId
    repo_dir: Path
    repo_override: str | None = None
    format: Format = Format.AUTO
    skip_bad: bool = False
    budget: int = DEFAULT_TOKEN_BUDGET
    batch_nodes: int = 5000
    cache_path: Path | None = None
    redact: bool = True
    pending_days: float = PENDING_DAYS

    def __post_init__(self) -> None:
        if self.budget < 1:
            raise IngestError(f"--budget: expected a positive number of tokens, got {self.budget}")
        if self.batch_nodes < 1:
            raise IngestError(f"--batch-nodes: expected a positive number, got {self.batch_nodes}")
        if not self.pending_days > 0:
            raise IngestError(f"pending_days: expected a positive number, got {self.pending_days}")


@dataclass(slots=True)
class IngestSummary:
    """What an ingest read and wrote."""

    repo: RepoId
    files: int = 0
    nodes_by_level: dict[str, int] = field(default_factory=lambda: {lv.value: 0 for lv in Level})
    edges: int = 0
    anchors: int = 0
    unanchored_edits: int = 0
    noop_edits: int = 0
    pending_edits: int = 0
    written: InsertCounts = field(default_factory=InsertCounts)
    skipped: list[BadRecord] = field(default_factory=list)
    batches: int = 0
    redacted: dict[str, int] = field(default_factory=dict)
    incomplete_last_lines: list[SourceRef] = field(default_factory=list)

    def response(self) -> IngestResponse:
        """The summary as ``mem ingest --json`` prints it."""
        counts = (
            "files",
            "edges",
            "anchors",
            "unanchored_edits",
            "noop_edits",
            "pending_edits",
            "batches",
        )
        written = {k: getattr(self.written, k) for k in WrittenOut.model_fields}
        return IngestResponse(
            repo=self.repo.value,
            nodes=self.nodes_by_level,
            written=WrittenOut(**written),
            skipped=[str(b) for b in self.skipped],
            redacted=self.redacted,
            incomplete_last_lines=[str(s) for s in self.incomplete_last_lines],
            **{k: getattr(self, k) for k in counts},
        )

    def to_json(self) -> dict[str, object]:
        """The summary's JSON (``response()``'s)."""
        return self.response().model_dump(mode="json")


def expand_paths(paths: Iterable[Path]) -> list[Path]:
    """Files named, and the .jsonl/.json files under directories named, in a stable order."""
    out: list[Path] = []
    for path in paths:
        if path.is_dir():
            out.extend(
                sorted(
                    p for p in path.rglob("*") if p.suffix in (".jsonl", ".json") and p.is_file()
                )
            )
        elif path.is_file():
            out.append(path)
        else:
            raise IngestError(f"PATH: {path} does not exist")
    return out


def detect_format(path: Path) -> Format:
    """The format of a file, from its first JSON object (lines that are not one are passed
    over here, and reported when the file is parsed), else from the file as one document."""
    for _, obj in islice(iter_json_lines(path), _DETECT_LINES):
        if isinstance(obj, BadRecord):
            continue
        if looks_like_agent_trace(obj):
            return Format.AGENT_TRACE
        if looks_like_codex(obj):
            return Format.CODEX
        if looks_like_claude_code(obj):
            return Format.CLAUDE_CODE
        if isinstance(obj, dict) and obj.get("type") in ("node", "edge"):
            return Format.JSONL
        if isinstance(obj, dict) and obj.get("type") in _CLAUDE_CODE_PREAMBLE:
            continue  # Claude Code transcripts may open with summaries and bookkeeping
        break
    document = read_json_document(path)
    whole = None if document is None else document.value
    first = whole[0] if isinstance(whole, list) and whole else whole
    if looks_like_agent_trace(first):
        return Format.AGENT_TRACE
    raise IngestError(
        f"{path}: cannot tell the format (generic JSONL, Claude Code, Codex or Agent Trace); "
        "name it with --format"
    )


def _parse(path: Path, options: IngestOptions, repo_root: Path, redactor: Redactor) -> Parsed:
    fmt = detect_format(path) if options.format is Format.AUTO else options.format
    if fmt is Format.JSONL:
        return parse_jsonl(path, options.project, redact=redactor)
    if fmt is Format.CLAUDE_CODE:
        return parse_claude_code(path, options.project, repo_root, options.budget, redactor)
    if fmt is Format.CODEX:
        return parse_codex(path, options.project, repo_root, options.budget, redactor)
    if fmt is Format.AGENT_TRACE:
        return parse_agent_trace(path, options.project, redactor)
    raise IngestError(f"--format: unsupported {fmt.value!r}")


@dataclass(frozen=True, slots=True)
class _File:
    """One input file, checked: its good drafts, its edges, their anchors, and the local ids
    of the drafts reported bad (so nodes linking to them say so)."""

    drafts: list[Draft]
    edges: list[tuple[str, str, SourceRef]]
    anchors: dict[str, list[Anchor]]
    dropped: set[str]
    pending: dict[str, list[PendingAnchor]] = field(default_factory=dict)


@dataclass(slots=True)
class _Plan:
    nodes: dict[Sha256Hash, MemoryNode] = field(default_factory=dict)
    edges: dict[tuple[Sha256Hash, Sha256Hash], SourceRef] = field(default_factory=dict)
    anchors: dict[Sha256Hash, list[Anchor]] = field(default_factory=dict)
    commits: dict[CommitSha, CommitInfo] = field(default_factory=dict)
    pending: dict[Sha256Hash, list[PendingAnchor]] = field(default_factory=dict)


def ingest(
    paths: Sequence[Path],
    store: Store,
    options: IngestOptions,
    on_progress: Callable[[str, int, int], None] | None = None,
    repo: GitRepo | None = None,
) -> IngestSummary:
    """Ingest ``paths`` into ``store``; raises IngestRejected (nothing written) on bad records
    unless ``options.skip_bad``. ``repo`` is the work tree at ``options.repo_dir`` when the
    caller has it open already."""
    try:
        repo = repo or GitRepo.discover(options.repo_dir)
        repo_id = repo.identity(options.repo_override)
    except GitError as exc:
        raise IngestError(f"--repo: {exc}") from None
    files = expand_paths(paths)
    summary = IngestSummary(repo=repo_id, files=len(files))
    blamer = Blamer(repo, BlameCache(options.cache_path or Settings().blame_cache_path))
    redactor = Redactor(enabled=options.redact)
    bad: list[BadRecord] = []
    per_file: list[_File] = []
    commits: dict[CommitSha, CommitInfo] = {}
    now = datetime.now(UTC)
    work_tree = WorkTreeLines(repo.root)
    for index, path in enumerate(files):
        if on_progress:
            on_progress(f"reading {path.name}", index, len(files))
        try:
            parsed = _parse(path, options, repo.root, redactor)
        except OSError as exc:
            raise IngestError(f"PATH: cannot read {path}: {exc.strerror}") from None
        bad.extend(parsed.bad)
        summary.incomplete_last_lines.extend(parsed.incomplete)
        summary.noop_edits += parsed.noop_edits
        sized = _within_limits(parsed.drafts, bad)
        enriched = enrich(repo, blamer, sized, options.project, repo_id, on_progress)
        bad.extend(enriched.bad)
        summary.unanchored_edits += enriched.unlocated
        good = [d for d in sized if d.local_id not in enriched.bad_ids]
        dropped = {d.local_id for d in parsed.drafts} - {d.local_id for d in good}
        pending = {
            d.local_id: pending_of_edits(
                options.project,
                d.node.sha256,
                repo_id,
                enriched.head,
                enriched.waiting.get(d.local_id, ()),
                now=now,
                pending_days=options.pending_days,
                work_tree=work_tree,
            )
            for d in good
            if d.local_id in enriched.waiting
        }
        # An edit that waited longer than pending_days for its commit is left unanchored.
        waited = [e for d in good for e in enriched.waiting.get(d.local_id, ())]
        late = sum(1 for e in waited if expired(e, now, options.pending_days))
        summary.pending_edits += len(waited) - late
        summary.unanchored_edits += late
        per_file.append(_File(good, parsed.edges, enriched.anchors, dropped, pending))
        commits.update(enriched.commits)
    levels = _known_levels(per_file, store, options.project)
    plan = _Plan(commits=commits)
    for file in per_file:
        _plan_file(plan, file, levels, bad)
    # Found while parsing, placing and planning: listed as they stand in the input.
    order = {str(path): index for index, path in enumerate(files)}
    bad.sort(key=lambda b: (order.get(b.source.path, len(order)), b.source.line))
    if bad and not options.skip_bad:
        raise IngestRejected(bad)
    summary.skipped = bad
    summary.redacted = dict(redactor.counts)
    for node in plan.nodes.values():
        summary.nodes_by_level[node.level.value] += 1
    summary.edges = len(plan.edges)
    summary.anchors = sum(len(a) for a in plan.anchors.values())
    _write(plan, store, options, repo_id, summary, on_progress)
    return summary


def _within_limits(drafts: list[Draft], bad: list[BadRecord]) -> list[Draft]:
    """The drafts whose text is within the size limit; the others are reported bad."""
    kept = []
    for draft in drafts:
        try:
            check_text_size(draft.node.text)
        except ContentError as exc:
            bad.append(BadRecord(draft.source, str(exc)))
            continue
        kept.append(draft)
    return kept


def _known_levels(
    per_file: list[_File], store: Store, project: ProjectId
) -> dict[Sha256Hash, Level]:
    """Levels of every node the input defines, and of the stored nodes it refers to by sha."""
    levels = {d.node.sha256: d.node.level for f in per_file for d in f.drafts}
    refs = {
        Sha256Hash(r)
        for f in per_file
        for r in [*(p for d in f.drafts for p in d.parents), *(x for e in f.edges for x in e[:2])]
        if _SHA.fullmatch(r)
    }
    outside = refs - set(levels)
    if outside:
        levels |= store.node_levels(project, outside)
    return levels


def _plan_file(
    plan: _Plan, file: _File, levels: dict[Sha256Hash, Level], bad: list[BadRecord]
) -> None:
    """Add a file's nodes and edges to the plan. A node whose parent cannot be linked is bad
    as a whole (never half-written); so, in turn, are the nodes below it."""
    alive = {d.local_id: d for d in file.drafts}
    rejected = set(file.dropped)
    edges, anchors = file.edges, file.anchors

    def resolve(ref: str) -> tuple[Sha256Hash | None, str]:
        if ref in alive:
            return alive[ref].node.sha256, ""
        if ref in rejected:
            return None, f"{ref!r} was not ingested (see its own error)"
        if _SHA.fullmatch(ref):
            sha = Sha256Hash(ref)
            if sha in levels:
                return sha, ""
            return None, f"node {ref} is not in this input or the store"
        return None, f"{ref!r} is no node of this file and no sha256"

    def link_error(child: Sha256Hash, parent_ref: str) -> tuple[Sha256Hash | None, str]:
        parent, why = resolve(parent_ref)
        if parent is None:
            return None, f"parent: {why}"
        if parent == child:
            return None, "parent: a node cannot be its own parent"
        if levels[child].rank >= levels[parent].rank:
            return None, (
                f"edge: {levels[child].value} -> {levels[parent].value} does not point up "
                "(edges go L0 -> L1 -> L2)"
            )
        return parent, ""

    changed = True
    while changed:
        changed = False
        for d in list(alive.values()):
            for parent_ref in d.parents:
                parent, why = link_error(d.node.sha256, parent_ref)
                if parent is None:
                    bad.append(BadRecord(d.source, why))
                    del alive[d.local_id]
                    rejected.add(d.local_id)
                    changed = True
                    break
    for d in alive.values():
        plan.nodes.setdefault(d.node.sha256, d.node)
        plan.anchors.setdefault(d.node.sha256, []).extend(anchors.get(d.local_id, []))
        plan.pending.setdefault(d.node.sha256, []).extend(file.pending.get(d.local_id, []))
        for parent_ref in d.parents:
            parent, _ = resolve(parent_ref)
            assert parent is not None
            plan.edges.setdefault((d.node.sha256, parent), d.source)
    for child_ref, parent_ref, source in edges:
        child, why = resolve(child_ref)
        if child is None:
            bad.append(BadRecord(source, f"child: {why}"))
            continue
        parent, why = link_error(child, parent_ref)
        if parent is None:
            bad.append(BadRecord(source, why))
            continue
        plan.edges.setdefault((child, parent), source)


def _pending_key(p: PendingAnchor) -> tuple[str, str, tuple[int, ...]]:
    """What makes a pending anchor one (the store's key, within a project and repository)."""
    return (p.node.value, p.file, p.line_hashes)


def _write(
    plan: _Plan,
    store: Store,
    options: IngestOptions,
    repo_id: RepoId,
    summary: IngestSummary,
    on_progress: Callable[[str, int, int], None] | None,
) -> None:
    # Parents first: L2, then L1, then L0, so every edge's parent is already stored.
    ordered = sorted(plan.nodes.values(), key=lambda n: -n.level.rank)
    children: dict[Sha256Hash, list[Sha256Hash]] = {}
    for child, parent in plan.edges:
        children.setdefault(child, []).append(parent)
    payload = json.dumps({"project": options.project.value, "repo": repo_id.value})
    total = len(ordered)
    written = InsertCounts()
    step = max(1, options.batch_nodes)
    for start in range(0, max(total, 1), step):
        nodes = ordered[start : start + step]
        edges = [
            Edge(options.project, n.sha256, parent)
            for n in nodes
            for parent in children.get(n.sha256, [])
        ]
        # Edges whose child is stored already (external) ride with the first batch.
        if start == 0:
            edges += [Edge(options.project, c, p) for (c, p) in plan.edges if c not in plan.nodes]
        anchors = [a for n in nodes for a in plan.anchors.get(n.sha256, [])]
        commits = list({a.commit: plan.commits[a.commit] for a in anchors}.values())
        pending = list(
            {_pending_key(p): p for n in nodes for p in plan.pending.get(n.sha256, [])}.values()
        )
        if not (nodes or edges):
            break
        try:
            counts = store.insert_batch(
                Batch(nodes=nodes, edges=edges, commits=commits, anchors=anchors, pending=pending),
                notify=(NOTIFY_CHANNEL, payload),
            )
        except StoreRejected as exc:
            done = (
                f"{start} node(s) in {summary.batches} earlier batch(es) were written"
                if summary.batches
                else "nothing was written"
            )
            raise StoreRejected(f"{exc}; {done}") from None
        written = InsertCounts(
            nodes=written.nodes + counts.nodes,
            edges=written.edges + counts.edges,
            commits=written.commits + counts.commits,
            anchors=written.anchors + counts.anchors,
        )
        summary.batches += 1
        if on_progress:
            on_progress("writing", min(start + step, total), total)
    summary.written = written
    if written.anchors >= ANALYZE_AFTER:
        store.refresh_statistics()
