"""Running the hook: ``mem hooks run claude-code`` (or ``codex``) reads the payload, starts a
detached worker (``--wait``) and returns at once; the worker ingests the session's transcript
into the project ``decide_project`` names, one run per transcript at a time, and logs what it
did. Nothing is ever raised to the agent: every outcome is a line in the log."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from typing import Any

from poimen_memory.hooks.claude import AGENT
from poimen_memory.hooks.payload import HookInputError, HookPayload, parse_payload
from poimen_memory.hooks.state import (
    locked,
    log_path,
    prune_locks,
    transcript_locks,
    write_log,
)
from poimen_memory.ingest import Format, IngestOptions, IngestSummary, ingest
from poimen_memory.lookup import (
    NotInRepository,
    ProjectChoice,
    decide_project,
    identity_in,
    repository_of,
)
from poimen_memory.settings import Settings, load_settings, redact_dsn
from poimen_memory.wiring import open_store

__all__ = ["LOCK_WAIT_S", "run_hook"]

# The agents whose hooks run here (the word after `mem hooks run`), and their transcripts' format.
_AGENTS = {AGENT: (Format.CLAUDE_CODE, "Claude Code"), "codex": (Format.CODEX, "Codex")}
# How long a worker waits for the run of the same transcript before it to finish.
LOCK_WAIT_S = 900.0


def _one_line(exc: BaseException, dsn: str | None) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return redact_dsn(text, dsn)


def _described(payload: HookPayload | None) -> dict[str, Any]:
    if payload is None:
        return {"event": "?"}
    described = {
        "event": payload.event,
        "session": payload.session,
        "transcript": str(payload.transcript),
        "cwd": str(payload.cwd),
    }
    if payload.reason:
        described["reason"] = payload.reason
    if payload.agent_transcript is not None:
        described["agent_transcript"] = str(payload.agent_transcript)
    return described


def run_hook(
    raw: bytes, *, project: str | None, dsn: str | None, wait: bool, agent: str = AGENT
) -> None:
    """What ``mem hooks run <agent>`` does with the payload ``raw``: with ``wait``, ingest the
    transcript here; else start a detached worker doing so and return at once. ``project`` is
    the hook's ``--project`` (the first choice of ``decide_project``); ``agent`` is whose hook
    this is, and so the transcript's format (``claude-code`` or ``codex``). Every outcome is
    logged; nothing is raised, nothing printed."""
    payload = None
    try:
        if agent not in _AGENTS:
            raise HookInputError(f"agent: expected one of {', '.join(_AGENTS)}, got {agent!r}")
        payload = parse_payload(raw, _AGENTS[agent][1])
        if wait:
            _ingest_logged(payload, project, dsn, agent)
        else:
            _detach(payload, project, dsn, agent)
    except Exception as exc:  # the agent must never see the hook fail
        kind = "" if isinstance(exc, HookInputError) else f"{type(exc).__name__}: "
        message = kind + _one_line(exc, dsn or os.environ.get("POIMEN_DSN"))
        write_log({**_described(payload), "outcome": "error", "message": message})


def _detach(payload: HookPayload, project: str | None, dsn: str | None, agent: str) -> None:
    """Start ``mem hooks run <agent> --wait`` in a new session, the payload on its stdin,
    its stray output into the log; do not wait for it. The worker gets the hook's
    ``--project`` as its own, so it decides (and logs) the project the same way; a DSN goes
    through the environment, out of the process list."""
    log = log_path()
    log.parent.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    env |= {"POIMEN_DSN": dsn} if dsn else {}
    options = [f"--project={project}"] if project else []
    argv = [sys.executable, "-m", "poimen_memory.cli", "hooks", "run", agent, "--wait", *options]
    with log.open("ab") as output:
        worker = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=output,
            stderr=output,
            cwd=payload.cwd if payload.cwd.is_dir() else None,
            env=env,
            start_new_session=True,
            close_fds=True,
        )
    assert worker.stdin is not None
    with worker.stdin:
        worker.stdin.write(json.dumps(payload.to_json()).encode("utf-8"))


def _ingest_logged(
    payload: HookPayload, project: str | None, dsn: str | None, agent: str = AGENT
) -> None:
    """Ingest the transcript and log the outcome, one run per transcript at a time. A run that
    finds another already waiting for the same transcript leaves it to that one, which reads
    the transcript later than this event anyway."""
    # Loaded once for the run: the log, the locks and the ingest all read them (a bad
    # config file is raised to run_hook, which logs it where the platform keeps logs).
    settings = load_settings({"project": project, "dsn": dsn})
    log = log_path(settings)
    waiting, running_lock = transcript_locks(payload.transcripts()[0], settings)
    described = _described(payload)
    with contextlib.ExitStack() as running:
        with locked(waiting, wait=None) as first:
            if not first:
                message = "another run for this transcript is waiting; left to it"
                write_log({**described, "outcome": "skipped", "message": message}, log)
                return
            if not running.enter_context(locked(running_lock, wait=LOCK_WAIT_S)):
                message = f"the run before this one still runs after {LOCK_WAIT_S:.0f}s"
                write_log({**described, "outcome": "error", "message": message}, log)
                return
        started = time.monotonic()
        try:
            summary, choice = _ingest(payload, settings, agent)
        except NotInRepository as exc:
            message = f"not ingested, no git work tree: {exc}"
            write_log({**described, "outcome": "skipped", "message": message}, log)
            return
        seconds = round(time.monotonic() - started, 2)
        write_log({**described, **_counts(summary, choice), "seconds": seconds}, log)
    prune_locks(waiting.parent)


def _ingest(
    payload: HookPayload, settings: Settings, agent: str = AGENT
) -> tuple[IngestSummary, ProjectChoice]:
    """Ingest the transcript into the project the one rule decides for the session's work tree
    (``--project``, ``POIMEN_PROJECT``, the config file, else the repository's identity):
    the work tree found once, for the identity and the ingest."""
    repo = repository_of(payload.cwd, field_name="cwd")
    identity = identity_in(repo, settings.repo)
    choice = decide_project(settings, repo=identity)
    assert choice.project is not None  # a repository always decides one
    options = IngestOptions(
        project=choice.project,
        repo_dir=payload.cwd,
        format=_AGENTS[agent][0],
        skip_bad=True,
        redact=True,
        repo_override=settings.repo,
        cache_path=settings.blame_cache_path,
        pending_days=settings.pending_days,
    )
    with open_store(settings, max_size=1) as store:  # one-shot: one connection, as `mem ingest`
        return ingest(payload.transcripts(), store, options, repo=repo), choice


def _counts(summary: IngestSummary, choice: ProjectChoice) -> dict[str, Any]:
    assert choice.project is not None
    nodes = sum(summary.nodes_by_level.values())
    written = summary.written
    message = (
        f"{nodes} nodes ({written.nodes} new), {summary.anchors} anchors "
        f"({written.anchors} new) into project {choice.project} (from {choice.source})"
    )
    if summary.pending_edits:
        message += f"; {summary.pending_edits} edit(s) wait for their commit"
    if summary.skipped:
        message += f"; {len(summary.skipped)} bad record(s) skipped"
    return {
        "outcome": "ok",
        "message": message,
        "project": choice.project.value,
        "project_source": choice.source,
        "repo": summary.repo.value,
        "nodes": nodes,
        "new_nodes": written.nodes,
        "anchors": summary.anchors,
        "new_anchors": written.anchors,
        "pending_edits": summary.pending_edits,
        "bad_records": len(summary.skipped),
    }
