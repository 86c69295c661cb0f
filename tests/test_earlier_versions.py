"""Earlier versions of a line (``history``), the hover's words for how a memory arrived, and
Agent Trace content hashes: on real repositories, through the real CLI and the service."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest

from poimen_memory.lookup import ByGitRequest, LookupInputError
from poimen_memory.render import render_hover, render_text

from .gitrepo import ALICE, BOB, CAROL
from .scenes import APP, Scene, at, base, memory, put, trace


def _three_versions(scene: Scene) -> dict[str, str]:
    """Line 10 of APP written three times: v1 (memory A), v2 (memory B), v3 (no memory)."""
    repo = scene.repo
    lines = base("e")
    lines[9] = "    let limit = 10; // v1"
    put(repo, APP, lines)
    a = repo.commit("a", "Limit of ten", ALICE)
    scene.ingest([memory("memory A: why ten", at(APP, 10, 10))])
    lines[9] = "    let limit = 20; // v2"
    put(repo, APP, lines)
    b = repo.commit("b", "Limit of twenty", BOB)
    scene.ingest([memory("memory B: why twenty", at(APP, 10, 10))])
    lines[9] = "    let limit = 30; // v3"
    lines[14] = "    let other = 1; // edited beside it"
    put(repo, APP, lines)
    c = repo.commit("c", "Limit of thirty", CAROL)
    return {"a": a, "b": b, "c": c}


def _l0(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {n["text"]: n for n in body["nodes"] if n["level"] == "L0"}


def test_earlier_versions_off_by_default(scene: Scene) -> None:
    _three_versions(scene)
    service = scene.service()
    assert _l0(scene.by_git(service, file=APP, line=10)) == {}


def test_earlier_versions_one_and_two_back(scene: Scene) -> None:
    commits = _three_versions(scene)
    service = scene.service()
    one = _l0(scene.by_git(service, file=APP, line=10, history=1))
    assert set(one) == {"memory B: why twenty"}
    assert one["memory B: why twenty"]["earlier_version"]["replaced_by"] == commits["c"]
    assert one["memory B: why twenty"]["earlier_version"]["depth"] == 1
    assert one["memory B: why twenty"]["lines"] == [10]

    two = _l0(scene.by_git(service, file=APP, line=10, history=True))  # true: depth 3
    assert set(two) == {"memory B: why twenty", "memory A: why ten"}
    assert two["memory A: why ten"]["earlier_version"] == {
        "replaced_by": commits["b"],
        "replaced_at": two["memory A: why ten"]["earlier_version"]["replaced_at"],
        "depth": 2,
    }


def test_earlier_versions_stay_on_the_line_that_replaced_them(scene: Scene) -> None:
    """Every other line, with history on, shows neither memory: line 15 was changed by the
    same commit, but in another hunk; the rest were never replaced."""
    _three_versions(scene)
    service = scene.service()
    for line in range(1, 21):
        if line == 10:
            continue
        assert _l0(scene.by_git(service, file=APP, line=line, history=3)) == {}, line


def test_a_line_with_its_own_memory_keeps_it_first(scene: Scene) -> None:
    """At v2 (memory B at its origin), history adds A as earlier, and B stays unlabelled."""
    commits = _three_versions(scene)
    service = scene.service()
    found = _l0(scene.by_git(service, file=APP, line=10, at=commits["b"], history=2))
    assert set(found) == {"memory B: why twenty", "memory A: why ten"}
    assert "earlier_version" not in found["memory B: why twenty"]
    assert found["memory A: why ten"]["earlier_version"]["replaced_by"] == commits["b"]


def test_history_through_the_cli(scene: Scene) -> None:
    commits = _three_versions(scene)
    done = scene.mem(
        "by-git", f"{APP}:10", "--repo", str(scene.repo.root), "--project",
        scene.project.value, "--history", "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    nodes = _l0(json.loads(done.stdout))
    assert nodes["memory A: why ten"]["earlier_version"]["replaced_by"] == commits["b"]
    plain = scene.mem(
        "by-git", f"{APP}:10", "--repo", str(scene.repo.root), "--project",
        scene.project.value, "--history", "1",
    )  # fmt: skip
    assert plain.returncode == 0, plain.stderr
    assert "about an earlier version of this line, replaced by" in plain.stdout
    assert "memory A" not in plain.stdout


@pytest.mark.parametrize("value", ["x", -1, 11, 2.5, None])
def test_history_field_is_checked(value: object) -> None:
    with pytest.raises(LookupInputError) as caught:
        ByGitRequest.parse({"file": APP, "line": 1, "history": value})
    assert caught.value.field == "history"


def test_hover_says_how_a_memory_landed(scene: Scene) -> None:
    """A squash-merged branch: the hover and the text name both commits."""
    repo = scene.repo
    put(repo, APP, base("s"))
    repo.commit("initial", "Initial", CAROL)
    repo.git("checkout", "-q", "-b", "feature")
    lines = base("s")
    lines[4] = "    let retries = compute_retries(budget);"
    put(repo, APP, lines)
    recorded = repo.commit("f1", "Retries from budget", ALICE)
    scene.ingest([memory("memory S: retries follow the budget", at(APP, 5, 5))])
    repo.git("checkout", "-q", "main")
    repo.git("merge", "--squash", "feature")
    landed = repo.commit("squash", "Feature (#1)", BOB)
    repo.git("branch", "-D", "feature")
    service = scene.service()
    result = service.by_git(ByGitRequest.parse({"file": APP, "line": 5}))
    [evidence] = result.evidence
    assert evidence.landed is not None
    expected = f"recorded on {recorded[:7]}, landed as {landed[:7]}"
    assert expected in render_hover(result)
    assert expected in render_text(result)


def _hashed(lines: list[str]) -> str:
    return "sha256:" + hashlib.sha256("\n".join(lines).encode()).hexdigest()


@pytest.mark.parametrize("matching", [True, False])
def test_agent_trace_content_hash_is_checked(scene: Scene, matching: bool) -> None:
    repo = scene.repo
    put(repo, APP, base("t"))
    repo.commit("initial", "Initial", CAROL)
    lines = base("t")
    lines[2:4] = ["    let agent_a = 1;", "    let agent_b = 2;"]
    put(repo, APP, lines)
    produced = repo.commit("agent", "Agent change", ALICE)
    record = trace(produced, APP, [(3, 4)], "session-hash", repo.clock)
    wanted = lines[2:4] if matching else ["    let something = 0;", "    else"]
    record["files"][0]["conversations"][0]["ranges"][0]["content_hash"] = _hashed(wanted)
    summary = scene.ingest([record], fmt="agent-trace")
    service = scene.service()
    shown = {
        line for line in range(1, len(lines) + 1) if _l0(scene.by_git(service, file=APP, line=line))
    }
    if matching:
        assert shown == {3, 4}
        assert summary["unanchored_edits"] == 0
    else:
        assert shown == set()
        assert summary["unanchored_edits"] == 1
