"""Rules of rewritten history and of pending anchors that nothing else guards (issue 26).

Each test builds a real repository, records memories with the real `mem` CLI (or the
Recorder an MCP or LSP `remember` uses), and asserts what a user is shown: hovers of single
lines, range lookups, code lenses, `mem remember --json`, `mem ingest --json`. Each rule's
test fails when that rule alone is taken out of the code.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest

from poimen_memory.domain import ProjectId
from poimen_memory.lookup import (
    DocumentRequest,
    HoverRequest,
    LookupService,
    RememberRequest,
)
from poimen_memory.lookup.results import COMMIT
from poimen_memory.recording import Recorder
from poimen_memory.store import Store

from .gitrepo import ALICE, BOB, CAROL, FixtureRepo, forget_unreachable, numbered
from .scenes import (
    APP,
    Scene,
    at,
    base,
    insert,
    memory,
    nodes_of,
    on_main,
    put,
    resolving_service,
    shown,
    texts_at,
    trace,
)

# -- helpers ----------------------------------------------------------------------------------

TOTALS = "Totals above the cap are refused."
REPORTS = "Reports go out, then to the archive."


def _squash(scene: Scene) -> tuple[str, str, str]:
    """Two agent commits on a branch, squash-merged into a main that moved; the branch deleted
    and its commits pruned (B1, B2, S). At HEAD, all from S: 16 total, 17 if, 18 audit (its
    text is also line 13), 19 return (B2 rewrote B1's line), 20 ``}``, 21 report, 22 publish,
    23 archive."""
    repo = scene.repo
    initial = base("k")
    initial[9] = '        audit("cap");'  # B1 writes this text again
    put(repo, APP, initial)
    repo.commit("initial", "Initial app", CAROL)
    repo.git("checkout", "-q", "-b", "feature")
    insert(repo, APP, 12, [
        "    let total = tally(entries);",
        "    if total > CAP {",
        '        audit("cap");',
        "        return Err(TooMuch);",
        "    }",
        "    let report = draw(total);",
    ])  # fmt: skip
    b1 = repo.commit("B1", "Refuse totals above the cap", ALICE)
    scene.ingest([memory(TOTALS, at(APP, 13, 18))])
    repo.set_line(APP, 16, "        return Err(TooMuch::by(total));")
    insert(repo, APP, 18, ["    send(report);", "    archive_of(report, total);"])
    b2 = repo.commit("B2", "Send and archive the report", ALICE)
    scene.ingest([memory(REPORTS, at(APP, 16, 16), at(APP, 19, 20))])
    on_main(repo)
    insert(repo, APP, 0, ["// app", "use crate::report;", "use crate::CAP;"])
    repo.commit("main", "Imports", BOB)
    repo.git("merge", "--squash", "feature")
    s = repo.commit("S", "Totals and reports (#9)", BOB)
    repo.git("branch", "-D", "feature")
    forget_unreachable(repo)
    assert scene.lines_from(APP, s) == set(range(16, 24))
    assert texts_at(repo, APP, {13, 18}) == ['        audit("cap");'] * 2
    assert texts_at(repo, APP, {19, 20}) == ["        return Err(TooMuch::by(total));", "    }"]
    return b1, b2, s


def _evidence(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [n for n in body["nodes"] if n["level"] == "L0"]


def _by_line(body: dict[str, Any], lines: range) -> dict[int, dict[str, Any]]:
    """A range answer as {line: {L0 text: its `landed`}}, from each node's ``lines``."""
    out: dict[int, dict[str, Any]] = {n: {} for n in lines}
    for node in _evidence(body):
        for n in node.get("lines", []):
            out[n][node["text"]] = node.get("landed")
    return out


def _range_by_cli(scene: Scene, first: int, last: int) -> dict[str, Any]:
    done = scene.mem(
        "by-git", f"{APP}:{first}-{last}", "--repo", str(scene.repo.root),
        "--project", scene.project.value, "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    body: dict[str, Any] = json.loads(done.stdout)
    return body


def _aliases(dsn: str, project: ProjectId) -> set[tuple[str, str, str]]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT old_commit, new_commit, how FROM commit_alias WHERE project = %s",
            (project.value,),
        ).fetchall()
    return {(old, new, how) for old, new, how in rows}


# -- rewritten history ------------------------------------------------------------------------


def test_a_moved_block_shows_no_squash_memory(scene: Scene) -> None:
    """A's lines are moved by a later commit M: blame names M, which has no anchor; A is
    still in HEAD's history, so its anchor is never re-matched on M's lines."""
    repo = scene.repo
    put(repo, APP, base("mv"))
    repo.commit("initial", "Initial app", CAROL)
    block = [
        "    let lease = pool.lease(tenant)?;",
        "    lease.pin(region);",
        "    lease.renew_in(Duration::from_secs(30));",
    ]
    insert(repo, APP, 4, block)
    a = repo.commit("A", "Lease per tenant", ALICE)
    scene.ingest([memory("Leases are pinned to the tenant's region.", at(APP, 5, 7))])
    lines = repo.lines(APP)
    put(repo, APP, lines[:4] + lines[7:18] + block + lines[18:])
    m = repo.commit("M", "Lease later", BOB)

    moved = {16, 17, 18}
    assert texts_at(repo, APP, moved) == block
    assert scene.lines_from(APP, m) == moved
    assert scene.lines_from(APP, a) == set()
    seen = scene.sweep()
    scene.expect(seen, "Leases are pinned to the tenant's region.", {})
    whole = _range_by_cli(scene, 1, len(repo.lines(APP)))
    assert _evidence(whole) == [], whole


def test_a_later_commit_writing_one_of_four_recorded_lines_shows_nothing(scene: Scene) -> None:
    """An abandoned branch recorded four lines; a later commit writes one of them again (in
    the same file, its text nowhere else): S holds a quarter of the recorded lines, not the
    half that makes it the branch's landing."""
    repo = scene.repo
    put(repo, APP, base("ab"))
    repo.commit("initial", "Initial app", CAROL)
    repo.git("checkout", "-q", "-b", "gone")
    recorded = [
        "    let budget = Budget::for_tenant(tenant);",
        "    budget.reserve(request.cost())?;",
        "    let reply = upstream.call(request)?;",
        "    budget.settle(reply.cost());",
    ]
    insert(repo, APP, 6, recorded)
    repo.commit("G", "Budget per tenant", ALICE)
    scene.ingest([memory("Abandoned: a budget per tenant.", at(APP, 7, 10))])
    on_main(repo)
    insert(repo, APP, 14, [recorded[2]])
    c = repo.commit("C", "Call upstream", BOB)

    assert scene.lines_from(APP, c) == {15}
    seen = scene.sweep()
    scene.expect(seen, "Abandoned: a budget per tenant.", {})


def test_a_brace_matched_on_one_side_only_shows_no_memory(scene: Scene) -> None:
    """Line 20 (``}``) sits between B2's rewritten line (19) and B1's line 21, whose anchor
    holds a ``}`` just before it: a line too short to match needs matched lines of the same
    anchor on both sides. Asked for as a range (the lines' neighbours known) and as code
    lenses (the whole file's), it shows no memory."""
    b1, _, _ = _squash(scene)
    ranged = _by_line(_range_by_cli(scene, 16, 23), range(16, 24))
    assert TOTALS in ranged[21], ranged
    assert ranged[20] == {}, ranged
    service = scene.service()
    lenses = service.document(DocumentRequest(file=str(scene.repo.root / APP)))
    assert lenses is not None
    on_21 = {m[COMMIT] for m in lenses.by_line.get(21, ())}
    assert on_21 == {b1}, lenses.by_line
    assert lenses.by_line.get(20, ()) == (), lenses.by_line
    # The rewritten commit's memory is cited at that commit, as its lens shows it.
    (shown,) = lenses.by_line[21]
    assert lenses.citation(shown).commit.sha.value == b1


def test_text_recorded_on_two_abandoned_branches_shows_neither_on_a_third_line(
    scene: Scene,
) -> None:
    """Two abandoned branches recorded the same line in the same file; a third commit writes
    it once more: recorded at two places, it is told apart by neither."""
    repo = scene.repo
    put(repo, APP, base("tw"))
    initial = repo.commit("initial", "Initial app", CAROL)
    text = "    let shard = ring.shard_of(&key);"
    repo.git("checkout", "-q", "-b", "one")
    insert(repo, APP, 4, [text])
    repo.commit("G1", "Shard by ring", ALICE)
    scene.ingest([memory("Abandoned one: shards by ring.", at(APP, 5, 5))])
    repo.git("checkout", "-q", "-b", "two", initial)
    insert(repo, APP, 12, [text])
    repo.commit("G2", "Shard by ring, later", BOB)
    scene.ingest([memory("Abandoned two: shards by ring.", at(APP, 13, 13))])
    on_main(repo)
    # With a line of its own: C is not the branches' one-line change (the same patch id).
    insert(repo, APP, 8, [text, "    route(&key, shard)?;"])
    c = repo.commit("C", "Shards", CAROL)

    assert scene.lines_from(APP, c) == {9, 10}
    seen = scene.sweep()
    scene.expect(seen, "Abandoned one: shards by ring.", {})
    scene.expect(seen, "Abandoned two: shards by ring.", {})


def test_a_found_rewrite_is_stored_as_a_commit_alias(scene: Scene, store_dsn: str) -> None:
    """The first lookup that finds memories of rewritten commits stores old -> new in
    ``commit_alias`` (shared by everyone using the store); a lookup with nothing rewritten
    stores none."""
    b1, b2, s = _squash(scene)
    assert _aliases(store_dsn, scene.project) == set()
    service = scene.service()
    plain = scene.by_git(service, file=APP, line=2)
    assert _evidence(plain) == []
    assert _aliases(store_dsn, scene.project) == set()
    hover = scene.by_git(service, file=APP, line=16)
    assert [(n["text"], n["landed"]) for n in _evidence(hover)] == [
        (TOTALS, {"recorded_commit": b1, "landed_commit": s, "how": "squash"})
    ]
    assert _aliases(store_dsn, scene.project) == {(b1, s, "squash")}
    scene.by_git(service, file=APP, line=22)
    assert _aliases(store_dsn, scene.project) == {(b1, s, "squash"), (b2, s, "squash")}
    # Found again (another process: the real CLI), nothing is stored twice.
    again = _range_by_cli(scene, 16, 23)
    assert {n["text"] for n in _evidence(again)} == {TOTALS, REPORTS}
    assert _aliases(store_dsn, scene.project) == {(b1, s, "squash"), (b2, s, "squash")}


def test_a_range_lookup_shows_each_line_what_hovering_it_shows(scene: Scene) -> None:
    """A squash whose lines are asked for as a range (`mem by-git FILE:16-23`) and one at a
    time: every line shows the same memories, landed the same way. The per-line answer is
    the rule: line 18's text is also line 13, so it shows nothing either way."""
    b1, b2, s = _squash(scene)
    lines = range(16, 24)
    ranged = _by_line(_range_by_cli(scene, 16, 23), lines)
    service = scene.service()
    single = {
        n: {m["text"]: m.get("landed") for m in _evidence(scene.by_git(service, file=APP, line=n))}
        for n in lines
    }
    assert ranged == single, (ranged, single)
    totals = {"recorded_commit": b1, "landed_commit": s, "how": "squash"}
    reports = {"recorded_commit": b2, "landed_commit": s, "how": "squash"}
    assert single == {
        16: {TOTALS: totals},
        17: {TOTALS: totals},
        18: {},
        19: {REPORTS: reports},
        20: {},
        21: {TOTALS: totals},
        22: {REPORTS: reports},
        23: {REPORTS: reports},
    }
    # The service's own range answer agrees too.
    assert _by_line(scene.by_git(scene.service(), file=APP, lines=[16, 23]), lines) == single


def test_a_range_counts_the_places_its_other_lines_commits_recorded(scene: Scene) -> None:
    """A text recorded by an abandoned branch O and by X (in the history; X's line later
    deleted) is written again by S. Recorded at two places, S's line shows nothing: asked
    for alone, and in a range that also holds a line of X (whose anchors still count)."""
    repo = scene.repo
    put(repo, APP, base("pl"))
    initial = repo.commit("initial", "Initial app", CAROL)
    text = "    let quota = tenant.quota_in(region);"
    repo.git("checkout", "-q", "-b", "gone", initial)
    insert(repo, APP, 15, [text])
    repo.commit("O", "Quota per region", BOB)
    scene.ingest([memory("Abandoned: quota per region.", at(APP, 16, 16))])
    on_main(repo)
    insert(repo, APP, 4, [text, "    enforce(quota)?;", "    log_quota(quota);"])
    x = repo.commit("X", "Enforce quotas", ALICE)
    scene.ingest([memory("Quotas are enforced.", at(APP, 5, 6))])
    put(repo, APP, [line for line in repo.lines(APP) if line != text])
    repo.commit("D", "Quota from the caller", BOB)
    insert(repo, APP, 10, [text, "    meter(quota);"])
    s = repo.commit("S", "Meter quotas", CAROL)

    assert scene.lines_from(APP, x) == {5, 6}
    assert scene.lines_from(APP, s) == {11, 12}
    count = len(repo.lines(APP))
    ranged = _by_line(_range_by_cli(scene, 1, count), range(1, count + 1))
    service = scene.service()
    single = {
        n: {m["text"]: m.get("landed") for m in _evidence(scene.by_git(service, file=APP, line=n))}
        for n in range(1, count + 1)
    }
    assert ranged == single, (ranged, single)
    assert {n: set(texts) for n, texts in single.items() if texts} == {5: {"Quotas are enforced."}}


# -- pending anchors --------------------------------------------------------------------------

WORK = "src/engine.rs"


@pytest.fixture
def work(tmp_path: Path) -> FixtureRepo:
    repo = FixtureRepo.create(tmp_path / "work", f"git@github.com:org/{tmp_path.name}.git")
    repo.write(WORK, numbered("// engine", 20))
    repo.commit("base", "Initial engine", ALICE)
    return repo


@pytest.fixture
def resolving(store: Store, work: FixtureRepo, project: ProjectId, tmp_path: Path) -> LookupService:
    """A lookup service that resolves pending anchors on lookup, as the LSP and MCP do."""
    return resolving_service(store, work, project, tmp_path)


def _remember(recorder: Recorder, **body: object) -> dict[str, Any]:
    out: dict[str, Any] = recorder.remember(RememberRequest.parse(body)).model_dump(mode="json")
    return out


def _hover(service: LookupService, repo: FixtureRepo, line: int) -> list[str]:
    found = service.hover(HoverRequest(file=str(repo.root / WORK), line=line))
    return [] if found is None else [m.node.text for m in found.memories]


def _hovers(service: LookupService, repo: FixtureRepo) -> dict[int, list[str]]:
    """Every line of the file at HEAD that shows a memory, with what it shows."""
    count = len(repo.git("show", f"HEAD:{WORK}").splitlines())
    found = {n: _hover(service, repo, n) for n in range(1, count + 1)}
    return {n: texts for n, texts in found.items() if texts}


def _splice(repo: FixtureRepo, after: int, new: list[str]) -> None:
    lines = repo.lines(WORK)
    repo.write(WORK, "\n".join(lines[:after] + new + lines[after:]) + "\n")


def test_an_edited_line_and_two_braces_committed_anchor_nothing(
    resolving: LookupService, work: FixtureRepo
) -> None:
    """Remembered: a line and the two braces after it. The human edits that line before
    committing: what comes back are the braces alone, which prove nothing."""
    recorder = Recorder(resolving)
    _splice(work, 5, ["    if armed {", "        launch(rocket);", "    }", "}"])
    out = _remember(recorder, text="Launch only when armed.", file=WORK, lines=[7, 9])
    assert [(p["line_start"], p["line_end"]) for p in out["pending"]] == [(7, 9)]
    work.set_line(WORK, 7, "        launch(rocket, fuel_for(orbit));")
    work.commit("launch", "Launch when armed", BOB)
    assert texts_at(work, WORK, {8, 9}) == ["    }", "}"]
    assert _hovers(resolving, work) == {}


def test_an_expired_pending_anchor_is_never_placed_beside_a_live_one(
    resolving: LookupService, work: FixtureRepo, store_dsn: str
) -> None:
    """Two memories wait in one file; one of them expires. The commit holds both: the live
    one shows, the expired one never does."""
    recorder = Recorder(resolving)
    _splice(work, 4, ["    let fuel = tank.level();", "    gauge.show(fuel);"])
    _splice(work, 14, ["    let heat = probe.read();", "    alarm.check(heat)?;"])
    live = _remember(recorder, text="Fuel is shown as read.", file=WORK, lines=[5, 6])
    old = _remember(recorder, text="Heat is checked on every read.", file=WORK, lines=[15, 16])
    assert live["pending"]
    assert old["pending"]
    with psycopg.connect(store_dsn, autocommit=True) as conn:
        conn.execute(
            "UPDATE pending_anchor SET expires_at = now() - interval '1 second' "
            "WHERE project = %s AND node_sha256 = %s",
            (old["project"], old["node"]),
        )
    work.commit("gauges", "Fuel and heat", BOB)
    assert _hovers(resolving, work) == {
        5: ["Fuel is shown as read."],
        6: ["Fuel is shown as read."],
    }


def _mem(repo: FixtureRepo, env: dict[str, str], *argv: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "poimen_memory.cli", *argv, "--json"],
        cwd=repo.root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    out: dict[str, Any] = json.loads(done.stdout)
    return out


def _instant(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def test_pending_days_sets_when_a_remembered_line_expires(
    work: FixtureRepo, store_dsn: str, project: ProjectId, tmp_path: Path
) -> None:
    """`mem remember` with POIMEN_PENDING_DAYS=2.5: the line waits two and a half days, as
    the answer and the stored row say."""
    env = {
        **os.environ,
        "POIMEN_DSN": store_dsn,
        "POIMEN_PROJECT": project.value,
        "POIMEN_CONFIG": str(tmp_path / "none.toml"),
        "POIMEN_PENDING_DAYS": "2.5",
    }
    _splice(work, 3, ["    let torque = motor.torque();"])
    before = datetime.now(UTC).replace(microsecond=0)
    out = _mem(work, env, "remember", f"{WORK}:4", "Torque is read once a tick.")
    after = datetime.now(UTC)
    [waiting] = out["pending"]
    expires = _instant(waiting["expires_at"])
    assert before + timedelta(days=2.5) <= expires <= after + timedelta(days=2.5), waiting
    with psycopg.connect(store_dsn, autocommit=True) as conn:
        [(stored,)] = conn.execute(
            "SELECT expires_at - recorded_at FROM pending_anchor WHERE project = %s",
            (project.value,),
        ).fetchall()
    assert stored == timedelta(days=2.5)


def test_pending_days_decides_whether_an_ingested_edit_still_waits(scene: Scene) -> None:
    """An agent's edit of three days ago, not committed yet, ingested with
    POIMEN_PENDING_DAYS=2: past waiting, left unanchored. With 5: it waits, five days from
    the edit."""
    repo = scene.repo
    repo.clock = int(time.time()) - 3 * 86400
    put(repo, APP, base("pd"))
    r = repo.commit("R", "Initial app", CAROL)
    edit = [
        "    let quota = Quota::for_tenant(tenant);",
        "    quota.check(request.size())?;",
        "    quota.record(request.size());",
    ]
    insert(repo, APP, 6, edit)
    short = trace(r, APP, [(7, 9)], "pending-two-days", repo.clock + 600)
    long = trace(r, APP, [(7, 9)], "pending-five-days", repo.clock + 600)

    scene.env["POIMEN_PENDING_DAYS"] = "2"
    summary = scene.ingest([short], fmt="agent-trace")
    assert (summary["pending_edits"], summary["unanchored_edits"]) == (0, 1), summary

    scene.env["POIMEN_PENDING_DAYS"] = "5"
    summary = scene.ingest([long], fmt="agent-trace")
    assert (summary["pending_edits"], summary["unanchored_edits"]) == (1, 0), summary
    with psycopg.connect(scene.env["POIMEN_DSN"], autocommit=True) as conn:
        rows = conn.execute(
            "SELECT expires_at - recorded_at, expires_at > now() FROM pending_anchor "
            "WHERE project = %s",
            (scene.project.value,),
        ).fetchall()
    assert rows == [(timedelta(days=5), True)]

    # Committed now, the waiting edit shows (the expired one does not: it was never kept).
    repo.commit("C", "Quota per tenant", ALICE)
    done = scene.mem("db", "resolve-pending", "--project", scene.project.value,
                     "--repo", str(repo.root))  # fmt: skip
    assert done.returncode == 0, done.stderr
    seen = scene.sweep()
    assert shown(seen, "pending-five-days") == {APP: {7, 8, 9}}
    assert shown(seen, "pending-two-days") == {}
    assert nodes_of(seen, "pending-five-days")
