"""What commits changed (gitio.history) on real repositories: added lines, hunks, renames,
merges, patch ids across cherry-pick, rebase and amend, the size cap, and ancestry."""

from __future__ import annotations

import hashlib
import stat
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from poimen_memory.domain import CommitSha
from poimen_memory.gitio import GitFailed, GitRepo, GitRunner, UnknownCommit
from poimen_memory.gitio.history import Change, FileChange, ancestors_of, changes, line_hash

from .gitrepo import ALICE, BOB, CAROL, FixtureRepo, numbered

INT64 = (-(2**63), 2**63 - 1)
MISSING = CommitSha("0123456789abcdef" * 2 + "01234567")


def sha(fx: FixtureRepo, label: str) -> CommitSha:
    return CommitSha(fx.commits[label])


def head(fx: FixtureRepo) -> CommitSha:
    return CommitSha(fx.git("rev-parse", "HEAD").strip())


def one(fx: FixtureRepo, commit: CommitSha | str) -> Change:
    commit = CommitSha(commit) if isinstance(commit, str) else commit
    found = changes(GitRepo.discover(fx.root), [commit])
    assert list(found) == [commit]
    return found[commit]


def text(*lines: str) -> str:
    return "".join(f"{line}\n" for line in lines)


@pytest.fixture
def fx(tmp_path: Path) -> FixtureRepo:
    repo = FixtureRepo.create(tmp_path / "repo")
    repo.write("src/app.py", numbered("app", 10))
    repo.write("src/util.py", numbered("util", 6))
    repo.commit("root", "Initial", CAROL)
    return repo


# -- line_hash ------------------------------------------------------------------------------


@pytest.mark.parametrize("line", ["", "   ", "}", ")", "})", " } ) ", "\t\r\n", "a\u00a0b"])
def test_trivial_lines_have_no_hash(line: str) -> None:
    assert line_hash(line) is None
    assert line_hash(line.encode("utf-8")) is None


def test_line_hash_ignores_whitespace_and_fits_a_bigint() -> None:
    h = line_hash("return foo(x, y);")
    assert h is not None
    assert INT64[0] <= h <= INT64[1]
    for variant in ("  return foo(x,y);\r", "return\tfoo( x, y );", b"return foo(x, y);\n"):
        assert line_hash(variant) == h
    assert line_hash("return foo(x, z);") != h
    assert line_hash("\u00a0return\u2003foo(x,y);") == h  # Unicode spaces are whitespace too
    digest = hashlib.sha256(b"return").digest()[:8]
    assert line_hash(" ret urn ") == int.from_bytes(digest, "big", signed=True)
    # negative values occur (two's complement), and all stay within int64
    values = [line_hash(f"line number {i}") for i in range(200)]
    assert all(v is not None and INT64[0] <= v <= INT64[1] for v in values)
    assert any(v is not None and v < 0 for v in values)


def test_line_hash_bytes_and_text_agree_on_undecodable_bytes() -> None:
    raw = b"caf\xe9 = \xff\xfe1"
    assert line_hash(raw) == line_hash(raw.decode("utf-8", "surrogateescape"))
    assert line_hash(raw) is not None
    assert line_hash("\ud800abc") is not None  # a lone surrogate does not raise


# -- what a commit added ----------------------------------------------------------------------


def test_middle_of_file_edit(fx: FixtureRepo) -> None:
    lines = fx.lines("src/app.py")
    lines[4:5] = ["    new five", "new five b"]  # line 5 replaced by two
    lines.insert(8, "inserted")  # after old line 7 (new line 9)
    fx.write("src/app.py", text(*lines))
    c = one(fx, fx.commit("edit", "Edit", ALICE))
    assert c.complete
    assert c.parent == sha(fx, "root")
    assert c.committer_time == fx.clock
    assert set(c.files) == {"src/app.py"}
    f = c.files["src/app.py"]
    assert (f.path, f.old_path) == ("src/app.py", "src/app.py")
    assert f.added == (5, 6, 9)
    assert f.hashes == (line_hash("new five"), line_hash("new five b"), line_hash("inserted"))
    assert f.hunks == ((5, 1, 5, 2), (7, 0, 9, 1))
    assert [f.ordinal(n) for n in range(1, 13)] == [None] * 4 + [0, 1] + [None] * 2 + [2] + [
        None
    ] * 3
    assert f.hash_at(6) == line_hash("newfiveb")
    assert f.hash_at(7) is None
    assert c.hash_count(line_hash("inserted") or 0) == 1
    assert c.hash_count(line_hash("app line 1") or 0) == 0


def test_added_file(fx: FixtureRepo) -> None:
    fx.write("src/new.py", text("def f():", "    return 1", "}"))
    c = one(fx, fx.commit("add", "Add", BOB))
    f = c.files["src/new.py"]
    assert f.old_path is None
    assert f.added == (1, 2, 3)
    assert f.hashes == (line_hash("def f():"), line_hash("return 1"), None)
    assert f.hunks == ((0, 0, 1, 3),)
    assert f.replaced(1) is None


def test_deleted_file_has_no_entry_but_counts_in_the_patch_id(fx: FixtureRepo) -> None:
    (fx.root / "src" / "util.py").unlink()
    c = one(fx, fx.commit("del", "Delete", BOB))
    assert c.files == {}
    assert c.complete
    assert c.patch_id is not None
    empty = one(fx, fx.commit("empty", "Nothing", BOB))
    assert empty.files == {}
    assert empty.patch_id != c.patch_id


def test_rename_with_edits(fx: FixtureRepo) -> None:
    (fx.root / "lib").mkdir()
    fx.git("mv", "src/app.py", "lib/main.py")
    fx.set_line("lib/main.py", 3, "three, renamed")
    fx.write("lib/main.py", (fx.root / "lib/main.py").read_text() + "eleven\n")
    c = one(fx, fx.commit("mv", "Move", ALICE))
    assert set(c.files) == {"lib/main.py"}
    f = c.files["lib/main.py"]
    assert (f.path, f.old_path) == ("lib/main.py", "src/app.py")
    assert f.added == (3, 11)
    assert f.replaced(3) == ("src/app.py", 3, 3)


def test_unusual_names_are_unquoted(fx: FixtureRepo) -> None:
    names = ["with space.txt", "tab\there.txt", 'quote"d.txt', "ümlaut/ä b.txt", "back\\slash"]
    for name in names:
        fx.write(name, text("content of", name))
    fx.write("empty file", "")
    c = one(fx, fx.commit("names", "Names", ALICE))
    assert set(c.files) == {*names, "empty file", "src/app.py"} - {"src/app.py"}
    assert all(c.files[name].added == (1, 2) for name in names)
    assert c.files["empty file"].added == ()
    fx.git("mv", "with space.txt", "still spaced.txt")
    fx.git("mv", "tab\there.txt", "tab\tthere.txt")
    fx.git("mv", "empty file", "empty moved")  # no ---/+++ lines: names from the header
    c = one(fx, fx.commit("mv", "Move", ALICE))
    assert {f.path: f.old_path for f in c.files.values()} == {
        "still spaced.txt": "with space.txt",
        "tab\tthere.txt": "tab\there.txt",
        "empty moved": "empty file",
    }


def test_binary_file(fx: FixtureRepo) -> None:
    fx.write("logo.bin", b"\x00\x01\x02" * 10)
    c = one(fx, fx.commit("bin", "Binary", ALICE))
    assert c.files["logo.bin"].added == ()
    assert c.files["logo.bin"].old_path is None
    fx.write("logo.bin", b"\x00\x01\x03" * 10)
    first = one(fx, fx.commit("bin2", "Binary 2", ALICE))
    fx.write("logo.bin", b"\x00\x01\x04" * 10)
    second = one(fx, fx.commit("bin3", "Binary 3", ALICE))
    assert first.files["logo.bin"].old_path == "logo.bin"
    assert first.patch_id != second.patch_id


def test_merge_commit_is_diffed_against_its_first_parent(fx: FixtureRepo) -> None:
    fx.git("checkout", "-q", "-b", "side")
    fx.set_line("src/util.py", 2, "side two")
    fx.commit("side", "Side", BOB)
    fx.git("checkout", "-q", "main")
    fx.set_line("src/app.py", 2, "main two")
    fx.commit("main", "Main", ALICE)
    fx.git("merge", "-q", "--no-ff", "--no-edit", "side")
    merge = head(fx)
    c = one(fx, merge)
    assert c.parent == sha(fx, "main")
    assert set(c.files) == {"src/util.py"}
    assert c.files["src/util.py"].added == (2,)
    assert c.patch_id == one(fx, sha(fx, "side")).patch_id


def test_root_commit(fx: FixtureRepo) -> None:
    c = one(fx, sha(fx, "root"))
    assert c.parent is None
    assert c.complete
    assert set(c.files) == {"src/app.py", "src/util.py"}
    assert c.files["src/app.py"].old_path is None
    assert c.files["src/app.py"].added == tuple(range(1, 11))
    assert c.files["src/util.py"].hunks == ((0, 0, 1, 6),)


def test_replaced_maps_a_hunk_to_the_lines_it_removed(fx: FixtureRepo) -> None:
    lines = fx.lines("src/app.py")
    lines[3:5] = ["a", "b", "c"]  # old 4-5 -> new 4-6
    lines.insert(9, "pure insert")  # after old line 8
    del lines[1]  # old line 2 removed: a hunk with no new side
    fx.write("src/app.py", text(*lines))
    f = one(fx, fx.commit("r", "Replace", ALICE)).files["src/app.py"]
    assert f.hunks == ((2, 1, 1, 0), (4, 2, 3, 3), (8, 0, 9, 1))
    assert f.added == (3, 4, 5, 9)
    assert [f.replaced(n) for n in (3, 4, 5)] == [("src/app.py", 4, 5)] * 3
    assert f.replaced(1) is None
    assert f.replaced(2) is None
    assert f.replaced(6) is None
    assert f.replaced(9) is None  # an insertion replaced nothing
    assert f.replaced(10) is None


# -- patch ids ---------------------------------------------------------------------------------


def test_cherry_pick_onto_changed_neighbours_keeps_the_patch_id(fx: FixtureRepo) -> None:
    fx.git("checkout", "-q", "-b", "feature")
    fx.set_line("src/app.py", 5, "    feature five")
    fx.write("src/util.py", (fx.root / "src/util.py").read_text() + "util seven\n")
    picked = fx.commit("feature", "Feature", ALICE)
    fx.git("checkout", "-q", "main")
    fx.write("src/app.py", "header\nheader 2\n" + (fx.root / "src/app.py").read_text())
    fx.set_line("src/app.py", 5, "main three")  # old line 3: two lines above the change
    fx.set_line("src/app.py", 9, "main seven")  # old line 7: two lines below it
    fx.commit("main", "Main", BOB)
    fx.git("cherry-pick", picked)
    repo = GitRepo.discover(fx.root)
    found = changes(repo, [sha(fx, "feature"), head(fx)])
    original, copy = found[sha(fx, "feature")], found[head(fx)]
    assert original.files["src/app.py"].added == (5,)
    assert copy.files["src/app.py"].added == (7,)  # moved down, same edit
    assert original.patch_id == copy.patch_id
    assert original.patch_id is not None


def test_rebase_keeps_patch_ids_and_amend_changes_them(fx: FixtureRepo) -> None:
    fx.git("checkout", "-q", "-b", "feature")
    fx.set_line("src/app.py", 8, "feature eight")
    first = fx.commit("f1", "F1", ALICE)
    fx.set_line("src/util.py", 1, "feature util one")
    second = fx.commit("f2", "F2", ALICE)
    fx.git("checkout", "-q", "main")
    fx.set_line("src/app.py", 2, "main two")
    fx.commit("m", "M", BOB)
    fx.git("checkout", "-q", "feature")
    fx.git("rebase", "-q", "main")
    rebased = [CommitSha(s) for s in fx.git("rev-list", "-2", "HEAD").split()][::-1]
    assert {s.value for s in rebased}.isdisjoint({first, second})
    found = changes(GitRepo.discover(fx.root), [CommitSha(first), CommitSha(second), *rebased])
    assert [found[s].patch_id for s in rebased] == [
        found[CommitSha(first)].patch_id,
        found[CommitSha(second)].patch_id,
    ]
    assert found[rebased[0]].parent == sha(fx, "m")
    # an amend that only rewords keeps the patch id; one that changes a line does not
    fx.git("commit", "-q", "--amend", "-m", "F2 reworded")
    assert one(fx, head(fx)).patch_id == found[CommitSha(second)].patch_id
    fx.set_line("src/util.py", 1, "feature util 1")
    fx.git("commit", "-q", "-a", "--amend", "--no-edit")
    assert one(fx, head(fx)).patch_id != found[CommitSha(second)].patch_id


def test_patch_id_ignores_whitespace_only(fx: FixtureRepo) -> None:
    ids = {}
    for branch, line in [
        ("a", "    if (x) { y(); }"),
        ("b", "\tif(x){y();}   "),
        ("c", "    if (x) { z(); }"),
    ]:
        fx.git("checkout", "-q", "-b", branch, sha(fx, "root").value)
        fx.set_line("src/app.py", 4, line)
        ids[branch] = one(fx, CommitSha(fx.commit(branch, branch, ALICE))).patch_id
    assert ids["a"] == ids["b"]
    assert ids["a"] != ids["c"]


def test_patch_id_depends_on_the_path(fx: FixtureRepo) -> None:
    ids = []
    for path in ("src/app.py", "src/util.py"):
        fx.git("checkout", "-q", "-B", "x", sha(fx, "root").value)
        fx.write(path, (fx.root / path).read_text() + "same tail line\n")
        ids.append(one(fx, CommitSha(fx.commit(path, path, ALICE))).patch_id)
    assert ids[0] != ids[1]


def test_hash_count_spans_files(fx: FixtureRepo) -> None:
    fx.write("a.txt", text("shared line", "only a", "shared line"))
    fx.write("b.txt", text("  shared  line", "}"))
    c = one(fx, fx.commit("dup", "Dup", ALICE))
    assert c.hash_count(line_hash("shared line") or 0) == 3
    assert c.hash_count(line_hash("only a") or 0) == 1


# -- batches, the size cap, missing commits ---------------------------------------------------


def test_size_cap_marks_a_change_incomplete_and_keeps_reading(fx: FixtureRepo) -> None:
    fx.write("big.txt", numbered("big", 25))
    big = CommitSha(fx.commit("big", "Big", ALICE))
    fx.write("edge.txt", numbered("edge", 10))
    fx.set_line("src/app.py", 1, "changed")  # 10 + 2 = 12 lines: exactly the cap
    edge = CommitSha(fx.commit("edge", "Edge", ALICE))
    found = changes(GitRepo.discover(fx.root), [big, edge, sha(fx, "root")], max_lines=12)
    assert (found[big].complete, found[big].patch_id, dict(found[big].files)) == (False, None, {})
    assert found[big].parent == sha(fx, "root")
    assert found[edge].complete
    assert found[edge].files["edge.txt"].added == tuple(range(1, 11))
    assert found[edge].files["src/app.py"].added == (1,)
    assert found[sha(fx, "root")].complete is False  # 16 added lines


def test_missing_commits_do_not_fail_the_batch(fx: FixtureRepo) -> None:
    fx.git("checkout", "-q", "-b", "doomed")
    fx.set_line("src/app.py", 1, "soon gone")
    doomed = CommitSha(fx.commit("doomed", "Doomed", ALICE))
    fx.git("checkout", "-q", "main")
    fx.git("branch", "-D", "doomed")
    fx.git("reflog", "expire", "--expire=now", "--all")
    fx.git("gc", "-q", "--prune=now")
    fx.set_line("src/app.py", 2, "kept")
    kept = CommitSha(fx.commit("kept", "Kept", ALICE))
    seen: list[int] = []
    found = changes(
        GitRepo.discover(fx.root),
        [MISSING, kept, doomed, sha(fx, "root"), kept],
        on_progress=seen.append,
    )
    assert list(found) == [kept, sha(fx, "root")]
    assert seen == [1, 2]
    assert changes(GitRepo.discover(fx.root), [MISSING, doomed]) == {}
    assert changes(GitRepo.discover(fx.root), []) == {}


def test_many_commits_in_one_process(fx: FixtureRepo) -> None:
    made = []
    for i in range(12):
        fx.set_line("src/app.py", 1 + i % 10, f"edit number {i}")
        made.append(CommitSha(fx.commit(f"c{i}", f"C{i}", ALICE)))
    runner = GitRunner()
    repo = GitRepo.discover(fx.root, runner)
    repo.existing([(made[0], None)])  # start the object reader first
    before = runner.spawned
    found = changes(repo, made[::-1])
    assert runner.spawned - before == 1
    assert list(found) == made[::-1]
    assert [found[c].parent for c in made[1:]] == made[:-1]
    assert all(found[c].files["src/app.py"].added == (1 + i % 10,) for i, c in enumerate(made))


# -- ancestry ------------------------------------------------------------------------------------


@pytest.mark.parametrize("extra", [0, 10])
def test_ancestors_of(fx: FixtureRepo, extra: int) -> None:
    on_main = [sha(fx, "root")]
    for i in range(extra):
        fx.set_line("src/app.py", 1, f"main {i}")
        on_main.append(CommitSha(fx.commit(f"m{i}", "M", ALICE)))
    fx.git("checkout", "-q", "-b", "side")
    fx.set_line("src/util.py", 1, "side")
    side = CommitSha(fx.commit("side", "Side", BOB))
    fx.git("checkout", "-q", "-b", "doomed")
    fx.set_line("src/util.py", 2, "doomed")
    doomed = CommitSha(fx.commit("doomed", "Doomed", BOB))
    fx.git("checkout", "-q", "main")
    fx.git("branch", "-D", "doomed")
    fx.git("reflog", "expire", "--expire=now", "--all")
    fx.git("gc", "-q", "--prune=now")
    tip = head(fx)
    runner = GitRunner()
    repo = GitRepo.discover(fx.root, runner)
    repo.existing([(tip, None)])
    before = runner.spawned
    asked = [*on_main, side, doomed, MISSING]
    assert ancestors_of(repo, asked, tip) == set(on_main)
    existing = len(on_main) + 1
    assert runner.spawned - before == (1 if existing > 8 else existing)
    assert ancestors_of(repo, asked, side) == {*on_main, side}
    assert ancestors_of(repo, [], tip) == set()
    with pytest.raises(UnknownCommit):
        ancestors_of(repo, on_main, doomed)


# -- a property: added lines are the new file's lines ---------------------------------------------

LINE = st.sampled_from(
    [
        "",
        "}",
        "  x = 1",
        "x = 1",
        "return x",
        "--- a/src/f.txt",
        "+++ b/src/f.txt",
        "@@ -1 +1 @@",
        "diff --git a/x b/x",
        "\\ No newline at end of file",
        "-- minus",
        "++ plus",
        " leading space",
        "ünï cödé",
        "tab\tinside",
    ]
)


@st.composite
def edits(draw: st.DrawFn) -> tuple[list[str], list[str], bool]:
    old = draw(st.lists(LINE, max_size=25))
    new = list(old)
    for _ in range(draw(st.integers(0, 4))):
        start = draw(st.integers(0, len(new)))
        end = draw(st.integers(start, min(len(new), start + 4)))
        new[start:end] = draw(st.lists(LINE, max_size=4))
    return old, new, draw(st.booleans())


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(case=edits())
def test_added_lines_are_the_new_files_lines(
    tmp_path: Path, case: tuple[list[str], list[str], bool]
) -> None:
    old, new, final_newline = case
    root = tmp_path / "prop"
    fx = FixtureRepo(root) if (root / ".git").exists() else FixtureRepo.create(root)
    fx.write("f.txt", "\n".join(old) + ("\n" if final_newline and old else ""))
    fx.commit("old", "Old", ALICE)
    fx.write("f.txt", "\n".join(new) + ("\n" if new else ""))
    commit = CommitSha(fx.commit("new", "New", ALICE))
    found = changes(GitRepo.discover(root), [commit])[commit]
    assert found.complete
    after = fx.git("show", f"{commit.value}:f.txt").encode("utf-8").split(b"\n")
    before = fx.git("show", f"{commit.value}~1:f.txt").encode("utf-8").split(b"\n")
    after, before = (
        after[:-1] if after[-1] == b"" else after,
        before[:-1] if before[-1] == b"" else before,
    )
    f = found.files.get("f.txt")
    if f is None:  # nothing changed
        assert after == before
        return
    assert f.hashes == tuple(line_hash(after[n - 1]) for n in f.added)
    assert list(f.added) == sorted(set(f.added))
    assert sum(h[3] for h in f.hunks) == len(f.added)
    # the lines not added are the old lines not removed, in order
    removed = {n for o, c, _, _ in f.hunks for n in range(o, o + c)}
    kept_new = [line for n, line in enumerate(after, 1) if f.ordinal(n) is None]
    kept_old = [line for n, line in enumerate(before, 1) if n not in removed]
    assert kept_new == kept_old
    for n in f.added:
        assert f.hash_at(n) == line_hash(after[n - 1])
        hunk = next(h for h in f.hunks if h[2] <= n < h[2] + h[3])
        expected = ("f.txt", hunk[0], hunk[0] + hunk[1] - 1) if hunk[1] else None
        assert f.replaced(n) == expected


def test_filechange_lookups_without_git() -> None:
    f = FileChange("p", "q", (2, 5, 9), (1, None, 3), ((1, 2, 2, 1), (4, 0, 5, 1), (8, 1, 9, 1)))
    assert [f.ordinal(n) for n in (1, 2, 5, 9, 10)] == [None, 0, 1, 2, None]
    assert [f.hash_at(n) for n in (2, 5, 9, 3)] == [1, None, 3, None]
    assert f.replaced(2) == ("q", 1, 2)
    assert f.replaced(5) is None
    assert f.replaced(9) == ("q", 8, 8)
    c = Change(MISSING, None, 0, "x", {"p": f}, True)
    assert (c.hash_count(1), c.hash_count(3), c.hash_count(7)) == (1, 1, 0)


def test_repository_configuration_does_not_change_what_is_read(fx: FixtureRepo) -> None:
    lines = fx.lines("src/app.py")
    lines[2], lines[5] = "three changed", "six changed"  # two hunks, two lines apart
    fx.write("src/app.py", text(*lines))
    fx.write("b/a.txt", text("a path that looks prefixed"))
    edit = CommitSha(fx.commit("edit", "Edit", ALICE))
    plain = changes(GitRepo.discover(fx.root), [sha(fx, "root"), edit])
    for key, value in [
        ("diff.noprefix", "true"),
        ("diff.mnemonicPrefix", "true"),
        ("diff.interHunkContext", "5"),
        ("diff.context", "7"),
        ("diff.algorithm", "patience"),
        ("diff.renames", "false"),
        ("diff.external", "false"),
        ("diff.submodule", "log"),
        ("log.showRoot", "false"),
        ("log.diffMerges", "separate"),
        ("color.ui", "always"),
        ("format.pretty", "fuller"),
        ("core.quotePath", "true"),
    ]:
        fx.git("config", key, value)
    configured = changes(GitRepo.discover(fx.root), [sha(fx, "root"), edit])
    assert configured == plain
    assert configured[edit].files["src/app.py"].hunks == ((3, 1, 3, 1), (6, 1, 6, 1))
    assert configured[edit].files["b/a.txt"].added == (1,)


def shim_git(tmp_path: Path, on_log: str) -> GitRunner:
    """A runner whose git runs ``on_log`` (shell) in place of ``git log``."""
    path = tmp_path / "shim" / "git"
    path.parent.mkdir()
    path.write_text(f'#!/bin/sh\ncase " $* " in *" log "*) {on_log};; esac\nexec git "$@"\n')
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return GitRunner(git=str(path))


def test_a_failing_git_log_is_a_git_error(tmp_path: Path, fx: FixtureRepo) -> None:
    runner = shim_git(tmp_path, "cat >/dev/null; echo 'fatal: bad object' >&2; exit 128")
    with pytest.raises(GitFailed, match="missing or corrupt objects"):
        changes(GitRepo.discover(fx.root, runner), [sha(fx, "root")])


def test_unreadable_output_stops_git_without_waiting_for_it(
    tmp_path: Path, fx: FixtureRepo
) -> None:
    root = sha(fx, "root").value
    runner = shim_git(
        tmp_path,
        f"cat >/dev/null; printf '\\000poimen-change {root}  1\\ndiff --git a/x b/x\\n@@ bogus\\n'; "
        "exec yes +",
    )
    runner.timeout = 30
    started = time.monotonic()
    with pytest.raises(GitFailed, match="unreadable hunk header"):
        changes(GitRepo.discover(fx.root, runner), [sha(fx, "root")])
    assert time.monotonic() - started < 10


def test_many_commits_are_read_in_batches_with_the_same_answer(
    fx: FixtureRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A big history is read a batch of commits per git process (one process would outlast
    the runner's timeout): the answer and the progress count are those of one process."""
    from poimen_memory.gitio import history

    made = []
    for n in range(7):
        fx.set_line("src/app.py", n + 1, f"changed {n}")
        made.append(CommitSha(fx.commit(f"c{n}", f"change {n}", BOB)))
    repo = GitRepo.discover(fx.root)
    whole = changes(repo, [*made, MISSING])
    runner = repo.runner
    before = runner.spawned
    monkeypatch.setattr(history, "BATCH", 3)
    seen: list[int] = []
    batched = changes(repo, [*made, MISSING], on_progress=seen.append)
    assert batched == whole
    assert list(batched) == made
    assert seen == list(range(1, 8))
    assert runner.spawned - before >= 3  # 7 commits, 3 a process
