"""Scenes for tests on real histories: a repository, a project, the real `mem` CLI and the
lookup service, and helpers to hover every line of every file and say where a memory shows."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from poimen_memory.domain import ProjectId
from poimen_memory.lookup import ByGitRequest, LookupService, build_service
from poimen_memory.recording import pending_resolver
from poimen_memory.store import Store

from .gitrepo import (
    FixtureRepo,
    blame_at_head,
)

APP = "src/app.rs"

# file -> line -> node text -> the node's JSON, for every line of every file at HEAD.
Seen = dict[str, dict[int, dict[str, dict[str, Any]]]]


# -- files ------------------------------------------------------------------------------------


def base(tag: str, n: int = 20) -> list[str]:
    """``n`` distinct lines of code, each unique in the repository."""
    return [f"    let {tag}_{i} = stage({i});" for i in range(1, n + 1)]


def put(repo: FixtureRepo, path: str, lines: list[str]) -> None:
    repo.write(path, "".join(f"{line}\n" for line in lines))


def insert(repo: FixtureRepo, path: str, after: int, new: list[str]) -> None:
    """Insert ``new`` after line ``after`` (0: at the top)."""
    lines = repo.lines(path)
    put(repo, path, lines[:after] + new + lines[after:])


def head_lines(repo: FixtureRepo, path: str) -> list[str]:
    return repo.git("show", f"HEAD:{path}").splitlines()


# -- memories ---------------------------------------------------------------------------------


def memory(text: str, *anchors: dict[str, Any]) -> dict[str, Any]:
    """An L0 node of generic JSONL with the given anchors."""
    return {
        "type": "node",
        "level": "L0",
        "query_id": "q-history",
        "text": text,
        "anchors": list(anchors),
        "created_at": "2026-08-20T07:00:00Z",
    }


def at(file: str, first: int, last: int, commit: str | None = None) -> dict[str, Any]:
    """An anchor on lines ``first``-``last``: at HEAD, or as they are in ``commit``."""
    anchor: dict[str, Any] = {"file": file, "lines": [first, last]}
    if commit is not None:
        anchor["commit"] = commit
    return anchor


def stamp(clock: int) -> str:
    return datetime.fromtimestamp(clock, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def trace(
    revision: str, path: str, ranges: list[tuple[int, int]], transcript: str, clock: int
) -> dict[str, Any]:
    """An Agent Trace record as the spec's reference hook writes it (Claude Code)."""
    return {
        "version": "1.0",
        "id": str(uuid.uuid4()),
        "timestamp": stamp(clock),
        "vcs": {"type": "git", "revision": revision},
        "tool": {"name": "claude-code"},
        "files": [
            {
                "path": path,
                "conversations": [
                    {
                        "url": f"file:///home/dev/.claude/projects/app/{transcript}.jsonl",
                        "contributor": {"type": "ai", "model_id": "anthropic/claude-sonnet-4"},
                        "ranges": [{"start_line": a, "end_line": b} for a, b in ranges],
                    }
                ],
            }
        ],
        "metadata": {"hook": "PostToolUse", "tool_name": "Edit"},
    }


# -- the scene: one repository, one project, the real CLI and the service ---------------------


@dataclass
class Scene:
    repo: FixtureRepo
    project: ProjectId
    store: Store
    env: dict[str, str]
    tmp: Path
    inputs: int = field(default=0)

    def mem(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "poimen_memory.cli", *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    def ingest(
        self, records: list[dict[str, Any]], fmt: str = "jsonl", repo: FixtureRepo | None = None
    ) -> dict[str, Any]:
        """`mem ingest --json` of ``records`` against ``repo`` (default: the scene's) at its
        HEAD; the summary."""
        self.inputs += 1
        src = self.tmp / f"input-{self.inputs}.jsonl"
        src.write_text("".join(json.dumps(r) + "\n" for r in records))
        where = repo or self.repo
        done = self.mem(
            "ingest", str(src), "--repo", str(where.root), "--project", self.project.value,
            "--format", fmt, "--json",
        )  # fmt: skip
        assert done.returncode == 0, f"mem ingest failed: {done.stderr}"
        summary: dict[str, Any] = json.loads(done.stdout)
        assert summary["skipped"] == [], summary
        return summary

    def service(self) -> LookupService:
        return build_service(
            self.store, [self.repo.root], self.project, cache_path=self.tmp / "lookup-cache.db"
        )

    def by_git(self, service: LookupService, **body: Any) -> dict[str, Any]:
        return service.by_git(ByGitRequest.parse(body)).to_json()

    def sweep(self) -> Seen:
        """Hover every line of every file at HEAD: {file: {line: {L0 text: node}}}."""
        service = self.service()
        seen: Seen = {}
        for path in self.repo.git("ls-tree", "-r", "--name-only", "HEAD").splitlines():
            count = len(head_lines(self.repo, path))
            self.by_git(service, file=path, line=0)  # one whole-file blame, then cached lines
            seen[path] = {}
            for line in range(1, count + 1):
                body = self.by_git(service, file=path, line=line)
                seen[path][line] = {n["text"]: n for n in body["nodes"] if n["level"] == "L0"}
        return seen

    def graph(self) -> str:
        return self.repo.git("log", "--graph", "--oneline", "--all")

    def expect(self, seen: Seen, marker: str, expected: dict[str, set[int]]) -> None:
        """The memory whose text contains ``marker`` shows on exactly ``expected`` ({file:
        lines}) and on nothing else."""
        got = shown(seen, marker)
        assert got == expected, (
            f"{marker!r} shows on {got}, expected {expected}\n{self.graph()}\n{self.blame_table()}"
        )

    def blame_table(self) -> str:
        rows = []
        for path in self.repo.git("ls-tree", "-r", "--name-only", "HEAD").splitlines():
            blame = blame_at_head(self.repo, path)
            text = head_lines(self.repo, path)
            rows += [f"{path}:{n} {blame[n][:7]} {text[n - 1]}" for n in sorted(blame)]
        return "\n".join(rows)

    def lines_from(self, path: str, commit: str) -> set[int]:
        """HEAD lines of ``path`` that `git blame` attributes to ``commit``."""
        return {n for n, c in blame_at_head(self.repo, path).items() if c == commit}


def shown(seen: Seen, marker: str) -> dict[str, set[int]]:
    """{file: lines} where the L0 node whose text contains ``marker`` shows (files without
    any left out)."""
    out: dict[str, set[int]] = {}
    for path, lines in seen.items():
        hits = {n for n, nodes in lines.items() if any(marker in t for t in nodes)}
        if hits:
            out[path] = hits
    return out


def nodes_of(seen: Seen, marker: str) -> list[dict[str, Any]]:
    """Every hover's node whose text contains ``marker``."""
    return [
        node
        for lines in seen.values()
        for nodes in lines.values()
        for text, node in nodes.items()
        if marker in text
    ]


def expect_landed(seen: Seen, marker: str, recorded: str, landed: str, how: str) -> None:
    """Every hover showing the memory says where it was recorded and where it landed."""
    found = nodes_of(seen, marker)
    assert found
    for node in found:
        assert node.get("landed") == {
            "recorded_commit": recorded,
            "landed_commit": landed,
            "how": how,
        }, node
        # The citation keeps its meaning: the commit the memory was recorded on.
        assert node["git_commit"]["sha"] == recorded
        assert node["git_context"]["commit_sha"] == recorded


def expect_found_normally(seen: Seen, marker: str) -> None:
    """Every hover showing the memory found it at its own origin: no ``landed`` key."""
    found = nodes_of(seen, marker)
    assert found
    for node in found:
        assert "landed" not in node, node


def texts_at(repo: FixtureRepo, path: str, lines: set[int]) -> list[str]:
    at_head = head_lines(repo, path)
    return [at_head[n - 1] for n in sorted(lines)]


def on_main(repo: FixtureRepo) -> None:
    repo.git("checkout", "-q", "main")


def is_ancestor(repo: FixtureRepo, commit: str, of: str) -> bool:
    try:
        repo.git("merge-base", "--is-ancestor", commit, of)
    except AssertionError:
        return False
    return True


@pytest.fixture
def scene(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    store: Store,
    store_dsn: str,
    project: ProjectId,
) -> Scene:
    name = request.node.name.replace("_", "-")  # a repository identity of its own
    repo = FixtureRepo.create(tmp_path / "repo", f"git@github.com:org/{name}.git")
    env = {
        **os.environ,
        "POIMEN_DSN": store_dsn,
        "POIMEN_CACHE_DIR": str(tmp_path / "cache"),
        "POIMEN_CONFIG": str(tmp_path / "none.toml"),
    }
    return Scene(repo, project, store, env, tmp_path)


def resolving_service(
    store: Store, repo: FixtureRepo, project: ProjectId, tmp: Path
) -> LookupService:
    """A lookup service as the language server and MCP build it: pending anchors resolved on
    lookup, no shared blame cache, its blame cache in ``tmp``."""
    return build_service(
        store,
        [repo.root],
        project,
        cache_path=tmp / "blame.db",
        shared_blames=False,
        pending=pending_resolver(store),
    )
