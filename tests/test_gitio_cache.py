"""The blame cache: keyed by repository, its format versioned, its memory layers bounded and
cleared together."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from cachetools import LRUCache

from poimen_memory.gitio import BlameCache, Blamer, GitRepo, GitRunner
from poimen_memory.gitio.blame import Blame

from .gitrepo import ALICE_OLD, BOB, FixtureRepo, kong_repo

BUFFER = "src/kong/buffer.rs"


def _clone(source: FixtureRepo, target: Path) -> FixtureRepo:
    source.git("clone", "-q", str(source.root), str(target))
    clone = FixtureRepo(target)
    clone.git("config", "user.name", "Fixture")
    clone.git("config", "user.email", "fixture@test")
    return clone


def _authors(blame: Blame) -> list[tuple[str, str, str]]:
    """Per line: the origin commit and its author, as the blame says."""
    out = []
    for line in blame.lines:
        commit = blame.commits[line.commit]
        out.append((line.commit.value, commit.author_name, commit.author_email))
    return out


def _diverge(clone: FixtureRepo, setting: str, kong: FixtureRepo) -> None:
    """Give ``clone`` a setting under which line 42 blames differently than in ``kong``."""
    if setting == "mailmap":
        # An edited, uncommitted .mailmap: Alice's old address maps to another name.
        clone.write(".mailmap", f"Alice Elsewhere <alice@elsewhere.test> <{ALICE_OLD[1]}>\n")
    elif setting == "ignore-revs":
        clone.write("revs.txt", f"{kong.commits['fmt']}\n")
        clone.git("config", "blame.ignoreRevsFile", "revs.txt")
    else:
        # A replace ref: same commit ids, another author. No file or setting of blame
        # changes, so only the repository in the key keeps the clones apart.
        sha = kong.commits["abc123"]
        old = f"author {ALICE_OLD[0]} <{ALICE_OLD[1]}>"
        body = clone.git("cat-file", "commit", sha).replace(old, "author Mallory <m@x.test>", 1)
        path = clone.root / ".git" / "replacement"
        path.write_text(body)
        new = clone.git("hash-object", "-t", "commit", "-w", str(path)).strip()
        clone.git("replace", sha, new)


@pytest.mark.parametrize("setting", ["mailmap", "ignore-revs", "replace"])
def test_clones_sharing_a_cache_never_see_each_others_blame(tmp_path: Path, setting: str) -> None:
    kong = kong_repo(tmp_path / "kong")
    if setting == "ignore-revs":
        kong.set_line(BUFFER, 42, "const BODY_BUFFER: usize = 16*MB;  // reformatted")
        kong.commit("fmt", "Reformat", BOB)
    plain = _clone(kong, tmp_path / "plain")
    other = _clone(kong, tmp_path / "other")
    _diverge(other, setting, kong)
    truth = {}
    for clone in (plain, other):
        repo = GitRepo.discover(clone.root)
        truth[clone.root] = _authors(repo.blame(BUFFER, repo.head()))
    assert truth[plain.root] != truth[other.root], "the setting must change the blame"

    db = tmp_path / "cache" / "blame.sqlite3"
    # Each clone blamed through the one cache file, in both orders and across restarts.
    for order in ((plain, other), (other, plain)):
        for clone in order:
            blamer = Blamer(GitRepo.discover(clone.root), BlameCache(db))
            assert _authors(blamer.blame_file(BUFFER)) == truth[clone.root]
            origin = blamer.origin(BUFFER, 42)
            assert origin is not None
            assert origin.commit.value == truth[clone.root][41][0]
            blamer.cache.close()
    assert BlameCache(db).stats()[0] == 2


def test_same_settings_still_one_entry_per_repository(tmp_path: Path) -> None:
    kong = kong_repo(tmp_path / "kong")
    clone = _clone(kong, tmp_path / "clone")
    cache = BlameCache(tmp_path / "c.db")
    one, two = (Blamer(GitRepo.discover(r.root), cache) for r in (kong, clone))
    head = one.repo.head()
    assert two.repo.head() == head
    assert one.key(BUFFER, head).repo != two.key(BUFFER, head).repo
    assert one.key(BUFFER, head).fingerprint == two.key(BUFFER, head).fingerprint
    one.blame_file(BUFFER)
    assert two.cached(BUFFER, head) is None
    two.blame_file(BUFFER)
    assert cache.stats()[0] == 2


def test_an_old_cache_file_is_dropped_not_misread(tmp_path: Path) -> None:
    kong = kong_repo(tmp_path / "kong")
    db = tmp_path / "c.db"
    old = sqlite3.connect(db)
    old.execute(
        "CREATE TABLE blame (path TEXT NOT NULL, commit_sha TEXT NOT NULL, fingerprint TEXT"
        " NOT NULL, used REAL NOT NULL, size INTEGER NOT NULL, data BLOB NOT NULL,"
        " PRIMARY KEY (path, commit_sha, fingerprint))"
    )
    old.execute("INSERT INTO blame VALUES (?, ?, 'f', 0, 1, x'00')", (BUFFER, "a" * 40))
    old.commit()
    old.close()
    cache = BlameCache(db)
    assert cache.stats() == (0, 0)
    blamer = Blamer(GitRepo.discover(kong.root), cache)
    assert blamer.blame_file(BUFFER).origin(42) is not None
    cache.close()
    assert BlameCache(db).stats()[0] == 1  # the new format is kept across restarts


def test_invalidate_clears_every_layer_and_rereads_settings(tmp_path: Path) -> None:
    kong = kong_repo(tmp_path / "kong")
    kong.set_line(BUFFER, 42, "const BODY_BUFFER: usize = 16*MB;  // reformatted")
    fmt = kong.commit("fmt", "Reformat", BOB)
    runner = GitRunner()
    blamer = Blamer(GitRepo.discover(kong.root, runner), BlameCache(None))
    head = blamer.repo.head()
    blamer.head_blob(BUFFER, head)
    first = blamer.origin(BUFFER, 42, head, warm=False)
    assert first is not None
    assert first.commit.value == fmt
    layers = [v for v in vars(blamer).values() if isinstance(v, LRUCache)]
    assert len(layers) >= 4
    assert all(0 < layer.maxsize <= 4096 for layer in layers)  # every layer is bounded
    assert any(len(layer) for layer in layers)

    kong.write("revs.txt", f"{fmt}\n")
    kong.git("config", "blame.ignoreRevsFile", "revs.txt")
    # Settings are read once: the single-line answer is remembered until invalidate().
    assert blamer.origin(BUFFER, 42, head) == first
    blamer.invalidate()
    assert all(len(layer) == 0 for layer in layers)
    again = blamer.origin(BUFFER, 42, head)
    assert again is not None
    assert again.commit.value == kong.commits["abc123"]


def test_an_edited_mailmap_counts_from_the_next_blame(tmp_path: Path) -> None:
    kong = kong_repo(tmp_path / "kong")
    blamer = Blamer(GitRepo.discover(kong.root), BlameCache(tmp_path / "c.db"))
    before = blamer.blame_file(BUFFER)
    line = before.lines[41]
    assert before.commits[line.commit].author_name == "Alice Smith"
    kong.write(".mailmap", f"Alice Elsewhere <alice@elsewhere.test> <{ALICE_OLD[1]}>\n")
    after = blamer.blame_file(BUFFER)
    assert after.commits[line.commit].author_name == "Alice Elsewhere"
    (kong.root / ".mailmap").unlink()
    assert blamer.blame_file(BUFFER).commits[line.commit].author_name == ALICE_OLD[0]


def test_the_cache_file_stays_within_its_bound_counting_the_line_rows(tmp_path: Path) -> None:
    """The bound on bytes counts what an entry takes on disk, one row a line included: a
    cache of many long files stays near its bound, not at the blobs' size times fifty."""
    import random
    from datetime import UTC, datetime

    from poimen_memory.domain import CommitSha
    from poimen_memory.gitio import CacheKey
    from poimen_memory.gitio.blame import BlameCommit, BlameLine

    rng = random.Random(3)
    bound = 3 * 1024 * 1024
    db = tmp_path / "c.db"
    cache = BlameCache(db, max_bytes=bound, memory_entries=1)
    commits = [CommitSha(f"{rng.getrandbits(160):040x}") for _ in range(40)]
    info = {
        c: BlameCommit(c, "A", "a@x.test", datetime(2026, 1, 1, tzinfo=UTC), "s", False)
        for c in commits
    }
    for f in range(40):
        path = f"src/module_{f:02d}.rs"
        lines = tuple(
            BlameLine(n, rng.choice(commits), path, n) for n in range(1, 3001)
        )  # blobs of a few KB, line rows of some 600 KB
        head = CommitSha(f"{f:040x}")
        cache.put(CacheKey("repo-1", path, head, "f" * 32), Blame(path, head, lines, info))
    cache.close()
    with sqlite3.connect(db) as conn:
        page = conn.execute("PRAGMA page_size").fetchone()[0]
        used = page * (
            conn.execute("PRAGMA page_count").fetchone()[0]
            - conn.execute("PRAGMA freelist_count").fetchone()[0]
        )
        kept = conn.execute("SELECT count(*) FROM blame").fetchone()[0]
    assert 1 <= kept < 40  # older entries went
    assert used <= bound * 1.25, f"{used} bytes in use against a bound of {bound}"


def test_a_server_cache_writes_a_blame_after_keeping_it(tmp_path: Path) -> None:
    """With ``write_later`` (a server), a blame is kept in memory at once (and found there,
    also by line) and written to disk by a thread of its own a moment later; ``close``
    writes what is left. Without it, the write is done before ``put`` returns."""
    import time
    from datetime import UTC, datetime

    from poimen_memory.domain import CommitSha
    from poimen_memory.gitio import CacheKey
    from poimen_memory.gitio.blame import BlameCommit, BlameLine
    from poimen_memory.gitio.cache import WRITE_DELAY_S

    commit = CommitSha("c" * 40)
    info = {
        commit: BlameCommit(commit, "A", "a@x.test", datetime(2026, 1, 1, tzinfo=UTC), "s", False)
    }

    def blame(path: str) -> tuple[CacheKey, Blame]:
        lines = tuple(BlameLine(n, commit, path, n) for n in range(1, 51))
        return CacheKey("repo-1", path, commit, "f" * 32), Blame(path, commit, lines, info)

    def on_disk(db: Path, key: CacheKey) -> bool:
        other = BlameCache(db)  # another process's view: the file alone
        try:
            return other.get(key, commit) is not None
        finally:
            other.close()

    db = tmp_path / "c.db"
    server = BlameCache(db, write_later=True, memory_entries=1)
    first, second = blame("a.rs"), blame("b.rs")
    server.put(*first)
    server.put(*second)  # first leaves memory: found among the unwritten
    assert server.get(first[0], commit) == first[1]
    assert server.line(first[0], 7) == BlameLine(7, commit, "a.rs", 7)
    assert not on_disk(db, first[0])
    deadline = time.monotonic() + 20 * WRITE_DELAY_S
    while not on_disk(db, second[0]) and time.monotonic() < deadline:
        time.sleep(WRITE_DELAY_S / 4)
    assert on_disk(db, first[0])
    assert on_disk(db, second[0])
    # While requests keep coming, nothing is written; once they stop, it is.
    from poimen_memory.gitio import note_activity

    third = blame("c.rs")
    server.put(*third)
    busy_until = time.monotonic() + 4 * WRITE_DELAY_S
    while time.monotonic() < busy_until:
        note_activity()
        time.sleep(WRITE_DELAY_S / 10)
    assert not on_disk(db, third[0])
    deadline = time.monotonic() + 20 * WRITE_DELAY_S
    while not on_disk(db, third[0]) and time.monotonic() < deadline:
        time.sleep(WRITE_DELAY_S / 4)
    assert on_disk(db, third[0])
    fourth = blame("e.rs")
    server.put(*fourth)
    server.close()
    assert on_disk(db, fourth[0])

    one_shot = BlameCache(tmp_path / "d.db")
    fifth = blame("d.rs")
    one_shot.put(*fifth)
    assert on_disk(tmp_path / "d.db", fifth[0])
    one_shot.close()
