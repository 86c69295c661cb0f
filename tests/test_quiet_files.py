"""A file where no memory of the project can be found is answered without a blame (issue 27):
its code lenses and hovers cost one indexed query, and the rule never hides a memory that a
blame would have found (a renamed file's, a line whose text a memory holds elsewhere).

Each test builds a real repository and records memories with the real `mem ingest`; the
service's own lookups (hover, document) are asserted, and whether a blame ran is read from
the blamer's cache of whole-file blames (``needs_blame``).
"""

from __future__ import annotations

from pathlib import Path

from poimen_memory.lookup import DocumentRequest, HoverRequest, LookupService, build_service
from poimen_memory.store import Store

from .gitrepo import ALICE, BOB, CAROL
from .scenes import APP, Scene, at, base, insert, memory, put

LEASES = "Leases are pinned to the tenant's region."
OTHER = "src/other.rs"


def _hover_texts(service: LookupService, path: Path, line: int) -> set[str]:
    found = service.hover(HoverRequest(file=str(path), line=line))
    if found is None:
        return set()
    return {m.node.text for m in found.memories}


def _quiet(service: LookupService, path: Path) -> None:
    """``path`` has no memories, answered without a blame."""
    doc = service.document(DocumentRequest(file=str(path)))
    assert doc is not None
    assert doc.by_line == {}
    assert service.needs_blame(path), "a file with no memories was blamed"


def _shown(service: LookupService, path: Path, line: int, lines: set[int]) -> None:
    """``path`` shows LEASES on ``line`` (hover) and its lens covers ``lines``."""
    assert _hover_texts(service, path, line) == {LEASES}
    doc = service.document(DocumentRequest(file=str(path)))
    assert doc is not None
    assert set(doc.by_line) == lines


def _stored(scene: Scene, *columns: str) -> list[tuple[object, ...]]:
    """``columns`` of each of the project's anchors, as stored."""
    with scene.store._connector.connection() as conn:
        rows = conn.execute(
            f"SELECT {', '.join(columns)} FROM git_anchor WHERE project = %s",
            (scene.project.value,),
        ).fetchall()
    return [tuple(r[c] for c in columns) for r in rows]


def _leased(scene: Scene) -> None:
    """APP with a memory on lines 5-7 (commit A); OTHER, committed by B, with none."""
    repo = scene.repo
    put(repo, APP, base("q"))
    repo.commit("initial", "Initial app", CAROL)
    insert(repo, APP, 4, [
        "    let lease = pool.lease(tenant)?;",
        "    lease.pin(region);",
        "    lease.renew_in(Duration::from_secs(30));",
    ])  # fmt: skip
    repo.commit("A", "Lease per tenant", ALICE)
    scene.ingest([memory(LEASES, at(APP, 5, 7))])
    put(repo, OTHER, base("other", 30))
    repo.commit("B", "Another module", BOB)


def test_a_file_without_memories_is_answered_without_a_blame(scene: Scene) -> None:
    _leased(scene)
    service = scene.service()
    other = scene.repo.root / OTHER
    assert service.needs_blame(other)
    doc = service.document(DocumentRequest(file=str(other)))
    assert doc is not None
    assert doc.by_line == {}
    for line in (1, 10, 30):
        assert _hover_texts(service, other, line) == set()
    assert service.needs_blame(other), "a file with no memories was blamed"
    # The file with memories is blamed and answers as before.
    app = scene.repo.root / APP
    assert _hover_texts(service, app, 6) == {LEASES}
    doc = service.document(DocumentRequest(file=str(app)))
    assert doc is not None
    assert set(doc.by_line) == {5, 6, 7}
    assert not service.needs_blame(app)


def test_a_renamed_file_keeps_its_memories(scene: Scene) -> None:
    """The anchors are at the old path; the new path has none of its own, but its lines hold
    the anchored texts: the lookup blames, and blame follows the rename."""
    _leased(scene)
    repo = scene.repo
    repo.git("mv", APP, "src/renamed.rs")
    repo.commit("R", "Rename the app", BOB)
    service = scene.service()
    renamed = repo.root / "src/renamed.rs"
    assert _hover_texts(service, renamed, 6) == {LEASES}
    doc = service.document(DocumentRequest(file=str(renamed)))
    assert doc is not None
    assert set(doc.by_line) == {5, 6, 7}
    assert _hover_texts(service, renamed, 3) == set()


def test_a_line_whose_text_a_memory_holds_elsewhere_is_blamed(scene: Scene) -> None:
    """OTHER has no anchor, but one of its lines has the text of an anchored line of APP: the
    file cannot be ruled out by text, so it is blamed (and, its line being B's, shows
    nothing: precision is blame's to keep)."""
    _leased(scene)
    repo = scene.repo
    insert(repo, OTHER, 2, ["    lease.pin(region);"])
    repo.commit("C", "Pin here too", BOB)
    service = scene.service()
    other = repo.root / OTHER
    assert _hover_texts(service, other, 3) == set()
    doc = service.document(DocumentRequest(file=str(other)))
    assert doc is not None
    assert doc.by_line == {}
    assert not service.needs_blame(other), "a file holding an anchored text was not blamed"


def test_memories_recorded_later_show_once_answers_are_forgotten(scene: Scene) -> None:
    """A file answered as having none is looked at again after the service forgets its
    answers (what a store notification does in the server)."""
    _leased(scene)
    service = scene.service()
    other = scene.repo.root / OTHER
    assert _hover_texts(service, other, 10) == set()
    scene.ingest([memory("Other things.", at(OTHER, 9, 11))])
    assert _hover_texts(service, other, 10) == set()  # remembered until told
    service.invalidate()
    assert _hover_texts(service, other, 10) == {"Other things."}


def test_a_memory_on_a_change_too_big_to_read_still_leaves_other_files_quiet(
    scene: Scene,
) -> None:
    """The lines a memory is on came in a commit whose change is too big to be read (a
    vendored import, over 20,000 lines): their texts are read from the file at that commit,
    so a file that holds none of them is still answered without a blame; the memory's own
    lines show it as before."""
    from poimen_memory.gitio.diffs import line_hash

    repo = scene.repo
    put(repo, APP, base("q"))
    repo.commit("initial", "Initial app", CAROL)
    added = [
        "    let lease = pool.lease(tenant)?;",
        "    lease.pin(region);",
        "    lease.renew_in(Duration::from_secs(30));",
    ]
    insert(repo, APP, 4, added)
    put(repo, "vendor/big.txt", "".join(f"vendored line {i}\n" for i in range(21_000)))
    repo.commit("A", "Lease per tenant, and the vendored library", ALICE)
    scene.ingest([memory(LEASES, at(APP, 5, 7))])
    put(repo, OTHER, base("other", 30))
    repo.commit("B", "Another module", BOB)
    assert _stored(scene, "line_hashes") == [([line_hash(text) for text in added],)]
    service = scene.service()
    _quiet(service, repo.root / OTHER)
    _shown(service, repo.root / APP, 6, {5, 6, 7})


def test_a_memory_on_short_lines_of_a_change_too_big_to_read_follows_a_rename(
    scene: Scene,
) -> None:
    """A memory on lines too short to be told by text (a blank line, a `}`), in a commit
    whose change is too big to read: no file is ruled out by text for it, and a renamed file
    still shows it (blame follows the rename)."""
    repo = scene.repo
    put(repo, APP, base("q"))
    repo.commit("initial", "Initial app", CAROL)
    insert(repo, APP, 4, ["    lease.pin(region);", "", "    }"])
    put(repo, "vendor/big.txt", "".join(f"vendored line {i}\n" for i in range(21_000)))
    repo.commit("A", "Pin, and the vendored library", ALICE)
    scene.ingest([memory(LEASES, at(APP, 6, 7))])
    repo.git("mv", APP, "src/renamed.rs")
    repo.commit("R", "Rename the app", BOB)
    _shown(scene.service(), repo.root / "src/renamed.rs", 7, {6, 7})


def _short_lines_remembered(scene: Scene) -> None:
    """APP with a memory on a blank line and a `}` (texts too short to tell), in an ordinary
    commit; OTHER, committed later, with none."""
    repo = scene.repo
    put(repo, APP, base("q"))
    repo.commit("initial", "Initial app", CAROL)
    insert(repo, APP, 4, ["    lease.pin(region);", "", "    }"])
    repo.commit("A", "Pin the lease", ALICE)
    scene.ingest([memory(LEASES, at(APP, 6, 7))])
    put(repo, OTHER, base("other", 30))
    repo.commit("B", "Another module", BOB)
    assert _stored(scene, "line_hashes") == [(None,)]


def test_a_memory_on_short_lines_leaves_other_files_quiet_while_its_file_stays(
    scene: Scene,
) -> None:
    """A memory whose lines cannot be told by text keeps other files quiet as long as the
    file it is on is still there: its lines can have gone nowhere else. Its own file shows
    it as before."""
    _short_lines_remembered(scene)
    service = scene.service()
    other = scene.repo.root / OTHER
    assert _hover_texts(service, other, 7) == set()
    _quiet(service, other)
    _shown(service, scene.repo.root / APP, 7, {6, 7})


def test_a_memory_on_short_lines_is_looked_for_everywhere_when_blame_follows_moves(
    scene: Scene,
) -> None:
    """With ``blame.detectMoves`` on, blame can take a line from any file of a commit, so a
    memory whose lines cannot be told by text rules no file out: each is blamed."""
    from poimen_memory.lookup import build_service
    from poimen_memory.settings import Settings

    _short_lines_remembered(scene)
    settings = Settings(project=scene.project.value, blame={"detect_moves": True})
    service = build_service(
        scene.store, [scene.repo.root], cache_path=scene.tmp / "moves.db", settings=settings
    )
    other = scene.repo.root / OTHER
    doc = service.document(DocumentRequest(file=str(other)))
    assert doc is not None
    assert doc.by_line == {}
    assert not service.needs_blame(other), "a file was ruled out though blame follows moves"


def test_a_memory_on_short_lines_follows_its_file_renamed(scene: Scene) -> None:
    """Once the file a memory on short lines is on is renamed, its lines may be anywhere the
    old path went: the renamed file is blamed and shows the memory."""
    _short_lines_remembered(scene)
    scene.repo.git("mv", APP, "src/renamed.rs")
    scene.repo.commit("R", "Rename the app", BOB)
    _shown(scene.service(), scene.repo.root / "src/renamed.rs", 7, {6, 7})


def test_a_memory_on_short_lines_recorded_after_a_rename_is_looked_for_where_it_was_seen(
    scene: Scene,
) -> None:
    """Lines too short to be told by text, written before their file was renamed and
    remembered after: the anchor is at their origin (the old path, gone), and keeps the path
    they were named at. Other files stay quiet while that path is a file; the renamed file
    shows the memory."""
    repo = scene.repo
    put(repo, APP, base("q"))
    repo.commit("initial", "Initial app", CAROL)
    insert(repo, APP, 4, ["    lease.pin(region);", "", "    }"])
    repo.commit("A", "Pin the lease", ALICE)
    repo.git("mv", APP, "src/renamed.rs")
    repo.commit("R", "Rename the app", BOB)
    put(repo, OTHER, base("other", 30))
    repo.commit("B", "Another module", BOB)
    scene.ingest([memory(LEASES, at("src/renamed.rs", 6, 7))])
    assert _stored(scene, "file", "found_in", "line_hashes") == [(APP, "src/renamed.rs", None)]
    service = scene.service()
    _quiet(service, repo.root / OTHER)
    _shown(service, repo.root / "src/renamed.rs", 7, {6, 7})


def test_a_file_just_opened_is_readied_without_a_blame(scene: Scene) -> None:
    """``prepare`` (a server does it when a file opens) looks at what the first lookup asks
    before its blame: once it has, the quiet file's lens and hover need no store (closed
    here) and no blame; the file with memories is readied but not blamed."""
    _leased(scene)
    store = Store(scene.store.dsn)
    service = build_service(
        store, [scene.repo.root], scene.project, cache_path=scene.tmp / "prepared.db"
    )
    other, app = scene.repo.root / OTHER, scene.repo.root / APP
    for path in (other, app):
        service.prepare(DocumentRequest(file=str(path), text=path.read_text()))
    assert service.needs_blame(other), "prepare blamed"
    assert service.needs_blame(app), "prepare blamed"
    store.close()
    doc = service.document(DocumentRequest(file=str(other), text=other.read_text()))
    assert doc is not None
    assert doc.by_line == {}
    assert service.hover(HoverRequest(file=str(other), line=3, text=other.read_text())) is None
    assert service.needs_blame(other)
