"""Rules of rewritten history that the other tests leave unguarded (found by mutation testing
of lookup/rewrites.py). Each test builds a real repository, records a memory with the real
`mem` CLI, rewrites the history (squash merge or cherry-pick, the recorded commit pruned) and
asserts the code lenses a user sees for the file.
"""

from __future__ import annotations

from typing import Any

import pytest

from poimen_memory.lookup import DocumentRequest
from poimen_memory.lookup.results import COMMIT

from .gitrepo import ALICE, BOB, CAROL, forget_unreachable, git_as
from .scenes import APP, Scene, at, base, insert, memory, on_main, put

NOTE = "The rewritten branch's memory."


def _rewritten(
    scene: Scene,
    added: list[str],
    first: int,
    last: int,
    *,
    initial: list[str] | None = None,
    then: dict[int, str] | None = None,
    squash: bool = True,
) -> tuple[str, str]:
    """Commit B adds ``added`` after line 6 of APP on a branch; a memory is recorded on B's
    lines ``first``-``last``. A second branch commit rewrites the lines ``then`` ({line:
    text}) or, without it, adds an unrelated line at the end. Main moves (a line at the
    top); the branch is squash-merged (or B alone cherry-picked) into it; the branch is
    deleted and pruned. At HEAD, B's line n is line n + 1. Returns (B, the landing commit)."""
    repo = scene.repo
    put(repo, APP, initial or base("mu"))
    repo.commit("initial", "Initial app", CAROL)
    repo.git("checkout", "-q", "-b", "feature")
    insert(repo, APP, 6, added)
    b = repo.commit("B", "The branch's change", ALICE)
    scene.ingest([memory(NOTE, at(APP, first, last))])
    if squash:
        if then:
            for n, text in then.items():
                repo.set_line(APP, n, text)
        else:
            insert(repo, APP, len(repo.lines(APP)), ["    let tail_mu = finish(0);"])
        repo.commit("B2", "More of the branch", ALICE)
    on_main(repo)
    insert(repo, APP, 0, ["// app"])
    repo.commit("main", "A header", BOB)
    if squash:
        repo.git("merge", "--squash", "feature")
        landed = repo.commit("S", "The branch (#1)", BOB)
    else:
        git_as(repo, BOB, "cherry-pick", b)
        landed = repo.git("rev-parse", "HEAD").strip()
    repo.git("branch", "-D", "feature")
    forget_unreachable(repo)
    assert scene.lines_from(APP, b) == set()
    return b, landed


def _lenses(scene: Scene, commit: str) -> set[int]:
    """The lines whose code lenses show a memory recorded on ``commit``."""
    lenses = scene.service().document(DocumentRequest(file=str(scene.repo.root / APP)))
    assert lenses is not None
    return {n for n, found in lenses.by_line.items() if any(m[COMMIT] == commit for m in found)}


def _hover(scene: Scene, line: int) -> list[dict[str, Any]]:
    """The L0 nodes a hover of ``line`` shows."""
    body = scene.by_git(scene.service(), file=APP, line=line)
    return [n for n in body["nodes"] if n["level"] == "L0"]


def test_lines_next_to_a_squashed_line_show_its_memory_in_both_directions(scene: Scene) -> None:
    """B's middle line is matched on its text; the lines above and below it carry text seen
    twice in the file, so they show the memory only as that anchor's previous and next
    line (a lens follows matched neighbours both ways, from the anchor's first line on)."""
    initial = base("mu")
    initial[1] = "    let x = common(1);"
    initial[2] = "    let z = again(2);"
    added = ["    let x = common(1);", "    let y = unique_step(2);", "    let z = again(2);"]
    b, _ = _rewritten(scene, added, 7, 9, initial=initial)
    assert _lenses(scene, b) == {8, 9, 10}


def test_a_squash_holding_half_of_the_recorded_lines_is_their_landing(scene: Scene) -> None:
    """B recorded two lines; the squash keeps one and rewrites the other: half is enough."""
    added = ["    let p = first_half(1);", "    let q = second_half(2);"]
    b, _ = _rewritten(scene, added, 7, 8, then={8: "    let q = rewritten(2);"})
    assert _lenses(scene, b) == {8}


def test_a_squash_holding_a_third_of_the_recorded_lines_is_not_their_landing(
    scene: Scene,
) -> None:
    """B recorded three lines; the squash keeps one and rewrites two: less than half."""
    added = ["    let p = kept_third(1);", "    let q = gone(2);", "    let r = gone(3);"]
    then = {8: "    let q = other(2);", 9: "    let r = other(3);"}
    b, _ = _rewritten(scene, added, 7, 9, then=then)
    assert _lenses(scene, b) == set()


def test_a_bounded_candidate_read_matches_no_text(
    scene: Scene, monkeypatch: pytest.MonkeyPatch
) -> None:
    """When the candidates read may have left places out (the read hit its bound), no text
    counts as recorded once: the squashed line shows nothing, and the lens still answers."""
    added = ["    let p = lone_line(1);", "    let q = lone_line(2);"]
    b, _ = _rewritten(scene, added, 7, 8)
    assert _lenses(scene, b) == {8, 9}
    monkeypatch.setattr("poimen_memory.lookup.rewrites.MAX_CANDIDATES", 1)
    assert _lenses(scene, b) == set()


def test_a_cherry_picked_anchor_shows_on_its_own_lines_only(scene: Scene) -> None:
    """The anchor starts at B's second added line; its text repeats the line above it, and a
    short line follows it: a cherry-pick (same change) shows it on exactly its three lines,
    neither on the same text just above nor on the short line below; a hover of
    its first line, text seen three times, shows it as the same change."""
    a, c = "    let a = repeat_me(1);", "    let c = closing_step(2);"
    b, _ = _rewritten(scene, [a, a, a, c, "    }"], 8, 10, squash=False)
    assert _lenses(scene, b) == {9, 10, 11}
    hovered = _hover(scene, 10)  # text seen three times: only its place in B tells it
    assert [n["landed"]["how"] for n in hovered] == ["same-change"], hovered


def test_a_cherry_picked_anchor_from_the_first_added_line_stops_at_its_end(
    scene: Scene,
) -> None:
    """The anchor covers B's first two added lines; the next added line repeats its last
    text: the cherry-picked anchor shows on its own two lines only."""
    d = "    let d = twice_said(2);"
    b, _ = _rewritten(scene, ["    let b = first_of_two(1);", d, d], 7, 8, squash=False)
    assert _lenses(scene, b) == {8, 9}


def test_overlapping_anchors_of_one_commit_record_a_shared_line_at_one_place(
    scene: Scene,
) -> None:
    """Two memories of B anchor overlapping lines: the line both hold was recorded at one
    place (B's line 8), so a hover of it, squashed, shows both memories."""
    added = [
        "    let r1 = alpha_one(1);",
        "    let r2 = beta_two(2);",
        "    let r3 = gamma_three(3);",
        "    let r4 = delta_four(4);",
    ]
    repo = scene.repo
    put(repo, APP, base("ov"))
    repo.commit("initial", "Initial app", CAROL)
    repo.git("checkout", "-q", "-b", "feature")
    insert(repo, APP, 6, added)
    repo.commit("B", "The branch's change", ALICE)
    scene.ingest([memory("First of two.", at(APP, 7, 9)), memory("Second of two.", at(APP, 8, 10))])
    insert(repo, APP, len(repo.lines(APP)), ["    let tail_ov = finish(0);"])
    repo.commit("B2", "More of the branch", ALICE)
    on_main(repo)
    insert(repo, APP, 0, ["// app"])
    repo.commit("main", "A header", BOB)
    repo.git("merge", "--squash", "feature")
    repo.commit("S", "The branch (#1)", BOB)
    repo.git("branch", "-D", "feature")
    forget_unreachable(repo)
    assert sorted(n["text"] for n in _hover(scene, 9)) == ["First of two.", "Second of two."]


def test_a_short_line_between_two_squashed_lines_of_one_anchor_shows_its_memory(
    scene: Scene,
) -> None:
    """A ``}`` between two matched lines of the same anchor, which holds it there, shows the
    memory in the lens (matched neighbours on both sides)."""
    added = ["    let m1 = alpha_m(1);", "    }", "    let m2 = beta_m(2);"]
    b, _ = _rewritten(scene, added, 7, 9)
    assert _lenses(scene, b) == {8, 9, 10}


def test_lines_follow_matched_neighbours_up_a_chain(scene: Scene) -> None:
    """Only B's last line is matched on its text; the two above it repeat text of the file:
    the lens follows the anchor upwards line by line, to its first line."""
    initial = base("mu")
    initial[1] = "    let x = chain_one(1);"
    initial[2] = "    let z = chain_two(2);"
    added = ["    let x = chain_one(1);", "    let z = chain_two(2);", "    let y = chain_end(3);"]
    b, _ = _rewritten(scene, added, 7, 9, initial=initial)
    assert _lenses(scene, b) == {8, 9, 10}
