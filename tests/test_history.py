"""Issue 14 acceptance: memories survive real history.

Each test builds a small repository whose history goes through one real workflow (merge,
squash merge, rebase, cherry-pick, amend, fixup, force push, rename, revert, Agent Trace
hooks), records memories with the real `mem ingest` while the agent's commit is checked out,
then hovers every line of every file at HEAD through the lookup service. Each asserts both
sides: the memory shows on exactly the lines its change produced, and on no other line of any
file. A memory found through a rewritten commit carries
``"landed": {"recorded_commit", "landed_commit", "how"}``; one found normally has no such key.
"""

from __future__ import annotations

import json
import subprocess
import time

import pytest

from poimen_memory.lookup import ByCommitRequest

from .gitrepo import (
    ALICE,
    BOB,
    CAROL,
    FixtureRepo,
    clone,
    forget_unreachable,
    git_as,
    has_commit,
)
from .scenes import (
    APP,
    Scene,
    at,
    base,
    expect_found_normally,
    expect_landed,
    insert,
    is_ancestor,
    memory,
    on_main,
    put,
    shown,
    texts_at,
    trace,
)

# -- merges -----------------------------------------------------------------------------------


def test_h01_merge_keeps_memories(scene: Scene) -> None:
    repo = scene.repo
    put(repo, APP, base("m"))
    repo.commit("initial", "Initial app", CAROL)
    repo.git("checkout", "-q", "-b", "feature")
    agent = [
        "    let quota = limits.quota();",
        "    check_quota(quota)?;",
        "    audit_quota(quota);",
    ]
    insert(repo, APP, 12, agent)
    b = repo.commit("B", "Check the quota", ALICE)
    scene.ingest([memory("Quota is checked before the upload.", at(APP, 13, 15))])
    on_main(repo)
    insert(repo, APP, 0, ["// app: uploads", "use crate::limits;"])
    repo.commit("main", "Document the module", BOB)
    git_as(repo, BOB, "merge", "-q", "--no-ff", "-m", "Merge feature", "feature", authored=True)

    hits = {15, 16, 17}
    assert texts_at(repo, APP, hits) == agent
    assert scene.lines_from(APP, b) == hits
    seen = scene.sweep()
    scene.expect(seen, "Quota is checked before the upload.", {APP: hits})
    expect_found_normally(seen, "Quota is checked before the upload.")


def _squash_scene(scene: Scene) -> tuple[str, str, str]:
    """Two agent commits on a branch, squash-merged into a main that moved; the branch deleted
    and its commits pruned. (B1, B2, S)."""
    repo = scene.repo
    initial = base("s")
    initial[9] = '        audit("checkpoint");'  # B1 adds this text again
    put(repo, APP, initial)
    repo.commit("initial", "Initial app", CAROL)
    repo.git("checkout", "-q", "-b", "feature")
    insert(repo, APP, 12, [
        "    let total = sum(items);",
        "    if total > LIMIT {",
        '        audit("checkpoint");',
        "        return Err(Overflow);",
        "    }",
        "    let report = render(total);",
    ])  # fmt: skip
    b1 = repo.commit("B1", "Refuse totals over the limit", ALICE)
    scene.ingest([memory("Totals over LIMIT are refused.", at(APP, 13, 18))])
    repo.set_line(APP, 16, "        return Err(Overflow::new(total));")
    insert(repo, APP, 18, ["    publish(report);", "    archive(report, total);"])
    b2 = repo.commit("B2", "Publish and archive the report", ALICE)
    scene.ingest(
        [memory("Reports are published, then archived.", at(APP, 16, 16), at(APP, 19, 20))]
    )
    on_main(repo)
    insert(repo, APP, 0, ["// app", "use crate::report;", "use crate::limits::LIMIT;"])
    repo.commit("main", "Imports", BOB)
    repo.git("merge", "--squash", "feature")
    s = repo.commit("S", "Totals and reports (#12)", BOB)
    repo.git("branch", "-D", "feature")
    forget_unreachable(repo)
    assert not has_commit(repo, b1)
    assert not has_commit(repo, b2)
    return b1, b2, s


def test_h02_squash_merge_lands_memories(scene: Scene) -> None:
    b1, b2, s = _squash_scene(scene)
    repo = scene.repo
    # At HEAD: 16 total, 17 if, 18 audit (also line 13), 19 return (B2's text), 20 "}",
    # 21 report, 22 publish, 23 archive; all from S.
    assert scene.lines_from(APP, s) == set(range(16, 24))
    assert texts_at(repo, APP, {13, 18}) == ['        audit("checkpoint");'] * 2
    assert texts_at(repo, APP, {19, 20}) == ["        return Err(Overflow::new(total));", "    }"]
    seen = scene.sweep()
    # Not 18 (its text is also line 13), 19 (B2 rewrote it) nor 20 ("}" is too short to match).
    scene.expect(seen, "Totals over LIMIT are refused.", {APP: {16, 17, 21}})
    scene.expect(seen, "Reports are published, then archived.", {APP: {19, 22, 23}})
    expect_landed(seen, "Totals over LIMIT are refused.", b1, s, "squash")
    expect_landed(seen, "Reports are published, then archived.", b2, s, "squash")

    # End to end: the real `mem by-git --json` says the same, `landed` included.
    done = scene.mem(
        "by-git", f"{APP}:16", "--repo", str(repo.root), "--project", scene.project.value,
        "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    body = json.loads(done.stdout)
    evidence = [n for n in body["nodes"] if n["level"] == "L0"]
    assert [n["text"] for n in evidence] == ["Totals over LIMIT are refused."], body
    assert evidence[0]["landed"] == {"recorded_commit": b1, "landed_commit": s, "how": "squash"}
    assert evidence[0]["git_commit"]["sha"] == b1
    assert body == scene.by_git(scene.service(), file=APP, line=16)


# -- rebases and cherry-picks -----------------------------------------------------------------


def test_h03_rebase_onto_moved_main(scene: Scene) -> None:
    repo = scene.repo
    put(repo, APP, base("r", 24))
    repo.commit("initial", "Initial app", CAROL)
    repo.git("checkout", "-q", "-b", "feature")
    agent = [
        "    let deadline = now() + ttl;",
        "    if expired(deadline) {",
        "        retry_later();",
    ]
    insert(repo, APP, 16, agent)
    b = repo.commit("B", "Retry expired work later", ALICE)
    scene.ingest([memory("Expired work is retried later.", at(APP, 17, 19))])
    on_main(repo)
    insert(repo, APP, 2, ["// one", "// two", "// three", "// four"])
    repo.set_line(APP, 10, "    let r_6 = stage(6) * 2;")
    repo.commit("main", "Main moves on", BOB)
    repo.git("checkout", "-q", "feature")
    git_as(repo, ALICE, "rebase", "-q", "main")
    b2 = repo.git("rev-parse", "HEAD").strip()
    on_main(repo)
    repo.git("merge", "-q", "--ff-only", "feature")
    assert not is_ancestor(repo, b, "HEAD")

    hits = {21, 22, 23}
    assert texts_at(repo, APP, hits) == agent
    assert scene.lines_from(APP, b2) == hits
    seen = scene.sweep()
    scene.expect(seen, "Expired work is retried later.", {APP: hits})
    expect_landed(seen, "Expired work is retried later.", b, b2, "same-change")


def test_h04_rebase_conflict_resolved_by_hand(scene: Scene) -> None:
    repo = scene.repo
    lines = base("c")
    lines[9] = "    let timeout = 30;"
    put(repo, APP, lines)
    repo.commit("initial", "Initial app", CAROL)
    repo.git("checkout", "-q", "-b", "feature")
    repo.set_line(APP, 10, "    let timeout = 60;")
    agent = [
        "    let client = Client::new(timeout);",
        "    client.warm_up()?;",
        "    pool.add(client);",
    ]
    insert(repo, APP, 10, agent)
    b = repo.commit("B", "Pool warmed-up clients", ALICE)
    scene.ingest([memory("Clients are warmed up before pooling.", at(APP, 10, 13))])
    on_main(repo)
    repo.set_line(APP, 10, "    let timeout = 45;")
    repo.commit("main", "Timeout 45", BOB)
    repo.git("checkout", "-q", "feature")
    with pytest.raises(AssertionError, match="rebase"):
        git_as(repo, ALICE, "rebase", "-q", "main")
    resolved = [*lines[:9], "    let timeout = 90; // agreed with ops", *agent, *lines[10:]]
    put(repo, APP, resolved)
    repo.git("add", APP)
    git_as(repo, ALICE, "rebase", "--continue")
    b2 = repo.git("rev-parse", "HEAD").strip()
    on_main(repo)
    repo.git("merge", "-q", "--ff-only", "feature")

    assert scene.lines_from(APP, b2) == {10, 11, 12, 13}
    assert texts_at(repo, APP, {11, 12, 13}) == agent
    seen = scene.sweep()
    # Line 10 is the hand-resolved line: its text is not B's, so it never shows B's memory.
    scene.expect(seen, "Clients are warmed up before pooling.", {APP: {11, 12, 13}})
    expect_landed(seen, "Clients are warmed up before pooling.", b, b2, "squash")


def test_h05_cherry_pick_onto_the_new_main(scene: Scene) -> None:
    repo = scene.repo
    put(repo, APP, base("p"))
    initial = repo.commit("initial", "Initial app", CAROL)
    repo.git("checkout", "-q", "-b", "experiment")
    agent = [
        "    let cache = Cache::with_capacity(64);",
        "    cache.preload(&keys);",
        "    serve(cache)",
    ]
    insert(repo, APP, 14, agent)
    b = repo.commit("B", "Preload the cache", ALICE)
    scene.ingest([memory("The cache is preloaded with the hot keys.", at(APP, 15, 17))])
    repo.git("checkout", "-q", "-b", "release", initial)
    insert(repo, APP, 1, ["// release 2", "// stable"])
    repo.commit("R1", "Release notes", BOB)
    git_as(repo, BOB, "cherry-pick", b)
    picked = repo.git("rev-parse", "HEAD").strip()
    repo.git("branch", "-f", "main", "release")
    on_main(repo)
    # The experiment branch still exists: B is in the repository, not in HEAD's history.
    assert has_commit(repo, b)
    assert repo.git("branch", "--contains", b).split() == ["experiment"]

    hits = {17, 18, 19}
    assert texts_at(repo, APP, hits) == agent
    assert scene.lines_from(APP, picked) == hits
    seen = scene.sweep()
    scene.expect(seen, "The cache is preloaded with the hot keys.", {APP: hits})
    expect_landed(seen, "The cache is preloaded with the hot keys.", b, picked, "same-change")


def test_h05b_backport_newer_than_the_landed_commit_is_not_matched(scene: Scene) -> None:
    # S lands on main; later the same change is applied again by hand on an old release
    # branch (P, authored and committed after S) and a memory is recorded there. S is not
    # newer than P, so S's lines (no anchor of their own) never show it.
    repo = scene.repo
    put(repo, APP, base("q"))
    initial = repo.commit("initial", "Initial app", CAROL)
    lease = ["    let lease = acquire_lease()?;", "    lease.renew_every(30);"]
    insert(repo, APP, 8, lease)
    s = repo.commit("S", "Renew the lease", ALICE)
    repo.git("checkout", "-q", "-b", "release-1", initial)
    insert(repo, APP, 8, lease)
    p = repo.commit("P", "Backport: renew the lease", BOB)
    scene.ingest([memory("Backport: the lease is renewed every 30s.", at(APP, 9, 10))])
    on_main(repo)

    assert scene.lines_from(APP, s) == {9, 10}
    assert not is_ancestor(repo, p, "HEAD")
    seen = scene.sweep()
    scene.expect(seen, "Backport: the lease is renewed every 30s.", {})


# -- amend, fixup, force push -----------------------------------------------------------------


def test_h06_amend_that_edits_an_anchored_line(scene: Scene) -> None:
    repo = scene.repo
    put(repo, APP, base("a"))
    repo.commit("initial", "Initial app", CAROL)
    agent = [
        "    let span = tracer.start(name);",
        '    span.tag("tenant", tenant);',
        '    span.tag("region", REGION);',
        "    span.finish();",
    ]
    insert(repo, APP, 8, agent)
    a = repo.commit("A", "Trace the handler", ALICE)
    scene.ingest([memory("The handler is traced per tenant.", at(APP, 9, 12))])
    repo.set_line(APP, 11, '    span.tag("zone", zone_of(tenant));')
    git_as(repo, ALICE, "commit", "-q", "-a", "--amend", "--no-edit")
    amended = repo.git("rev-parse", "HEAD").strip()
    assert amended != a

    assert scene.lines_from(APP, amended) == {9, 10, 11, 12}
    seen = scene.sweep()
    scene.expect(seen, "The handler is traced per tenant.", {APP: {9, 10, 12}})
    expect_landed(seen, "The handler is traced per tenant.", a, amended, "squash")


def test_h07_fixup_and_autosquash(scene: Scene) -> None:
    repo = scene.repo
    put(repo, APP, base("f"))
    repo.commit("initial", "Initial app", CAROL)
    repo.git("checkout", "-q", "-b", "feature")
    agent = [
        "    let batch = queue.drain(128);",
        "    let sent = transport.send(&batch)?;",
        "    metrics.sent(sent);",
        "    queue.ack(&batch);",
    ]
    insert(repo, APP, 8, agent)
    a = repo.commit("A", "Send in batches", ALICE)
    scene.ingest([memory("Work is sent in batches of 128.", at(APP, 9, 12))])
    repo.set_line(APP, 10, "    let sent = transport.send_all(&batch).await?;")
    insert(repo, APP, 12, ["    queue.compact();"])
    f = repo.commit("F", "fixup! Send in batches", ALICE)
    scene.ingest([memory("send_all awaits every batch.", at(APP, 10, 10), at(APP, 13, 13))])
    git_as(repo, ALICE, "rebase", "-q", "-i", "--autosquash", "main")
    squashed = repo.git("rev-parse", "HEAD").strip()
    assert repo.git("rev-list", "--count", "main..feature").strip() == "1"
    on_main(repo)
    repo.git("merge", "-q", "--ff-only", "feature")

    assert scene.lines_from(APP, squashed) == {9, 10, 11, 12, 13}
    seen = scene.sweep()
    scene.expect(seen, "Work is sent in batches of 128.", {APP: {9, 11, 12}})
    scene.expect(seen, "send_all awaits every batch.", {APP: {10, 13}})
    expect_landed(seen, "Work is sent in batches of 128.", a, squashed, "squash")
    expect_landed(seen, "send_all awaits every batch.", f, squashed, "squash")


def test_h08_force_pushed_rewrite(scene: Scene) -> None:
    bare = scene.tmp / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(bare)], check=True)
    dev = FixtureRepo.create(scene.tmp / "dev", str(bare))
    put(dev, APP, base("w"))
    dev.commit("initial", "Initial app", CAROL)
    dev.git("push", "-q", "origin", "main")
    consumer = clone(str(bare), scene.tmp / "consumer")
    scene.repo = consumer

    dev.git("checkout", "-q", "-b", "feature")
    agent = [
        "    let sig = sign(&payload, &key);",
        "    headers.insert(SIG, sig);",
        "    verify_later(sig);",
    ]
    insert(dev, APP, 12, agent)
    b = dev.commit("B", "Sign payloads", ALICE)
    dev.git("push", "-q", "-u", "origin", "feature")
    summary = scene.ingest(
        [memory("Payloads are signed with the team key.", at(APP, 13, 15))], repo=dev
    )
    consumer.git("fetch", "-q", "origin")
    consumer.git("checkout", "-q", "-b", "feature", "origin/feature")
    assert has_commit(consumer, b)

    # The author rebases onto a main that moved, rewords, and force-pushes.
    on_main(dev)
    insert(dev, APP, 0, ["// signing", "use crate::keys;"])
    dev.commit("main", "Signing imports", BOB)
    dev.git("push", "-q", "origin", "main")
    dev.git("checkout", "-q", "feature")
    git_as(dev, ALICE, "rebase", "-q", "main")
    git_as(dev, ALICE, "commit", "-q", "--amend", "-m", "Sign every payload")
    rewritten = dev.git("rev-parse", "HEAD").strip()
    dev.git("push", "-q", "--force", "origin", "feature")
    on_main(dev)
    dev.git("merge", "-q", "--ff-only", "feature")
    dev.git("push", "-q", "origin", "main", ":feature")

    # The consumer follows: fetch with prune, main at the remote's, the old commit gone.
    consumer.git("fetch", "-q", "--prune", "origin")
    consumer.git("checkout", "-q", "-B", "main", "origin/main")
    consumer.git("branch", "-D", "feature")
    forget_unreachable(consumer)
    assert not has_commit(consumer, b)
    service = scene.service()
    assert [r.value for r in service.checkouts.identities()] == [summary["repo"]]

    hits = {15, 16, 17}
    assert texts_at(consumer, APP, hits) == agent
    assert scene.lines_from(APP, rewritten) == hits
    seen = scene.sweep()
    scene.expect(seen, "Payloads are signed with the team key.", {APP: hits})
    expect_landed(seen, "Payloads are signed with the team key.", b, rewritten, "same-change")


# -- rename, revert, two branches -------------------------------------------------------------


def test_h09_rename_then_squash(scene: Scene) -> None:
    repo = scene.repo
    put(repo, "src/util.rs", base("u"))
    put(repo, "src/main.rs", ["mod util;", "fn main() { util::run(); }"])
    repo.commit("initial", "Initial app", CAROL)
    repo.git("checkout", "-q", "-b", "feature")
    agent = ["    let parsed = parse_flags(args);", "    validate(&parsed)?;", "    apply(parsed);"]
    insert(repo, "src/util.rs", 10, agent)
    b1 = repo.commit("B1", "Parse and validate flags", ALICE)
    scene.ingest([memory("Flags are validated before they apply.", at("src/util.rs", 11, 13))])
    repo.git("mv", "src/util.rs", "src/helpers.rs")
    put(repo, "src/main.rs", ["mod helpers;", "fn main() { helpers::run(); }"])
    repo.commit("B2", "util -> helpers", ALICE)
    on_main(repo)
    repo.write("README.md", "app\n")
    repo.commit("main", "Readme", BOB)
    repo.git("merge", "--squash", "feature")
    s = repo.commit("S", "Flags (#7)", BOB)
    repo.git("branch", "-D", "feature")
    forget_unreachable(repo)
    assert not has_commit(repo, b1)

    hits = {11, 12, 13}
    assert texts_at(repo, "src/helpers.rs", hits) == agent
    assert scene.lines_from("src/helpers.rs", s) == hits
    seen = scene.sweep()
    scene.expect(seen, "Flags are validated before they apply.", {"src/helpers.rs": hits})
    expect_landed(seen, "Flags are validated before they apply.", b1, s, "squash")


def test_h10_revert_removes_the_memory_everywhere(scene: Scene) -> None:
    repo = scene.repo
    put(repo, APP, base("v"))
    repo.commit("initial", "Initial app", CAROL)
    repo.set_line(APP, 5, "    let v_5 = stage(5).cached();")
    insert(repo, APP, 5, ["    let hits = cache.hits();", "    report_hits(hits);"])
    a = repo.commit("A", "Cache stage 5", ALICE)
    scene.ingest([memory("Stage 5 is cached; hits are reported.", at(APP, 5, 7))])
    repo.write("README.md", "app\n")
    repo.commit("U", "Readme", BOB)
    git_as(repo, BOB, "revert", "--no-edit", a, authored=True)
    revert = repo.git("rev-parse", "HEAD").strip()
    # Later someone writes one of A's lines again, elsewhere. A is still in HEAD's history,
    # so its anchors are never matched again.
    insert(repo, APP, 15, ["    let hits = cache.hits();"])
    c = repo.commit("C", "Count hits in stage 15", CAROL)

    assert texts_at(repo, APP, {5}) == ["    let v_5 = stage(5);"]
    assert scene.lines_from(APP, revert) == {5}
    assert scene.lines_from(APP, c) == {16}
    assert is_ancestor(repo, a, "HEAD")
    seen = scene.sweep()
    scene.expect(seen, "Stage 5 is cached; hits are reported.", {})


def test_h11_same_text_on_two_branches_one_abandoned(scene: Scene) -> None:
    repo = scene.repo
    put(repo, APP, base("t"))
    initial = repo.commit("initial", "Initial app", CAROL)
    shared = "    let retries = policy.retry_limit();"
    repo.git("checkout", "-q", "-b", "a")
    insert(repo, APP, 10, [shared, "    backoff.exponential(retries);", "    run_with(backoff)?;"])
    a = repo.commit("A", "Exponential backoff", ALICE)
    scene.ingest([memory("Retries back off exponentially.", at(APP, 11, 13))])
    insert(repo, APP, 2, ["use crate::backoff::Backoff;"])
    repo.commit("A2", "Import Backoff", ALICE)
    repo.git("checkout", "-q", "-b", "b", initial)
    insert(repo, APP, 15, [shared, "    for _ in 0..retries { try_once()?; }", "    give_up();"])
    repo.commit("B", "Plain retries", BOB)
    scene.ingest([memory("Abandoned: plain retry loop.", at(APP, 16, 18))])
    on_main(repo)
    repo.git("merge", "--squash", "a")
    s = repo.commit("S", "Backoff (#3)", ALICE)
    repo.git("branch", "-D", "a")
    forget_unreachable(repo)
    assert not has_commit(repo, a)
    # Branch b is left as it was: its commit is still here, never merged.

    assert scene.lines_from(APP, s) == {3, 12, 13, 14}
    assert texts_at(repo, APP, {12}) == [shared]
    seen = scene.sweep()
    scene.expect(seen, "Abandoned: plain retry loop.", {})
    # The landed memory shows on its own lines; on the shared text it may or may not.
    landed = shown(seen, "Retries back off exponentially.")
    assert set(landed) == {APP}, landed
    assert {13, 14} <= landed[APP] <= {12, 13, 14}, scene.graph()
    expect_landed(seen, "Retries back off exponentially.", a, s, "squash")


def test_h11b_a_line_copied_from_a_landed_branch_shows_nothing(scene: Scene) -> None:
    """A squash-landed branch's line is copied into another file by a maintainer's commit with
    no memory: the copy is that commit's line, not the branch's landing."""
    repo = scene.repo
    put(repo, APP, base("c"))
    put(repo, "src/other.rs", base("o"))
    repo.commit("initial", "Initial", CAROL)
    copied = "    let quota = tenant.quota_for(region);"
    repo.git("checkout", "-q", "-b", "f")
    insert(repo, APP, 5, [copied, "    enforce(quota);"])
    f = repo.commit("F", "Quotas per region", ALICE)
    scene.ingest([memory("Quota is per region.", at(APP, 6, 7))])
    on_main(repo)
    repo.git("merge", "--squash", "f")
    s = repo.commit("S", "Quotas (#4)", ALICE)
    repo.git("branch", "-D", "f")
    forget_unreachable(repo)
    insert(repo, "src/other.rs", 3, [copied])
    repo.commit("copy", "Use quotas in other", BOB)
    seen = scene.sweep()
    scene.expect(seen, "Quota is per region.", {APP: {6, 7}})
    expect_landed(seen, "Quota is per region.", f, s, "same-change")  # one commit, unmoved main


def test_h11c_text_of_a_merged_and_an_abandoned_branch_on_a_third_line(scene: Scene) -> None:
    """Two branches wrote the same line (one merged normally, one abandoned); a maintainer
    writes it a third time: it is recorded at two places, so the third line shows nothing."""
    repo = scene.repo
    put(repo, APP, base("m"))
    repo.commit("initial", "Initial", CAROL)
    text = "    let cache = Cache::with_capacity(limit);"
    repo.git("checkout", "-q", "-b", "gone")
    put(repo, "src/gone.rs", ["fn gone() {", text, "}"])
    repo.commit("G", "Gone cache", BOB)
    scene.ingest([memory("Abandoned cache.", at("src/gone.rs", 2, 2))])
    on_main(repo)
    repo.git("checkout", "-q", "-b", "kept")
    put(repo, "src/kept.rs", ["fn kept() {", text, "}"])
    repo.commit("K", "Kept cache", ALICE)
    scene.ingest([memory("Kept cache.", at("src/kept.rs", 2, 2))])
    on_main(repo)
    git_as(repo, ALICE, "merge", "-q", "--no-ff", "--no-edit", "kept")
    repo.git("branch", "-D", "gone")
    forget_unreachable(repo)
    insert(repo, APP, 4, [text])
    repo.commit("third", "Cache in app", CAROL)
    seen = scene.sweep()
    scene.expect(seen, "Abandoned cache.", {})
    scene.expect(seen, "Kept cache.", {"src/kept.rs": {2}})


# -- anchors at a past commit -----------------------------------------------------------------


def _past_commit_scene(scene: Scene) -> tuple[str, str]:
    """The agent's commit O changes lines 8-10; P inserts 3 lines above, so at P they are
    11-13; later commits insert 5 more above (16-18 at HEAD). The memory names lines 11-13
    at P. (O, P)."""
    repo = scene.repo
    put(repo, APP, base("o"))
    repo.commit("initial", "Initial app", CAROL)
    for n in (8, 9, 10):
        repo.set_line(APP, n, f"    let o_{n} = stage({n}).checked()?;")
    o = repo.commit("O", "Check stages 8-10", ALICE)
    insert(repo, APP, 0, ["// app", "// stages", "use crate::stage;"])
    p = repo.commit("P", "Header", BOB)
    insert(repo, APP, 3, ["use crate::checked;", "use crate::report;"])
    repo.commit("Q", "More imports", BOB)
    insert(repo, APP, 0, ["// SPDX-License-Identifier: MIT", "", "#![deny(warnings)]"])
    repo.commit("R", "License header", CAROL)
    scene.ingest([memory("Stages 8-10 are checked.", at(APP, 11, 13, commit=p))])
    return o, p


def test_h12_past_commit_anchor_found_at_new_positions(scene: Scene) -> None:
    o, _ = _past_commit_scene(scene)
    repo = scene.repo
    hits = {16, 17, 18}
    assert texts_at(repo, APP, hits) == [
        f"    let o_{n} = stage({n}).checked()?;" for n in (8, 9, 10)
    ]
    assert scene.lines_from(APP, o) == hits
    seen = scene.sweep()
    # HEAD's lines 11-13 (the positions as named at P) are other lines and never show it.
    scene.expect(seen, "Stages 8-10 are checked.", {APP: hits})
    expect_found_normally(seen, "Stages 8-10 are checked.")


def test_h12_past_commit_anchor_stays_literal_for_by_commit(scene: Scene) -> None:
    _, p = _past_commit_scene(scene)
    service = scene.service()
    by_commit = service.by_commit(ByCommitRequest.parse({"commit_sha": p}))
    assert [m.node.text for m in by_commit.evidence] == ["Stages 8-10 are checked."]
    literal = scene.by_git(service, file=APP, lines=[11, 13], commit_sha=p)
    assert [n["text"] for n in literal["nodes"]] == ["Stages 8-10 are checked."]
    assert scene.by_git(service, file=APP, line=14, commit_sha=p)["nodes"] == []


# -- Agent Trace --------------------------------------------------------------------------------


def test_h13a_agent_trace_at_the_producing_commit(scene: Scene) -> None:
    repo = scene.repo
    put(repo, APP, base("x"))
    repo.commit("initial", "Initial app", CAROL)
    agent = [
        "    let shard = key.shard(16);",
        "    let conn = pool.for_shard(shard);",
        "    conn.write(key, value)?;",
        "    conn.flush();",
    ]
    insert(repo, APP, 6, agent)
    a = repo.commit("A", "Shard writes", ALICE)
    insert(repo, APP, 0, ["// storage", "use crate::pool;"])
    repo.commit("U", "Header", BOB)
    record = trace(a, APP, [(7, 10)], "spec-style", repo.clock)
    summary = scene.ingest([record], fmt="agent-trace")
    assert summary["unanchored_edits"] == 0

    hits = {9, 10, 11, 12}
    assert texts_at(repo, APP, hits) == agent
    seen = scene.sweep()
    scene.expect(seen, "spec-style", {APP: hits})
    expect_found_normally(seen, "spec-style")


def test_h13b_reference_hook_edit_in_an_existing_file(scene: Scene) -> None:
    repo = scene.repo
    put(repo, APP, base("y"))
    repo.commit("initial", "Initial app", CAROL)
    repo.set_line(APP, 19, "    let y_19 = stage(19).logged();")
    r = repo.commit("R", "Log stage 19", BOB)  # touches the file, not the lines the agent edits
    at_r = repo.lines(APP)
    # The agent edits the work tree on top of R: rewrites line 7, adds three after it. The
    # hook records R and the positions in the edited file.
    agent = [
        "    let y_7 = stage(7).with_retry(3);",
        "    let budget = Budget::per_call();",
        "    budget.charge(y_7.cost());",
        "    budget.report();",
    ]
    put(repo, APP, at_r[:6] + agent + at_r[7:])
    record = trace(r, APP, [(7, 10)], "hook-edit", repo.clock + 600)
    c = repo.commit("C", "Retry stage 7 within a budget", ALICE)
    insert(repo, APP, 0, ["// stages", "use crate::budget::Budget;"])
    repo.commit("U", "Imports", CAROL)
    summary = scene.ingest([record], fmt="agent-trace")
    assert summary["unanchored_edits"] == 0

    hits = {9, 10, 11, 12}
    assert texts_at(repo, APP, hits) == agent
    assert scene.lines_from(APP, c) == hits
    # Of the lines that sat at 7-10 in R, 7 was rewritten and 8-10 are at 13-15 at HEAD.
    assert texts_at(repo, APP, {13, 14, 15}) == at_r[7:10]
    seen = scene.sweep()
    scene.expect(seen, "hook-edit", {APP: hits})
    expect_found_normally(seen, "hook-edit")


def test_h13c_reference_hook_new_file(scene: Scene) -> None:
    repo = scene.repo
    put(repo, APP, base("z"))
    r = repo.commit("R", "Initial app", CAROL)
    report = [
        "pub fn render(rows: &[Row]) -> String {",
        "    let mut out = String::with_capacity(rows.len() * 32);",
        "    for row in rows {",
        "        out.push_str(&row.to_csv());",
        "        out.push('\\n');",
        "    }",
        "    out",
        "}",
    ]
    put(repo, "src/report.rs", report)
    record = trace(r, "src/report.rs", [(1, 8)], "hook-new-file", repo.clock + 600)
    c = repo.commit("C", "CSV report", ALICE)
    insert(repo, "src/report.rs", 0, ["//! Reports."])
    repo.commit("U", "Doc comment", CAROL)
    summary = scene.ingest([record], fmt="agent-trace")  # not a bad record
    assert summary["nodes"]["L0"] == 1
    assert summary["unanchored_edits"] == 0

    hits = set(range(2, 10))
    assert texts_at(repo, "src/report.rs", hits) == report
    assert scene.lines_from("src/report.rs", c) == hits
    seen = scene.sweep()
    scene.expect(seen, "hook-new-file", {"src/report.rs": hits})
    expect_found_normally(seen, "hook-new-file")


def _edit_right_after_the_file_was_created(scene: Scene) -> tuple[str, list[str], list[str]]:
    """R creates the file; the agent inserts three lines at 7-9 of the work tree on top of it
    (the hook records R and those positions). R's own lines sat at 7-9 before."""
    repo = scene.repo
    put(repo, APP, base("w"))
    r = repo.commit("R", "Initial app", CAROL)
    at_r = repo.lines(APP)
    agent = [
        "    let quota = Quota::for_tenant(tenant);",
        "    quota.check(request.size())?;",
        "    quota.record(request.size());",
    ]
    put(repo, APP, at_r[:6] + agent + at_r[6:])
    return r, agent, at_r


def test_h13e_hook_edit_right_after_the_commit_that_touched_those_positions(
    scene: Scene,
) -> None:
    """Both readings are possible (R produced lines 7-9 of R, and the commit of the edit
    produced 7-9 of its own); the record was written before that commit: the hook's."""
    repo = scene.repo
    r, agent, at_r = _edit_right_after_the_file_was_created(scene)
    record = trace(r, APP, [(7, 9)], "hook-after-create", repo.clock + 600)
    repo.commit("C", "Quota per tenant", ALICE)
    summary = scene.ingest([record], fmt="agent-trace")
    assert summary["unanchored_edits"] == 0
    assert texts_at(repo, APP, {7, 8, 9}) == agent
    assert texts_at(repo, APP, {10, 11, 12}) == at_r[6:9]  # R's lines, moved down
    seen = scene.sweep()
    scene.expect(seen, "hook-after-create", {APP: {7, 8, 9}})


def test_h13f_hook_edit_ingested_before_its_commit_waits_for_it(scene: Scene) -> None:
    repo = scene.repo
    repo.clock = int(time.time()) - 7200  # a session of today: its edits wait for days
    r, agent, _ = _edit_right_after_the_file_was_created(scene)
    record = trace(r, APP, [(7, 9)], "hook-before-commit", repo.clock + 600)
    summary = scene.ingest([record], fmt="agent-trace")  # the work tree holds the edit
    assert (summary["anchors"], summary["pending_edits"]) == (0, 1)
    repo.commit("C", "Quota per tenant", ALICE)
    where = ("--project", scene.project.value, "--repo", str(repo.root))
    done = scene.mem("db", "resolve-pending", *where)
    assert done.returncode == 0, done.stderr
    seen = scene.sweep()
    scene.expect(seen, "hook-before-commit", {APP: {7, 8, 9}})
    assert texts_at(repo, APP, {7, 8, 9}) == agent


def test_h13g_a_record_written_after_a_later_commit_names_its_revisions_lines(
    scene: Scene,
) -> None:
    """The other order of evidence: R produced lines 7-9; a later commit L rewrote what sits
    at 7-9 (inserting above them); the record, written after L, names R: R's lines, where
    they are now, not L's."""
    repo = scene.repo
    put(repo, APP, base("v"))
    repo.commit("initial", "Initial app", CAROL)
    mine = ["    let v_a = 1;", "    let v_b = 2;", "    let v_c = 3;"]
    lines = repo.lines(APP)
    put(repo, APP, lines[:6] + mine + lines[9:])
    r = repo.commit("R", "Three values", ALICE)
    insert(repo, APP, 6, ["    // later: a guard", "    guard()?;", "    // and its note"])
    repo.commit("L", "Guard", BOB)
    record = trace(r, APP, [(7, 9)], "spec-after-later", repo.clock + 600)
    summary = scene.ingest([record], fmt="agent-trace")
    assert summary["unanchored_edits"] == 0
    assert texts_at(repo, APP, {10, 11, 12}) == mine
    seen = scene.sweep()
    scene.expect(seen, "spec-after-later", {APP: {10, 11, 12}})


def test_h13h_hook_edit_the_human_moved_before_committing_is_left_unanchored(
    scene: Scene,
) -> None:
    """Written before L, but L does not hold the recorded lines at those positions (the
    human rewrote them and added a line above): neither reading is certain, so nothing is
    placed, above all not on R's lines that sat there."""
    repo = scene.repo
    r, _, at_r = _edit_right_after_the_file_was_created(scene)
    record = trace(r, APP, [(7, 9)], "hook-moved", repo.clock + 600)
    reviewed = [*at_r[:1], "    // reviewed", *at_r[1:6], "    quota(tenant)?;", *at_r[6:]]
    put(repo, APP, reviewed)
    repo.commit("C", "Quota, reviewed", ALICE)
    summary = scene.ingest([record], fmt="agent-trace")
    assert (summary["anchors"], summary["unanchored_edits"]) == (0, 1)
    seen = scene.sweep()
    assert shown(seen, "hook-moved") == {}


def test_h13i_a_later_commit_that_only_deleted_lines_is_no_failure(scene: Scene) -> None:
    """L, the first later commit that touched the file, only deleted a line: blame at L names
    no line of its own. The range is still read (here: R's lines, the record made after L)."""
    repo = scene.repo
    put(repo, APP, base("d"))
    r = repo.commit("R", "Initial app", CAROL)
    put(repo, APP, repo.lines(APP)[:-1])  # drop the last line
    repo.commit("L", "Drop the last stage", BOB)
    record = trace(r, APP, [(3, 4)], "after-a-deletion", repo.clock + 60)
    summary = scene.ingest([record], fmt="agent-trace")
    assert summary["unanchored_edits"] == 0
    seen = scene.sweep()
    scene.expect(seen, "after-a-deletion", {APP: {3, 4}})


def test_h13d_reference_hook_change_never_committed(scene: Scene) -> None:
    repo = scene.repo
    put(repo, APP, base("n"))
    repo.commit("initial", "Initial app", CAROL)
    repo.set_line(APP, 19, "    let n_19 = stage(19).logged();")
    r = repo.commit("R", "Log stage 19", BOB)
    insert(
        repo,
        APP,
        6,
        ["    let probe = Probe::start();", "    probe.sample(&state);", "    probe.stop();"],
    )
    record = trace(r, APP, [(7, 9)], "hook-discarded", repo.clock + 600)
    repo.git("checkout", "--", APP)  # the change is thrown away
    repo.write("README.md", "app\n")
    repo.commit("U", "Readme", CAROL)
    summary = scene.ingest([record], fmt="agent-trace")
    assert summary["nodes"]["L0"] == 1
    assert summary["anchors"] == 0
    assert summary["unanchored_edits"] == 1

    seen = scene.sweep()
    assert all(not nodes for lines in seen.values() for nodes in lines.values()), scene.graph()
