"""The shared blame cache in the store: run-length whole-file blames, scoped by project and
repo, keyed by (path, commit, fingerprint), validated, bounded (least recently used first) and
reported by `mem db status`."""

from __future__ import annotations

import dataclasses
import json
import re
import threading
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from poimen_memory.cli import main
from poimen_memory.domain import ContentError, ProjectId, RepoId, SharedBlameLine
from poimen_memory.store import SharedBlame, Store, migrate
from poimen_memory.store import migrations as migrate_module
from poimen_memory.store.blames import MAX_BLAME_RUNS, MAX_BLAMES, check_blame
from poimen_memory.store.migrations import available

from .conftest import create_database, drop_database
from .test_migrations import schema_snapshot

REPO = RepoId("github.com/org/x")
OTHER_REPO = RepoId("github.com/org/y")
FP = "0123456789abcdef0123456789abcdef"
OTHER_FP = "fedcba9876543210fedcba9876543210"
C1 = "1" * 40
C2 = "2" * 40
C3 = "3" * 40
HEAD = "a" * 40
BLOB = "b" * 40


def commit(sha: str, name: str = "Alice", boundary: bool = False) -> tuple[Any, ...]:
    return (sha, name, f"{name.lower()}@example.com", 1_700_000_000, f"change by {name}", boundary)


def blame(
    path: str = "src/kong/buffer.rs",
    at: str = HEAD,
    fingerprint: str = FP,
    runs: tuple[tuple[str, str, int, int], ...] | None = None,
    blob_id: str = BLOB,
) -> SharedBlame:
    """A blame of 10 lines from three commits unless ``runs`` says otherwise."""
    if runs is None:
        runs = (
            (C1, path, 1, 4),
            (C2, "src/old_name.rs", 17, 3),
            (C1, path, 8, 1),
            (C3, path, 9, 2),
        )
    shas = dict.fromkeys(r[0] for r in runs)
    return SharedBlame(
        path=path,
        commit=at,
        fingerprint=fingerprint,
        blob_id=blob_id,
        line_count=sum(r[3] for r in runs),
        commits=tuple(commit(s, f"Author{i}", boundary=i == 0) for i, s in enumerate(shas)),
        runs=runs,
    )


def nth(i: int) -> str:
    """The i-th test commit id."""
    return f"{i:040x}"


def one_run_blame(i: int, path: str = "f.txt", runs: int = 1) -> SharedBlame:
    """A blame at commit ``nth(i)`` of ``runs`` one-line runs."""
    return blame(
        path=path,
        at=nth(i),
        runs=tuple((C1, path, 1 + 2 * k, 1) for k in range(runs)),
    )


def files_and_runs(dsn: str) -> tuple[int, int]:
    """What the tables hold, counted directly (not through the store)."""
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT (SELECT count(*) FROM blame_file), (SELECT count(*) FROM blame_run)"
        ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


@pytest.fixture
def fresh_dsn() -> Iterator[str]:
    """A migrated database of its own (for tests of the bound, which is table-wide)."""
    name, dsn = create_database("blame_bound")
    try:
        with psycopg.connect(dsn) as conn:
            migrate(conn)
        yield dsn
    finally:
        drop_database(name)


# --- round trip, idempotence, replacement -------------------------------------------------


def test_round_trip(store: Store, project: ProjectId) -> None:
    stored = blame()
    store.put_blame(project, REPO, stored)
    got = store.get_blame(project, REPO, stored.path, stored.commit, stored.fingerprint)
    assert got == stored
    assert got is not None
    assert got.runs[1] == (C2, "src/old_name.rs", 17, 3)
    assert got.commits[0][5] is True
    assert got.commits[1][5] is False


def test_round_trip_of_unusual_values(store: Store, project: ProjectId) -> None:
    """sha256 repositories, non-ASCII paths and names, an empty file, negative epoch times."""
    sha256_commit = "c" * 64
    path = 'doc/ünïcode name\'s "file".md'
    runs = ((sha256_commit, path, 1, 2),)
    odd = dataclasses.replace(
        blame(path=path, at="d" * 64, runs=runs, blob_id="e" * 64),
        commits=((sha256_commit, "Zoë 🦀", "", -86_400, "", True),),
    )
    empty = dataclasses.replace(blame(path="empty.txt", runs=()), commits=())
    for b in (odd, empty):
        store.put_blame(project, REPO, b)
        assert store.get_blame(project, REPO, b.path, b.commit, b.fingerprint) == b


def test_put_is_idempotent(store: Store, project: ProjectId, store_dsn: str) -> None:
    b = blame()
    before = files_and_runs(store_dsn)
    store.put_blame(project, REPO, b)
    store.put_blame(project, REPO, b)
    store.put_blame(project, REPO, b)
    assert files_and_runs(store_dsn) == (before[0] + 1, before[1] + len(b.runs))
    assert store.get_blame(project, REPO, b.path, b.commit, b.fingerprint) == b


def test_put_replaces_header_and_runs(store: Store, project: ProjectId, store_dsn: str) -> None:
    first = blame()
    store.put_blame(project, REPO, first)
    before = files_and_runs(store_dsn)
    second = blame(runs=((C3, first.path, 1, 7),), blob_id="9" * 40)
    store.put_blame(project, REPO, second)
    assert store.get_blame(project, REPO, first.path, first.commit, FP) == second
    assert files_and_runs(store_dsn) == (before[0], before[1] - len(first.runs) + 1)


def test_concurrent_puts_of_one_key_leave_one_whole_blame(
    store_dsn: str, project: ProjectId
) -> None:
    variants = [blame(), blame(runs=((C3, "src/kong/buffer.rs", 1, 5),))]
    errors: list[BaseException] = []

    def writer(b: SharedBlame) -> None:
        try:
            with Store(store_dsn, max_size=1) as s:
                for _ in range(15):
                    s.put_blame(project, REPO, b)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(b,)) for b in variants]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    with Store(store_dsn, max_size=1) as s:
        got = s.get_blame(project, REPO, "src/kong/buffer.rs", HEAD, FP)
    assert got in variants


# --- scoping: project, repo, fingerprint --------------------------------------------------


def test_project_isolation_on_every_read(store: Store, project: ProjectId) -> None:
    other = ProjectId(f"{project.value}-other")
    b = blame()
    store.put_blame(project, REPO, b)
    assert store.get_blame(other, REPO, b.path, b.commit, FP) is None
    assert store.blames_at(other, REPO, b.path, FP, [b.commit]) == set()
    # The same key in the other project is a blame of its own: neither overwrites the other.
    theirs = blame(runs=((C3, b.path, 1, 10),))
    store.put_blame(other, REPO, theirs)
    assert store.get_blame(other, REPO, b.path, b.commit, FP) == theirs
    assert store.get_blame(project, REPO, b.path, b.commit, FP) == b
    assert store.blames_at(project, REPO, b.path, FP, [b.commit]) == {b.commit}


def test_repo_isolation_on_every_read(store: Store, project: ProjectId) -> None:
    b = blame()
    store.put_blame(project, REPO, b)
    assert store.get_blame(project, OTHER_REPO, b.path, b.commit, FP) is None
    assert store.blames_at(project, OTHER_REPO, b.path, FP, [b.commit]) == set()
    theirs = blame(runs=((C3, b.path, 1, 10),))
    store.put_blame(project, OTHER_REPO, theirs)
    assert store.get_blame(project, OTHER_REPO, b.path, b.commit, FP) == theirs
    assert store.get_blame(project, REPO, b.path, b.commit, FP) == b


def test_fingerprint_isolation(store: Store, project: ProjectId) -> None:
    b = blame()
    store.put_blame(project, REPO, b)
    assert store.get_blame(project, REPO, b.path, b.commit, OTHER_FP) is None
    assert store.blames_at(project, REPO, b.path, OTHER_FP, [b.commit]) == set()
    ignoring = blame(fingerprint=OTHER_FP, runs=((C2, b.path, 1, 10),))
    store.put_blame(project, REPO, ignoring)
    assert store.get_blame(project, REPO, b.path, b.commit, OTHER_FP) == ignoring
    assert store.get_blame(project, REPO, b.path, b.commit, FP) == b


def test_path_and_commit_are_part_of_the_key(store: Store, project: ProjectId) -> None:
    b = blame()
    store.put_blame(project, REPO, b)
    assert store.get_blame(project, REPO, "src/kong/other.rs", b.commit, FP) is None
    assert store.get_blame(project, REPO, b.path, C1, FP) is None


# --- blames_at ----------------------------------------------------------------------------


def test_blames_at(store: Store, project: ProjectId) -> None:
    path = "src/a.py"
    for at in (C1, C2):
        store.put_blame(project, REPO, blame(path=path, at=at))
    store.put_blame(project, REPO, blame(path="src/b.py", at=C3))
    assert store.blames_at(project, REPO, path, FP, [C1, C2, C3, HEAD]) == {C1, C2}
    assert store.blames_at(project, REPO, path, FP, [C2, C2]) == {C2}
    assert store.blames_at(project, REPO, path, FP, []) == set()
    assert store.blames_at(project, REPO, "src/b.py", FP, (C1, C3)) == {C3}


def test_blames_at_refuses_bad_input(store: Store, project: ProjectId) -> None:
    with pytest.raises(ContentError, match=r"commits\[1\]"):
        store.blames_at(project, REPO, "a.py", FP, [C1, "HEAD"])
    with pytest.raises(ContentError, match="commits: expected a sequence"):
        store.blames_at(project, REPO, "a.py", FP, C1)
    with pytest.raises(ContentError, match="fingerprint"):
        store.blames_at(project, REPO, "a.py", "xyz", [C1])


# --- validation ---------------------------------------------------------------------------


def _bad(**changes: Any) -> SharedBlame:
    return dataclasses.replace(blame(), **changes)


P = "src/kong/buffer.rs"
BAD = [
    ("runs[1].length", _bad(runs=((C1, P, 1, 10), (C1, P, 11, 0)))),
    ("runs[0].length", _bad(runs=((C1, P, 1, -3), (C1, P, 1, 13)))),
    ("runs[0].orig_start", _bad(runs=((C1, P, 0, 10),))),
    ("runs: the lengths add up to 9 lines, but line_count is 10", _bad(runs=((C1, P, 1, 9),))),
    ("runs: the lengths add up to 11 lines", _bad(runs=((C1, P, 1, 11),))),
    (
        "runs[0].orig_commit: " + "9" * 40 + " is not one of commits",
        _bad(runs=(("9" * 40, P, 1, 10),)),
    ),
    ("runs[0].orig_commit", _bad(runs=(("HEAD", P, 1, 10),))),
    ("runs[0].orig_path", _bad(runs=((C1, "../etc/passwd", 1, 10),))),
    ("runs[0]: expected (orig_commit", _bad(runs=((C1, P, 1),))),
    ("line_count", _bad(line_count=-1)),
    ("path", _bad(path="/abs/path")),
    ("path", _bad(path="")),
    ("commit", _bad(commit="A" * 40)),
    ("commit", _bad(commit="abc")),
    ("fingerprint", _bad(fingerprint="0" * 31)),
    ("blob_id", _bad(blob_id="not-a-blob")),
    ("commits[0].boundary", _bad(commits=((C1, "a", "b", 1, "s", "no"),))),
    ("commits[0].author_time", _bad(commits=((C1, "a", "b", "1", "s", False),))),
    ("commits[0].author_name", _bad(commits=((C1, "a\x00", "b", 1, "s", False),))),
    ("commits[1].sha", _bad(commits=(commit(C1), commit(C1), commit(C2), commit(C3)))),
    ("commits[0]: expected (sha", _bad(commits=((C1, "a"),))),
]


@pytest.mark.parametrize(("field", "bad"), BAD, ids=[f for f, _ in BAD])
def test_put_refuses_a_bad_blame_naming_the_field(
    store: Store, project: ProjectId, field: str, bad: SharedBlame
) -> None:
    with pytest.raises(ValueError, match=f"^{re.escape(field)}"):
        store.put_blame(project, REPO, bad)
    assert store.blames_at(project, REPO, P, FP, [HEAD]) == set()


def test_check_accepts_what_put_stores() -> None:
    check_blame(blame())


def test_get_refuses_a_malformed_key(store: Store, project: ProjectId) -> None:
    with pytest.raises(ContentError, match=r"^fingerprint"):
        store.get_blame(project, REPO, P, HEAD, "0" * 33)
    with pytest.raises(ContentError, match=r"^commit"):
        store.get_blame(project, REPO, P, "HEAD", FP)
    with pytest.raises(ContentError, match=r"^path"):
        store.get_blame(project, REPO, "a/../b", HEAD, FP)


def test_a_row_changed_behind_the_store_is_a_miss(
    store: Store, store_dsn: str, project: ProjectId
) -> None:
    b = blame()
    store.put_blame(project, REPO, b)
    with psycopg.connect(store_dsn) as conn:
        conn.execute(
            "DELETE FROM blame_run r USING blame_file f"
            " WHERE r.project = f.project AND r.file_id = f.id AND f.project = %s AND r.seq = 1",
            (project.value,),
        )
    assert store.get_blame(project, REPO, b.path, b.commit, FP) is None
    with psycopg.connect(store_dsn) as conn:  # leave the module's cache consistent
        conn.execute("DELETE FROM blame_file WHERE project = %s", (project.value,))


def test_schema_checks_and_cascade(store: Store, store_dsn: str, project: ProjectId) -> None:
    store.put_blame(project, REPO, blame())
    insert = (
        "INSERT INTO blame_file (project, repo, path, commit_sha, fingerprint, blob_id,"
        " line_count, run_count, commits, est_bytes)"
        " VALUES (%s, 'r', %s, %s, %s, %s, 1, 1, '[]', 0)"
    )
    with psycopg.connect(store_dsn) as conn:
        for path, sha, fp in [
            ("a//b", HEAD, FP),
            ("./a", HEAD, FP),
            ("a/..", HEAD, FP),
            ("/a", HEAD, FP),
            ("a", HEAD.upper(), FP),
            ("a", HEAD[:39], FP),
            ("a", HEAD, FP[:31]),
        ]:
            with pytest.raises(psycopg.errors.CheckViolation), conn.transaction():
                conn.execute(insert, (project.value, path, sha, fp, BLOB))
        with pytest.raises(psycopg.errors.CheckViolation), conn.transaction():
            conn.execute("UPDATE blame_run SET orig_start = 0 WHERE project = %s", (project.value,))
        conn.execute("DELETE FROM blame_file WHERE project = %s", (project.value,))
        left = conn.execute(
            "SELECT count(*) FROM blame_run WHERE project = %s", (project.value,)
        ).fetchone()
    assert left == (0,)


def test_reads_use_the_key_index(store: Store, store_dsn: str, project: ProjectId) -> None:
    with psycopg.connect(store_dsn) as conn:
        conn.execute("SET enable_seqscan = off")
        plan = conn.execute(
            "EXPLAIN SELECT commit_sha FROM blame_file WHERE project = 'p' AND repo = 'r'"
            " AND path = 'a' AND fingerprint = %s AND commit_sha = ANY(%s)",
            (FP, [C1, C2]),
        ).fetchall()
    assert "blame_file_key" in "\n".join(r[0] for r in plan)


# --- used_at ------------------------------------------------------------------------------


def _used_at(dsn: str, project: ProjectId, at: str) -> Any:
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT used_at FROM blame_file WHERE project = %s AND commit_sha = %s",
            (project.value, at),
        ).fetchone()
    assert row is not None
    return row[0]


def _age(dsn: str, project: ProjectId, at: str, seconds: int) -> None:
    with psycopg.connect(dsn) as conn:
        conn.execute(
            "UPDATE blame_file SET used_at = now() - make_interval(secs => %s)"
            " WHERE project = %s AND commit_sha = %s",
            (seconds, project.value, at),
        )


def test_a_read_marks_use_at_most_once_a_minute(
    store: Store, store_dsn: str, project: ProjectId
) -> None:
    b = blame()
    store.put_blame(project, REPO, b)
    fresh = _used_at(store_dsn, project, b.commit)
    assert store.get_blame(project, REPO, b.path, b.commit, FP) == b
    assert _used_at(store_dsn, project, b.commit) == fresh  # marked less than a minute ago
    _age(store_dsn, project, b.commit, 120)
    aged = _used_at(store_dsn, project, b.commit)
    assert store.get_blame(project, REPO, b.path, b.commit, FP) == b
    assert _used_at(store_dsn, project, b.commit) > aged
    # blames_at only asks: it marks nothing.
    _age(store_dsn, project, b.commit, 120)
    aged = _used_at(store_dsn, project, b.commit)
    store.blames_at(project, REPO, b.path, FP, [b.commit])
    assert _used_at(store_dsn, project, b.commit) == aged


# --- the bound ----------------------------------------------------------------------------


def test_default_bound() -> None:
    assert (MAX_BLAMES, MAX_BLAME_RUNS) == (20_000, 5_000_000)


def test_least_recently_used_go_first(fresh_dsn: str, project: ProjectId) -> None:
    with Store(fresh_dsn, max_blames=5, blame_evict_every=1) as store:
        for i in range(5):
            store.put_blame(project, REPO, one_run_blame(i))
        # Used an hour ago, nth(0) the longest ago; then nth(0) is read, so used just now.
        for i in range(5):
            _age(fresh_dsn, project, nth(i), 3600 + 10 * (5 - i))
        assert store.get_blame(project, REPO, "f.txt", nth(0), FP) is not None
        store.put_blame(project, REPO, one_run_blame(5))
        store.put_blame(project, REPO, one_run_blame(6))
        kept = store.blames_at(project, REPO, "f.txt", FP, [nth(i) for i in range(7)])
    assert kept == {nth(0), nth(3), nth(4), nth(5), nth(6)}
    assert files_and_runs(fresh_dsn) == (5, 5)


def test_the_bound_is_checked_every_n_puts_not_on_each(fresh_dsn: str, project: ProjectId) -> None:
    """Puts between two checks let the cache outgrow its bound by fewer than evict_every
    files, never more; evict_blames brings it back at once."""
    seen = []
    with Store(fresh_dsn, max_blames=5, blame_evict_every=4) as store:
        for i in range(30):
            store.put_blame(project, REPO, one_run_blame(i))
            seen.append(files_and_runs(fresh_dsn)[0])
        assert max(seen) > 5  # not every put counted the table
        assert max(seen) <= 5 + 4 - 1
        store.evict_blames()
        assert files_and_runs(fresh_dsn) == (5, 5)
        kept = store.blames_at(project, REPO, "f.txt", FP, [nth(i) for i in range(30)])
    assert kept == {nth(i) for i in range(25, 30)}  # the newest


def test_the_bound_on_runs(fresh_dsn: str, project: ProjectId) -> None:
    with Store(fresh_dsn, max_blames=1000, max_blame_runs=10, blame_evict_every=1) as store:
        for i in range(4):
            store.put_blame(project, REPO, one_run_blame(i, runs=4))
            assert files_and_runs(fresh_dsn)[1] <= 10
        assert store.blame_cache_status() == (2, 8)
        kept = store.blames_at(project, REPO, "f.txt", FP, [nth(i) for i in range(4)])
        assert kept == {nth(2), nth(3)}
        # A blame of more runs than the whole cache may hold is not stored at all.
        store.put_blame(project, REPO, one_run_blame(9, runs=11))
        assert store.blames_at(project, REPO, "f.txt", FP, [nth(9)]) == set()
        assert store.blame_cache_status() == (2, 8)


def test_a_large_put_checks_the_bound_itself(fresh_dsn: str, project: ProjectId) -> None:
    """With checks every 1000 puts, small puts outgrow the bound, but a put large enough to
    matter (here 2 runs of a 32000-run bound) checks it at once."""
    with Store(fresh_dsn, max_blames=3, max_blame_runs=32_000, blame_evict_every=1000) as store:
        for i in range(6):
            store.put_blame(project, REPO, one_run_blame(i))
        assert store.blame_cache_status() == (6, 6)
        store.put_blame(project, REPO, one_run_blame(6, runs=2))
        assert store.blame_cache_status() == (3, 4)
        kept = store.blames_at(project, REPO, "f.txt", FP, [nth(i) for i in range(7)])
    assert kept == {nth(4), nth(5), nth(6)}


def test_the_bound_spans_projects_and_repos(fresh_dsn: str) -> None:
    """The cache is one table for everyone: its bound counts every project's blames."""
    a, b = ProjectId("bound-a"), ProjectId("bound-b")
    with Store(fresh_dsn, max_blames=4, blame_evict_every=1) as store:
        for i in range(3):
            store.put_blame(a, REPO, one_run_blame(i))
        for i in range(3):
            store.put_blame(b, OTHER_REPO, one_run_blame(i))
        assert store.blame_cache_status() == (4, 4)
        assert store.blames_at(a, REPO, "f.txt", FP, [nth(i) for i in range(3)]) == {nth(2)}


def test_bound_settings_are_checked(store_dsn: str) -> None:
    with pytest.raises(ContentError, match="max_blames"):
        Store(store_dsn, max_blames=0, lazy=True)
    with pytest.raises(ContentError, match="blame_evict_every"):
        Store(store_dsn, blame_evict_every=0, lazy=True)


# --- status -------------------------------------------------------------------------------


def test_status_counts_the_blame_cache(
    store: Store, store_dsn: str, project: ProjectId, capsys: pytest.CaptureFixture[str]
) -> None:
    before = store.status()
    assert (before.blame_files, before.blame_runs) == store.blame_cache_status()
    store.put_blame(project, REPO, blame())
    store.put_blame(project, REPO, blame(at=C1, runs=((C3, P, 1, 2),)))
    after = store.status()
    assert (after.blame_files, after.blame_runs) == (
        before.blame_files + 2,
        before.blame_runs + 5,
    )
    assert store.blame_cache_status() == files_and_runs(store_dsn)

    assert main(["--dsn", store_dsn, "db", "status", "--json"]) == 0
    body = json.loads(capsys.readouterr().out)
    assert (body["blame_files"], body["blame_runs"]) == (after.blame_files, after.blame_runs)
    assert list(body)[:4] == ["store", "schema_version", "latest_version", "nodes"]
    assert main(["--dsn", store_dsn, "db", "status"]) == 0
    out = capsys.readouterr().out
    assert f"blame cache     {after.blame_files} files · {after.blame_runs} runs\n" in out
    assert "projects        " in out


# --- migration ----------------------------------------------------------------------------


def test_0005_applies_on_top_of_a_0004_store(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    shipped = available()
    assert [m.name for m in shipped][3:5] == ["rewritten_history", "blame_cache"]
    old_name, old_dsn = create_database("blame_upgrade")
    new_name, new_dsn = create_database("blame_fresh")
    try:
        with monkeypatch.context() as m:
            m.setattr(migrate_module, "available", lambda: shipped[:4])
            with psycopg.connect(old_dsn) as conn:
                assert [x.version for x in migrate(conn)] == [1, 2, 3, 4]
        with psycopg.connect(old_dsn) as conn:
            conn.execute(
                "INSERT INTO git_commit (project, repo, commit_sha, message, author_name,"
                " author_email, author_date, patch_id) VALUES ('p', 'r', %s, 'm', 'a', 'e',"
                " now(), 'x')",
                (C1,),
            )
        # A store at 0004 reports an empty cache and the pending migration.
        with Store(old_dsn, max_size=1) as store:
            status = store.status()
        assert (status.schema_version, status.latest_version) == (4, len(shipped))
        assert (status.blame_files, status.blame_runs) == (0, 0)
        assert main(["--dsn", old_dsn, "db", "status"]) == 0
        assert "(run `mem db migrate`)" in capsys.readouterr().out

        with psycopg.connect(old_dsn) as conn:
            assert [x.name for x in migrate(conn)] == [m.name for m in shipped[4:]]
        with psycopg.connect(new_dsn) as conn:
            migrate(conn)
        old, new = schema_snapshot(old_dsn), schema_snapshot(new_dsn)
        for part in ("columns", "constraints", "indexes"):
            assert old[part] == new[part], part
        assert [v[:3] for v in old["versions"]] == [v[:3] for v in new["versions"]]

        with Store(old_dsn, max_size=1) as store, psycopg.connect(old_dsn) as conn:
            assert conn.execute("SELECT count(*) FROM git_commit").fetchone() == (1,)
            b = blame()
            store.put_blame(ProjectId("p"), REPO, b)
            assert store.get_blame(ProjectId("p"), REPO, b.path, b.commit, FP) == b
            assert store.status().schema_version == len(shipped)
    finally:
        drop_database(old_name)
        drop_database(new_name)


# --- one line of a blame -------------------------------------------------------------------


def one_line_of(stored: SharedBlame, line: int) -> SharedBlameLine:
    """blame_line's answer written plainly: the last run starting at or before ``line``."""
    at, found = 1, SharedBlameLine(stored.commit, stored.line_count, None, None)
    for run in stored.runs:
        if at > line:
            break
        found = SharedBlameLine(stored.commit, stored.line_count, run, at)
        at += run[3]
    return found


def test_one_line_of_a_blame_is_its_run(store: Store, project: ProjectId) -> None:
    stored = blame()
    store.put_blame(project, REPO, stored)
    for line in range(1, stored.line_count + 3):  # past the end: the last run, and the count
        assert store.blame_line(project, REPO, stored.path, FP, BLOB, line) == [
            one_line_of(stored, line)
        ], line
    # Line 5 is the first of the second run: from line 17 of the old name.
    (found,) = store.blame_line(project, REPO, stored.path, FP, BLOB, 5)
    assert (found.run, found.run_start) == ((C2, "src/old_name.rs", 17, 3), 5)


def test_one_line_is_read_only_from_blames_of_that_blob_setting_repository_and_project(
    store: Store, project: ProjectId
) -> None:
    stored = blame()
    store.put_blame(project, REPO, stored)
    assert store.blame_line(project, REPO, stored.path, FP, "c" * 40, 1) == []
    assert store.blame_line(project, REPO, stored.path, OTHER_FP, BLOB, 1) == []
    assert store.blame_line(project, OTHER_REPO, stored.path, FP, BLOB, 1) == []
    assert store.blame_line(project, REPO, "src/other.rs", FP, BLOB, 1) == []
    assert (
        store.blame_line(ProjectId(project.value + "-other"), REPO, stored.path, FP, BLOB, 1) == []
    )
    # Two commits whose file is the same blob: both rows, each with its own commit.
    store.put_blame(project, REPO, dataclasses.replace(stored, commit=C3))
    found = store.blame_line(project, REPO, stored.path, FP, BLOB, 9)
    assert sorted(f.commit for f in found) == sorted([HEAD, C3])
    assert {(f.run, f.run_start) for f in found} == {((C3, stored.path, 9, 2), 9)}


def test_one_line_refuses_a_bad_argument_naming_it(store: Store, project: ProjectId) -> None:
    for args, field in (
        (("../x", FP, BLOB, 1), "path"),
        (("a.rs", "f" * 31, BLOB, 1), "fingerprint"),
        (("a.rs", FP, "B" * 40, 1), "blob_id"),
        (("a.rs", FP, BLOB, 0), "line"),
    ):
        with pytest.raises(ContentError, match=field):
            store.blame_line(project, REPO, *args)


def test_0010_gives_stored_runs_the_lines_they_start_at(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    shipped = available()
    assert [m.name for m in shipped][9] == "blame_run_lines"
    name, dsn = create_database("blame_lines_upgrade")
    try:
        with monkeypatch.context() as m:
            m.setattr(migrate_module, "available", lambda: shipped[:9])
            with psycopg.connect(dsn) as conn:
                migrate(conn)
        stored = blame()
        with psycopg.connect(dsn) as conn:  # a blame as the store wrote it before 0010
            (file_id,) = conn.execute(
                "INSERT INTO blame_file (project, repo, path, commit_sha, fingerprint, blob_id,"
                " line_count, run_count, commits, est_bytes) VALUES ('p', %s, %s, %s, %s, %s,"
                " %s, %s, '[]', 0) RETURNING id",
                (
                    REPO.value,
                    stored.path,
                    stored.commit,
                    FP,
                    BLOB,
                    stored.line_count,
                    len(stored.runs),
                ),
            ).fetchone()
            for seq, (sha, path, start, length) in enumerate(stored.runs):
                conn.execute(
                    "INSERT INTO blame_run (project, file_id, seq, orig_commit, orig_path,"
                    " orig_start, length) VALUES ('p', %s, %s, %s, %s, %s, %s)",
                    (file_id, seq, sha, path, start, length),
                )
        with psycopg.connect(dsn) as conn:
            assert [x.name for x in migrate(conn)] == ["blame_run_lines"]
            starts = conn.execute(
                "SELECT line_start FROM blame_run WHERE file_id = %s ORDER BY seq", (file_id,)
            ).fetchall()
        assert [s for (s,) in starts] == [1, 5, 8, 9]
    finally:
        drop_database(name)
