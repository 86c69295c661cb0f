"""The text each operation answers in (the CLI without ``--json``, MCP's text content), next
to its JSON."""

from __future__ import annotations

from poimen_memory.lookup import ByGitRequest, LookupResult, RememberResponse, WhyRequest
from poimen_memory.operations.models import (
    BlameLineOut,
    BlameResponse,
    ResolvePendingResponse,
    StatusResponse,
)
from poimen_memory.render import render_text

__all__ = [
    "CITE",
    "blame_text",
    "lookup_text",
    "remembered_text",
    "resolved_text",
    "status_text",
    "why_text",
]

CITE = (
    "Cite a memory by the reference printed with it, `file:line (commit abc1234)`, e.g. "
    "`src/app.py:42 (commit 1a2b3c4)`, so a reader can check it with git."
)


def lookup_text(req: object, result: LookupResult) -> str:
    """Each memory, then where it is cited."""
    return render_text(result)


def _span(start: int, end: int) -> str:
    return f"{start}" if start == end else f"{start}-{end}"


def _where(req: ByGitRequest | WhyRequest) -> str:
    if req.line_start == 0:
        return req.file
    return f"{req.file}:{_span(req.line_start, req.line_end)}"


def why_text(req: WhyRequest, result: LookupResult) -> str:
    """How many memories the lines have, then each, then how to cite them."""
    where = _where(req) + ("" if result.repo is None else f" in {result.repo.value}")
    if not result.memories:
        return f"no memories recorded for {where}\n"
    count = len(result.evidence)
    head = f"{count} memor{'y' if count == 1 else 'ies'} for {where} (evidence first, newest first)"
    return f"{head}:\n\n{render_text(result)}\n{CITE}\n"


def remembered_text(req: object, answer: RememberResponse) -> str:
    """What was stored, where it is anchored, what waits for a commit."""
    done = "remembered" if answer.created else "already remembered"
    lines = [
        f"{done} {answer.file}:{_span(*answer.lines)} in {answer.repo} "
        f"(project {answer.project}) as node {answer.node}"
    ]
    if answer.brief_node is not None:
        lines.append(f"brief stored as node {answer.brief_node}, above it")
    for a in answer.anchored:
        lines.append(
            f"anchored: {a.file}:{_span(a.line_start, a.line_end)} (commit {a.commit[:7]})"
        )
    for p in answer.pending:
        lines.append(
            f"pending: {p.file}:{_span(p.line_start, p.line_end)} is not committed yet; it is "
            f"anchored when a commit holds these lines (until {p.expires_at})"
        )
    if answer.redacted:
        taken = ", ".join(f"{n} {kind}" for kind, n in sorted(answer.redacted.items()))
        lines.append(f"secrets taken out of the text before it was stored: {taken}")
    return "\n".join(lines) + "\n"


_SOURCES = {
    "cache": "the local cache",
    "shared": "the shared cache",
    "incremental": "a cached ancestor and the commits since",
    "git": "git blame",
}


def _short(origin: BlameLineOut | None) -> str:
    if origin is None:
        return "nothing"
    return f"{origin.commit[:8]} {origin.orig_path}:{origin.orig_line}"


def blame_text(req: object, answer: BlameResponse) -> str:
    """``commit path:line  N)`` per line, then where the blame came from (and, verified,
    whether it is git's)."""
    width = max((len(f"{ln.orig_path}:{ln.orig_line}") for ln in answer.lines), default=0)
    digits = len(str(len(answer.lines)))
    out = [
        f"{ln.commit[:8]} {f'{ln.orig_path}:{ln.orig_line}':<{width}} {ln.line:>{digits}}) "
        f"{ln.text or ''}"
        for ln in answer.lines
    ]
    for d in answer.differences or ():
        mine = (
            "nothing"
            if d.mem is None
            else f"{d.mem.commit[:8]} {d.mem.orig_path}:{d.mem.orig_line}"
        )
        git = (
            "nothing"
            if d.git is None
            else f"{d.git.commit[:8]} {d.git.orig_path}:{d.git.orig_line}"
        )
        out.append(f"line {d.line} differs: mem {mine}, git {git}")
    summary = (
        f"{answer.file} at {answer.commit[:7]}: {len(answer.lines)} lines from "
        f"{_SOURCES[answer.source]}"
    )
    if answer.verified is not None:
        summary += (
            "; identical to git blame"
            if answer.verified
            else f"; {len(answer.differences or ())} lines differ from git blame"
        )
    return "\n".join([*out, summary]) + "\n"


def status_text(req: object, status: StatusResponse) -> str:
    """The store, its schema and its counts, one per line."""
    lines = [f"store           {status.store}"]
    if status.schema_version == 0:
        return "\n".join([*lines, "schema version  none: run `mem db migrate`"]) + "\n"
    behind = "" if status.schema_version == status.latest_version else "  (run `mem db migrate`)"
    lines.append(f"schema version  {status.schema_version} of {status.latest_version}{behind}")
    lines.append(f"nodes           {' · '.join(f'{k} {n}' for k, n in status.nodes.items())}")
    for name in ("edges", "anchors", "commits", "projects"):
        lines.append(f"{name:<16}{getattr(status, name)}")
    lines.append(f"{'blame cache':<16}{status.blame_files} files · {status.blame_runs} runs")
    lines.append(f"{'pending':<16}{status.pending} remembered line ranges waiting for a commit")
    return "\n".join(lines) + "\n"


def resolved_text(req: object, answer: ResolvePendingResponse) -> str:
    """Per repository: anchors added, still waiting, or why it was skipped."""
    lines = []
    for r in answer.repos:
        if r.skipped and not r.anchors:
            what = f"skipped: {r.skipped}"
        elif r.anchors:
            what = f"{r.anchors} anchor(s) added in {', '.join(r.files)}"
        else:
            what = "still waiting"
        lines.append(f"{r.repo} (project {r.project}): {what}")
    lines.append(
        f"{answer.expired} expired pending anchor(s) deleted"
        if answer.expired
        else "nothing expired"
    )
    return "\n".join(lines) + "\n"
