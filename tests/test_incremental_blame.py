"""Incremental blame against git's own, line for line, on generated histories.

Each example builds a real repository with git plumbing: edits on any earlier commit
(branches), merges of two commits (criss-cross included) resolved in several ways, renames,
a file deleted and added again, unrelated commits, CRLF and whitespace-only changes, whole
rewrites, optionally an ignore-revs file and the indent heuristic off. Then, for every
commit and every checkpoint the product would find, the blame computed from the checkpoint
must equal ``git blame --porcelain`` at that commit: per line the commit, the original path
and the original line.

Two shapes are in every example, because random steps reach them too seldom: a file renamed
with edits and renamed back with edits (the walk from a checkpoint crosses both renames, and
each is blamed by diffing the old blob against the new), and a merge of two branches that
changed the same lines, often identically (such a line is unchanged against both parents:
git gives it to the first). The test counts how often git's own blame shows each shape.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple
from unittest import mock

import pytest
from hypothesis import HealthCheck, event, example, given, note, settings
from hypothesis import strategies as st

from poimen_memory.cli import main
from poimen_memory.domain import CommitSha
from poimen_memory.gitio import BlameCache, Blamer, GitRepo, incremental
from poimen_memory.gitio.incremental import (
    Unsupported,
    blame_from,
    checkpoint_candidates,
    line_since,
    supported,
)

from .gitrepo import ALICE, BOB, FixtureRepo

WORDS = ["a", "b", "c", "}", "", "x = 1", "return y", "  a", "\tb", "// note", "end"]
PATHS = ["f.txt", "g.txt", "h.txt"]


@dataclass
class History:
    root: Path
    clock: int = 1_700_000_000
    commits: list[str] = field(default_factory=list)
    trees: list[dict[str, bytes]] = field(default_factory=list)
    # The targeted shapes as built, by commit index: (parent, commit, old path, new path)
    # a rename with edits; (M, first, start, count): lines start..start+count-1 (0-based)
    # of the merge M (whose file is neither parent's) are the same edit made on both
    # parents (first, first + 1).
    renames: list[tuple[int, int, str, str]] = field(default_factory=list)
    both: list[tuple[int, int, int, int]] = field(default_factory=list)

    def git(self, *args: str, stdin: bytes | None = None) -> str:
        env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1"}
        done = subprocess.run(
            ["git", *args], cwd=self.root, input=stdin, capture_output=True, env=env, check=False
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.decode()

    def commit(
        self, files: dict[str, bytes], parents: list[int], executable: tuple[str, ...] = ()
    ) -> None:
        entries = []
        for path, data in sorted(files.items()):
            blob = self.git("hash-object", "-w", "--stdin", stdin=data).strip()
            mode = "100755" if path in executable else "100644"
            entries.append(f"{mode} blob {blob}\t{path}")
        tree = self.git("mktree", stdin=("\n".join(entries) + "\n").encode()).strip()
        self.clock += 60
        stamp = f"@{self.clock} +0000"
        who = {"GIT_AUTHOR_DATE": stamp, "GIT_COMMITTER_DATE": stamp}
        args = ["commit-tree", tree, "-m", f"c{len(self.commits)}"]
        for p in parents:
            args += ["-p", self.commits[p]]
        env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", **who}
        done = subprocess.run(
            ["git", *args], cwd=self.root, capture_output=True, env=env, check=True
        )
        self.commits.append(done.stdout.decode().strip())
        self.trees.append(dict(files))


def _lines(data: bytes) -> list[bytes]:
    return data.splitlines(keepends=True)


def _mutate(data: bytes, op: tuple[str, int, int, list[str]]) -> bytes:
    kind, at, size, words = op
    lines = _lines(data)
    eol = b"\r\n" if data.endswith(b"\r\n") else b"\n"
    new = [w.encode() + eol for w in words]
    at = at % (len(lines) + 1)
    if kind == "insert":
        lines[at:at] = new
    elif kind == "delete":
        del lines[at : at + size]
    elif kind == "replace":
        lines[at : at + size] = new
    elif kind == "space" and lines:
        i = at % len(lines)
        lines[i] = lines[i].rstrip(b"\r\n") + b" " + eol
    elif kind == "crlf":
        text = b"".join(lines)
        text = text.replace(b"\r\n", b"\n") if b"\r\n" in text else text.replace(b"\n", b"\r\n")
        return text
    elif kind == "rewrite":
        return b"".join(new) or b"z\n"
    elif kind == "no-eol" and lines:
        lines[-1] = lines[-1].rstrip(b"\r\n")
    return b"".join(lines) or b"z\n"


mutation = st.tuples(
    st.sampled_from(["insert", "insert", "delete", "replace", "replace", "space", "crlf",
                     "rewrite", "no-eol"]),
    st.integers(0, 40),
    st.integers(1, 4),
    st.lists(st.sampled_from(WORDS), min_size=1, max_size=5),
)  # fmt: skip
step = st.one_of(
    st.tuples(st.just("edit"), st.integers(0, 3), mutation),
    st.tuples(st.just("edit"), st.integers(0, 3), mutation),
    st.tuples(st.just("merge"), st.integers(0, 6), st.sampled_from(["ours", "theirs", "mix"])),
    st.tuples(st.just("rename"), st.integers(0, 2), st.sampled_from(PATHS)),
    st.tuples(st.just("delete"), st.integers(0, 2), st.just(None)),
    st.tuples(st.just("other"), st.integers(0, 3), st.just(None)),
)

# Edits small enough that git's rename detection (50% similar) still pairs the paths.
EDIT_WORDS = [*WORDS, "moved", "edited here"]
small_edit = st.tuples(
    st.sampled_from(["insert", "replace", "replace", "delete"]),
    st.integers(0, 40),
    st.integers(1, 2),
    st.lists(st.sampled_from(EDIT_WORDS), min_size=1, max_size=2),
)
rename_with_edits = st.tuples(
    st.just("rename-edit"),
    st.integers(0, 2),
    st.tuples(st.sampled_from(PATHS[1:]), small_edit, small_edit),
)


# Both parents replace the same lines (at, count) with the same words, followed by each
# side's own (ours, theirs: maybe none); the merge keeps the shared edit and ours, theirs,
# both or new words; each side may also change a line of its own elsewhere.
class Both(NamedTuple):
    at: int
    count: int
    same: list[str]
    ours: list[str]
    theirs: list[str]
    keep: str
    extra: tuple[bool, bool]


SIDE_WORDS = ["both 1", "both 2", "}", "", "a", "x = 1"]
both_sides_merge = st.tuples(
    st.just("both"),
    st.integers(0, 3),
    st.builds(
        Both,
        at=st.integers(0, 40),
        count=st.integers(0, 2),
        same=st.lists(st.sampled_from(SIDE_WORDS), min_size=1, max_size=3),
        ours=st.lists(st.sampled_from(SIDE_WORDS), max_size=2),
        theirs=st.lists(st.sampled_from(SIDE_WORDS), max_size=2),
        keep=st.sampled_from(["ours", "theirs", "both", "new"]),
        extra=st.sampled_from([(True, True), (True, True), (True, False), (False, True)]),
    ),
)


@st.composite
def histories(draw: st.DrawFn) -> list[tuple[str, int, object]]:
    """Random steps with one rename-with-edits and one both-sides merge among them."""
    steps: list[tuple[str, int, object]] = draw(st.lists(step, min_size=2, max_size=7))
    for special in (draw(rename_with_edits), draw(both_sides_merge)):
        steps.insert(draw(st.integers(0, len(steps))), special)
    return steps


def _file(files: dict[str, bytes]) -> str | None:
    return next((p for p in PATHS if p in files), None)


def build(root: Path, steps: list[tuple[str, int, object]]) -> History:
    h = History(root)
    h.git("init", "-q")
    h.commit({"f.txt": b"".join(w.encode() + b"\n" for w in WORDS), "other": b"0\n"}, [])
    for kind, back, arg in steps:
        base = max(0, len(h.commits) - 1 - back)
        files = dict(h.trees[base])
        path = _file(files)
        if kind == "edit":
            assert isinstance(arg, tuple)
            if path is None:  # the file was deleted: add it again
                files["f.txt"] = b"".join(w.encode() + b"\n" for w in arg[3]) or b"z\n"
            else:
                files[path] = _mutate(files[path], arg)
            h.commit(files, [base])
        elif kind == "merge":
            other = max(0, len(h.commits) - 2 - back)
            if other == len(h.commits) - 1:
                continue
            mine, theirs = h.trees[-1], h.trees[other]
            files = dict(mine)
            a, b = _file(mine), _file(theirs)
            if arg == "theirs" and b is not None:
                files = {k: v for k, v in mine.items() if k not in PATHS}
                files[b] = theirs[b]
            elif arg == "mix" and a is not None and b is not None:
                ours_lines, their_lines = _lines(mine[a]), _lines(theirs[b])
                half = len(their_lines) // 2
                files[a] = b"".join(ours_lines[: len(ours_lines) // 2] + their_lines[half:])
            h.commit(files, [len(h.commits) - 1, other])
        elif kind == "rename" and path is not None and arg != path:
            assert isinstance(arg, str)
            files[arg] = files.pop(path)
            h.commit(files, [base])
        elif kind == "delete" and path is not None:
            del files[path]
            h.commit(files, [base])
        elif kind == "other":
            files["other"] = files["other"] + b"1\n"
            h.commit(files, [base])
        elif kind == "rename-edit":
            assert isinstance(arg, tuple)
            _rename_there_and_back(h, base, path or "f.txt", arg)
        elif kind == "both":
            assert isinstance(arg, Both)
            _both_sides(h, base, path or "f.txt", arg)
    h.git("update-ref", "HEAD", h.commits[-1])
    return h


def _rename_there_and_back(h: History, base: int, path: str, arg: tuple[object, ...]) -> None:
    """X renames ``path`` with an edit, Y renames it back with another (a file too small for
    rename detection to pair its paths, or a deleted one, is first grown)."""
    to, there, back = arg
    assert isinstance(to, str)
    assert isinstance(there, tuple)
    assert isinstance(back, tuple)
    if to == path:
        to = PATHS[0]
    files = dict(h.trees[base])
    data = files.get(path, b"")
    if len(_lines(data)) < 6:
        eol = b"\r\n" if data.endswith(b"\r\n") else b"\n"
        grown = data.rstrip(b"\r\n") + eol if data.strip() else b""
        files[path] = grown + b"".join(w.encode() + eol for w in WORDS)
        h.commit(files, [base])
        base = len(h.commits) - 1
    files = dict(files)
    files[to] = _mutate(files.pop(path), there)
    h.commit(files, [base])
    h.renames.append((base, len(h.commits) - 1, path, to))
    files = dict(files)
    files[path] = _mutate(files.pop(to), back)
    h.commit(files, [len(h.commits) - 1])
    h.renames.append((len(h.commits) - 2, len(h.commits) - 1, to, path))


def _both_sides(h: History, base: int, path: str, arg: Both) -> None:
    """Two commits on ``base`` replace the same lines; their merge keeps some of it."""
    files = dict(h.trees[base])
    data = files.get(path, b"".join(w.encode() + b"\n" for w in WORDS))
    eol = b"\r\n" if data.endswith(b"\r\n") else b"\n"
    lines = [x.rstrip(b"\r\n") + eol for x in _lines(data)]
    at = arg.at % (len(lines) + 1)
    head, tail = lines[:at], lines[at + arg.count :]
    same, ours, theirs = ([w.encode() + eol for w in ws] for ws in (arg.same, arg.ours, arg.theirs))
    top = [b"first side" + eol] if arg.extra[0] else []
    bottom = [b"second side" + eol] if arg.extra[1] else []
    left = b"".join(top + head + same + ours + tail)
    right = b"".join(head + same + theirs + tail + bottom)
    h.commit({**files, path: left}, [base])
    h.commit({**files, path: right}, [base])
    keep = {"ours": ours, "theirs": theirs, "both": ours + theirs, "new": [b"resolved" + eol]}
    merged = b"".join(top + head + same + keep[arg.keep] + tail + bottom)
    first = len(h.commits) - 2
    h.commit({**files, path: merged}, [first, first + 1])
    if merged not in (left, right):
        h.both.append((len(h.commits) - 1, first, len(top) + at, len(same)))


def shapes_seen(h: History) -> set[str]:
    """Which targeted shapes git blame itself shows in ``h``: a rename with edits (the file
    changed, yet lines older than the commit that renamed it); a merge (its file neither
    parent's) with a line both parents changed alike, given to the first."""
    repo = GitRepo.discover(h.root)
    seen: set[str] = set()
    for parent, commit, old, new in h.renames:
        if h.trees[parent][old] == h.trees[commit][new]:
            continue
        lines = repo.blame(new, CommitSha(h.commits[commit])).lines
        if any(x.commit.value != h.commits[commit] for x in lines):
            seen.add("rename with edits")
    for merge, first, start, count in h.both:
        path = _file(h.trees[merge])
        assert path is not None
        lines = repo.blame(path, CommitSha(h.commits[merge])).lines[start : start + count]
        if any(x.commit.value == h.commits[first] for x in lines):
            seen.add("same lines changed on both parents")
    return seen


def check_all(h: History, *, ignoring: bool) -> tuple[int, int]:
    """Every commit, every path there, every checkpoint candidate: incremental == git."""
    repo = GitRepo.discover(h.root)
    compared = unsupported = 0
    for index, sha in enumerate(h.commits):
        path = _file(h.trees[index])
        if path is None:
            continue
        commit = CommitSha(sha)
        truth = repo.blame(path, commit)
        last = repo.last_commit(path, commit)
        for candidate in checkpoint_candidates(repo, path, last)[:3]:
            if (candidate, path) not in repo.existing([(candidate, path)]):
                continue
            checkpoint = repo.blame(path, candidate)
            try:
                got = blame_from(repo, checkpoint, last, path)
            except Unsupported as exc:
                reason = str(exc)
                got = None
            if got is None:
                # Only an ignored revision inside the walk may stop it.
                assert ignoring, reason
                assert "ignored revision" in reason, reason
                unsupported += 1
                continue
            want = [(x.commit, x.orig_path, x.orig_line) for x in truth.lines]
            have = [(x.commit, x.orig_path, x.orig_line) for x in got.lines]
            assert have == want, (sha, candidate.value, path)
            assert got.commits.keys() >= {x.commit for x in got.lines}
            # One line traced alone (a hover's answer) is the same line; traced from the
            # commit itself as HEAD (the last commit touching the file found by the walk),
            # the same line again, or no answer.
            for n in {1, (len(want) + 1) // 2, len(want)} - {0}:
                one = blame_from(repo, checkpoint, last, path, line=n)
                assert not one.complete
                assert one.lines == (got.lines[n - 1],), (sha, candidate.value, path, n)
                # From the commit itself as HEAD: git's blame of the line over the commits
                # since the checkpoint, continued from it: the same line, or no answer.
                try:
                    since = line_since(repo, checkpoint, commit, path, n)
                except Unsupported:  # ignore-revs in force
                    assert ignoring
                    continue
                if since is not None:
                    assert since == got.lines[n - 1], (sha, candidate.value, n)
                    TOTAL["traced since"] += 1
            compared += 1
        # From a blame of the file at a commit that is not behind this one (another branch,
        # a later commit): the right line, or no answer, never another.
        for other in h.commits[index + 1 :: 3]:
            there = CommitSha(other)
            if (there, path) not in repo.existing([(there, path)]):
                continue
            elsewhere = repo.blame(path, repo.last_commit(path, there))
            for n in {1, len(truth.lines)} - {0}:
                try:
                    since = line_since(repo, elsewhere, commit, path, n)
                except Unsupported:
                    continue
                if since is not None:
                    assert since == truth.lines[n - 1], (sha, other, path, n)
                    TOTAL["traced from elsewhere"] += 1
    return compared, unsupported


TOTAL = {
    "compared": 0,
    "hovers after HEAD moved": 0,
    "traced from the kept blame": 0,
    "traced since": 0,
    "traced from elsewhere": 0,
    "examples": 0,
    "rename with edits": 0,
    "same lines changed on both parents": 0,
}


@settings(
    max_examples=int(os.environ.get("POIMEN_BLAME_EXAMPLES", "45")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    steps=histories(),
    ignore=st.lists(st.integers(0, 20), max_size=2),
    indent_heuristic=st.booleans(),
)
def test_incremental_blame_equals_git_blame(
    tmp_path_factory: pytest.TempPathFactory,
    steps: list[tuple[str, int, object]],
    ignore: list[int],
    indent_heuristic: bool,
) -> None:
    note(f"steps={steps!r} ignore={ignore!r} indent_heuristic={indent_heuristic!r}")
    h = build(tmp_path_factory.mktemp("hist"), steps)
    if not indent_heuristic:
        h.git("config", "diff.indentHeuristic", "false")
    ignored = [h.commits[i] for i in ignore if i < len(h.commits)]
    if ignored:
        (h.root / ".git-blame-ignore-revs").write_text("".join(f"{s}\n" for s in ignored))
    compared, _ = check_all(h, ignoring=bool(ignored))
    TOTAL["compared"] += compared
    TOTAL["examples"] += 1
    for shape in shapes_seen(h):
        event(shape)
        TOTAL[shape] += 1


@settings(
    max_examples=int(os.environ.get("POIMEN_BLAME_EXAMPLES", "45")) // 3,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(steps=histories())
# A history where the walk from a kept blame ends at another commit than git's last one
# touching the file (a merge taking one side, past a rename with edits).
@example(
    steps=[
        ("both", 0, Both(0, 0, ["both 1"], [], [], "ours", (True, True))),
        ("rename-edit", 0, ("g.txt", ("insert", 0, 1, ["a"]), ("insert", 0, 1, ["a"]))),
        ("merge", 0, "ours"),
        ("edit", 0, ("insert", 0, 1, ["a"])),
    ]
)
def test_a_hover_after_head_moved_traces_from_the_blame_kept_last(
    tmp_path_factory: pytest.TempPathFactory, steps: list[tuple[str, int, object]]
) -> None:
    """A blamer that kept the file's blame at one commit, asked for a line at a later one
    (HEAD moved): the origin git blame gives, whether the walk from the kept blame answered
    or the blamer found the last commit first."""
    note(f"steps={steps!r}")
    root = tmp_path_factory.mktemp("moved")
    (root / "repo").mkdir()
    h = build(root / "repo", steps)
    repo = GitRepo.discover(h.root)
    at = [(CommitSha(sha), _file(tree)) for sha, tree in zip(h.commits, h.trees, strict=True)]
    for i, (kept, path) in enumerate(at):
        for head, there in at[i + 1 :]:
            if path is None or there != path:
                continue
            truth = repo.blame(path, head)
            n = (len(truth.lines) + 1) // 2
            if not n:
                continue
            blamer = Blamer(repo, BlameCache(root / f"cache-{i}-{head.short()}.db"))
            blamer.blame_file(path, kept)
            traced: list[bool] = []
            since = blamer._reuse.since_latest

            def spy(p: str, rev: CommitSha, line: int, since=since, traced=traced):  # type: ignore[no-untyped-def]
                found = since(p, rev, line)
                traced.append(found is not None)
                return found

            blamer._reuse.since_latest = spy  # type: ignore[method-assign]
            # (What follows a traced answer in the background, run before it returns here.)
            with mock.patch("poimen_memory.gitio.blamer.later", lambda work: work()):
                got = blamer.origin(path, n, head)
            assert got == truth.origin(n), (kept.value, head.value, path, n)
            # The cache's key for the file at HEAD: the last commit touching it, as git says.
            assert blamer._known_last(path, head) == repo.last_commit(path, head)
            TOTAL["hovers after HEAD moved"] += 1
            TOTAL["traced from the kept blame"] += sum(traced)


# A merge that takes one side's file, past a rename with edits: git's log of the commits
# since a kept blame shows the merge, while the last commit touching the file (rev-list's)
# is the side's commit.
MERGE_PAST_RENAME = [
    ("both", 0, Both(0, 0, ["both 1"], [], [], "ours", (True, True))),
    ("rename-edit", 0, ("g.txt", ("insert", 0, 1, ["a"]), ("insert", 0, 1, ["a"]))),
    ("merge", 0, "ours"),
    ("edit", 0, ("insert", 0, 1, ["a"])),
]


def test_a_hover_after_head_moved_past_a_merge_taking_one_side_is_git_s(tmp_path: Path) -> None:
    (tmp_path / "repo").mkdir()
    h = build(tmp_path / "repo", MERGE_PAST_RENAME)
    repo = GitRepo.discover(h.root)
    at = [(CommitSha(sha), _file(tree)) for sha, tree in zip(h.commits, h.trees, strict=True)]
    asked = 0
    for n, ((head, path), (other, there)) in enumerate(itertools.product(at, at)):
        if path is None or there != path or other == head:
            continue
        kept = repo.last_commit(path, other)
        blamer = Blamer(repo, BlameCache(tmp_path / f"cache-{n}.db"))
        blamer.keep(path, kept, repo.blame(path, kept))
        assert blamer.latest(path) == kept
        for line in range(1, len(repo.blame(path, head).lines) + 1):
            with mock.patch("poimen_memory.gitio.blamer.later", lambda work: work()):
                got = blamer.origin(path, line, head)
            assert got == repo.blame(path, head).origin(line)
            asked += 1
        # The cache's key for the file at HEAD: git's last commit touching it.
        assert blamer._known_last(path, head) == repo.last_commit(path, head)
    assert asked >= 4


def test_generated_histories_were_really_compared() -> None:
    # Runs after the property test (file order): the comparisons must have happened, and
    # most examples held each targeted shape as git blame itself shows it.
    assert TOTAL["compared"] >= 50, TOTAL
    assert TOTAL["traced since"] >= 50, TOTAL
    assert TOTAL["traced from the kept blame"] >= 10, TOTAL
    for shape in ("rename with edits", "same lines changed on both parents"):
        assert TOTAL[shape] * 3 >= TOTAL["examples"], TOTAL


def test_criss_cross_merges_and_renames(tmp_path: Path) -> None:
    """A fixed history with the hard cases at once: a criss-cross merge, a rename on one
    side, a line both sides changed, a file deleted then added again."""
    steps: list[tuple[str, int, object]] = [
        ("edit", 0, ("insert", 3, 1, ["side one"])),
        ("edit", 1, ("replace", 5, 1, ["main one"])),
        ("merge", 0, "mix"),
        ("merge", 1, "ours"),
        ("rename", 0, "g.txt"),
        ("edit", 0, ("insert", 0, 1, ["top"])),
        ("merge", 1, "theirs"),
        ("delete", 0, None),
        ("edit", 0, ("insert", 0, 1, ["again", "a", "b"])),
        ("edit", 0, ("space", 1, 1, ["x"])),
        ("edit", 0, ("crlf", 0, 1, ["x"])),
    ]
    h = build(tmp_path, steps)
    compared, unsupported = check_all(h, ignoring=False)
    assert compared >= 10
    assert unsupported == 0


def test_ignored_revision_inside_the_walk_falls_back(tmp_path: Path) -> None:
    h = build(tmp_path, [("edit", 0, ("replace", 2, 1, [f"changed {i}"])) for i in range(3)])
    (h.root / ".git-blame-ignore-revs").write_text(h.commits[2] + "\n")
    repo = GitRepo.discover(h.root)
    checkpoint = repo.blame("f.txt", CommitSha(h.commits[1]))
    with pytest.raises(Unsupported, match="ignored revision"):
        blame_from(repo, checkpoint, CommitSha(h.commits[3]), "f.txt")
    # Below the checkpoint, an ignored revision is part of its blame: exact again.
    later = repo.blame("f.txt", CommitSha(h.commits[2]))
    got = blame_from(repo, later, CommitSha(h.commits[3]), "f.txt")
    assert got.lines == repo.blame("f.txt", CommitSha(h.commits[3])).lines


@pytest.mark.parametrize(
    ("setup", "reason"),
    [
        (lambda h: h.git("config", "diff.algorithm", "histogram"), "diff.algorithm"),
        (lambda h: (h.root / ".git" / "shallow").write_text(h.commits[0] + "\n"), "shallow"),
        (lambda h: h.git("replace", h.commits[1], h.commits[0]), "replace refs"),
    ],
    ids=["diff-algorithm", "shallow", "replace-refs"],
)
def test_where_exactness_cannot_be_promised_it_is_not_tried(
    tmp_path: Path, setup: object, reason: str
) -> None:
    h = build(tmp_path, [("edit", 0, ("insert", 1, 1, ["n"])) for _ in range(2)])
    assert callable(setup)
    setup(h)
    repo = GitRepo.discover(h.root)
    checkpoint = repo.blame("f.txt", CommitSha(h.commits[0]))
    with pytest.raises(Unsupported, match=reason):
        blame_from(repo, checkpoint, CommitSha(h.commits[2]), "f.txt")
    moving = GitRepo.discover(tmp_path, detect_moves=True)
    with pytest.raises(Unsupported):
        blame_from(moving, checkpoint, CommitSha(h.commits[2]), "f.txt")


def test_what_git_holds_beside_history_is_looked_at_again_when_it_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``supported`` remembers its answer while the files it read are as they were: a clone
    made shallow, grafts and replace refs (loose, then packed) after a first answer are
    seen by the next."""
    h = build(tmp_path, [("edit", 0, ("insert", 1, 1, ["n"])) for _ in range(2)])
    repo = GitRepo.discover(h.root)
    looked = []
    look = incremental._history_unsupported
    monkeypatch.setattr(
        incremental, "_history_unsupported", lambda *a: looked.append(a) or look(*a)
    )
    assert supported(repo) is None
    assert supported(repo) is None
    assert len(looked) == 1  # remembered
    shallow = h.root / ".git" / "shallow"
    shallow.write_text(h.commits[0] + "\n")
    assert supported(repo) == "the clone is shallow"
    shallow.unlink()
    assert supported(repo) is None
    grafts = h.root / ".git" / "info" / "grafts"
    grafts.parent.mkdir(exist_ok=True)
    grafts.write_text(h.commits[1] + "\n")
    assert supported(repo) == "the repository has grafts"
    grafts.unlink()
    assert supported(repo) is None
    h.git("replace", h.commits[1], h.commits[0])
    assert supported(repo) == "the repository has replace refs"
    h.git("pack-refs", "--all")
    assert not any((h.root / ".git" / "refs" / "replace").iterdir())
    assert supported(repo) == "the repository has replace refs"
    h.git("replace", "-d", h.commits[1])
    assert supported(repo) is None


def test_a_parent_with_the_very_same_blob_takes_every_line(tmp_path: Path) -> None:
    """git hands all lines of a merge to the first parent whose blob is identical, even when
    an earlier parent has most of them unchanged: here the side that only made the file
    executable has the merge's blob, and the other side deleted and re-added line 3."""
    h = History(tmp_path)
    h.git("init", "-q")
    text = b"".join(f"line {i}\n".encode() for i in range(1, 13))
    h.commit({"f.txt": text}, [])  # 0
    lines = text.splitlines(keepends=True)
    h.commit({"f.txt": b"".join(lines[:2] + lines[3:])}, [0])  # 1: line 3 deleted
    h.commit({"f.txt": b"".join([*lines[:9], b"ten!\n", *lines[10:]])}, [1])  # 2: re-added
    h.commit({"f.txt": text}, [0], executable=("f.txt",))  # 3: chmod +x only
    h.commit({"f.txt": text}, [2, 3])  # 4: the merge keeps the text, not the mode
    h.git("update-ref", "HEAD", h.commits[4])
    repo = GitRepo.discover(tmp_path)
    truth = repo.blame("f.txt", CommitSha(h.commits[4]))
    assert truth.lines[2].commit.value == h.commits[0]  # through the executable side
    for start in (0, 1, 2):
        checkpoint = repo.blame("f.txt", CommitSha(h.commits[start]))
        got = blame_from(repo, checkpoint, CommitSha(h.commits[4]), "f.txt")
        assert got.lines == truth.lines, start


def _mem_blame(
    capsys: pytest.CaptureFixture[str], root: Path, path: str, at: str
) -> dict[str, object]:
    """``mem blame --json --verify`` at ``at``: what a user sees, checked by git itself."""
    code = main(["blame", path, "--repo", str(root), "--at", at, "--json", "--verify"])
    body = json.loads(capsys.readouterr().out)
    assert code == 0, body
    assert isinstance(body, dict)
    return body


def _origins(body: dict[str, object]) -> list[tuple[str, str, int]]:
    lines = body["lines"]
    assert isinstance(lines, list)
    return [(x["commit"], x["orig_path"], x["orig_line"]) for x in lines]


def _git_blame(h: History, path: str, at: str) -> list[tuple[str, str, int]]:
    repo = GitRepo.discover(h.root)
    return [
        (x.commit.value, x.orig_path, x.orig_line) for x in repo.blame(path, CommitSha(at)).lines
    ]


@pytest.fixture
def no_shared_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POIMEN_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("POIMEN_DSN", raising=False)


@pytest.mark.usefixtures("no_shared_cache")
def test_a_line_both_parents_changed_goes_to_the_first_parent_as_git_gives_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two branches fix line 5 the same way, and change lines 9 and 11 differently; each
    also changes a line of its own, so the merge's file is neither parent's. git blame gives
    the line both parents have to the first parent (the other merge order: the other
    branch), the conflict resolved as the second side's to that side, a new resolution to
    the merge; the blame from a cached checkpoint, as ``mem blame`` shows it, is the same."""
    h = History(tmp_path / "repo")
    h.root.mkdir()
    h.git("init", "-q")
    text = [f"line {i}\n".encode() for i in range(1, 13)]

    def file(*, top: bool, bottom: bool, five: str, nine: str, eleven: str) -> bytes:
        lines = list(text)
        lines[4], lines[8], lines[10] = (f"{x}\n".encode() for x in (five, nine, eleven))
        return b"".join([b"first side\n"] * top + lines + [b"second side\n"] * bottom)

    h.commit({"f.txt": b"".join(text)}, [])  # 0
    left = file(top=True, bottom=False, five="fixed", nine="left 9", eleven="left 11")
    right = file(top=False, bottom=True, five="fixed", nine="right 9", eleven="right 11")
    merged = file(top=True, bottom=True, five="fixed", nine="right 9", eleven="merged 11")
    h.commit({"f.txt": left}, [0])  # 1
    h.commit({"f.txt": right}, [0])  # 2
    h.commit({"f.txt": merged}, [1, 2])  # 3: left first
    h.commit({"f.txt": merged}, [2, 1])  # 4: right first
    h.git("update-ref", "HEAD", h.commits[3])
    c = h.commits
    for merge, first, second in ((3, 1, 2), (4, 2, 1)):
        truth = _git_blame(h, "f.txt", c[merge])
        # git's answer, stated here: line 6, "fixed" on both sides, is the first parent's
        # (its line 6 on the left, below the left's own top line; 5 on the right).
        assert truth[5] == (c[first], "f.txt", 6 if first == 1 else 5)
        assert truth[9][0] == c[2]  # "right 9": the side that wrote it
        assert truth[11] == (c[merge], "f.txt", 12)  # "merged 11": the merge's own
        assert truth[0][0] == c[1]
        assert truth[-1][0] == c[2]
        repo = GitRepo.discover(h.root)
        for checkpoint in (0, 1, 2):
            cached = repo.blame("f.txt", CommitSha(c[checkpoint]))
            got = blame_from(repo, cached, CommitSha(c[merge]), "f.txt")
            have = [(x.commit.value, x.orig_path, x.orig_line) for x in got.lines]
            assert have == truth, (merge, checkpoint)
        # What a user sees: a side's blame cached, then the merge's from a cached one.
        _mem_blame(capsys, h.root, "f.txt", c[second])
        body = _mem_blame(capsys, h.root, "f.txt", c[merge])
        assert body["source"] == "incremental"
        assert body["verified"] is True
        assert _origins(body) == truth


@pytest.mark.usefixtures("no_shared_cache")
def test_lines_kept_across_a_rename_with_edits_keep_their_commit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """f.txt is renamed to g.txt with edits, then back with edits. git blame, diffing each
    renamed-from blob against the new one: the lines kept across both renames keep their
    commits and original lines (numbers shifted by an insertion); an edited line is the
    commit that renamed it (its path that commit's). The blame from a checkpoint before the
    renames, as ``mem blame`` shows it, is the same."""
    h = History(tmp_path / "repo")
    h.root.mkdir()
    h.git("init", "-q")
    lines = [f"line {i}\n".encode() for i in range(1, 13)]
    h.commit({"f.txt": b"".join(lines)}, [])  # 0
    lines[1] = b"line 2, edited\n"
    h.commit({"f.txt": b"".join(lines)}, [0])  # 1
    there = list(lines)
    there[6] = b"line 7, edited in the move\n"
    there[10:10] = [b"new in the move\n"]
    h.commit({"g.txt": b"".join(there)}, [1])  # 2: f.txt -> g.txt
    back = list(there)
    back[3] = b"line 4, edited moving back\n"
    del back[0]
    h.commit({"f.txt": b"".join(back)}, [2])  # 3: g.txt -> f.txt
    h.git("update-ref", "HEAD", h.commits[3])
    c = h.commits
    truth = _git_blame(h, "f.txt", c[3])
    want = [
        (c[1], "f.txt", 2),
        (c[0], "f.txt", 3),
        (c[3], "f.txt", 3),  # line 4, edited moving back
        (c[0], "f.txt", 5),
        (c[0], "f.txt", 6),
        (c[2], "g.txt", 7),  # line 7, edited in the move
        (c[0], "f.txt", 8),
        (c[0], "f.txt", 9),
        (c[0], "f.txt", 10),
        (c[2], "g.txt", 11),  # new in the move
        (c[0], "f.txt", 11),
        (c[0], "f.txt", 12),
    ]
    assert truth == want
    repo = GitRepo.discover(h.root)
    for checkpoint in (0, 1):
        cached = repo.blame("f.txt", CommitSha(c[checkpoint]))
        got = blame_from(repo, cached, CommitSha(c[3]), "f.txt")
        assert [(x.commit.value, x.orig_path, x.orig_line) for x in got.lines] == want
    _mem_blame(capsys, h.root, "f.txt", c[1])
    body = _mem_blame(capsys, h.root, "f.txt", c[3])
    assert body["source"] == "incremental"
    assert body["verified"] is True
    assert _origins(body) == want


def test_a_kept_blame_on_a_side_branch_git_blame_passes_by_is_not_walked_through(
    tmp_path: Path,
) -> None:
    """A feature branch changes a line and reverts it; main merges it (--no-ff, the file the
    same on both sides), then edits the file. git blame hands the merge's file to its first
    parent whole, so the line keeps its first origin; a walk from the side branch's commit
    would pass the line through the revert. The hover must give git's answer."""
    repo_dir = tmp_path / "repo"
    repo = FixtureRepo.create(repo_dir)
    lines = [f"line {i}\n" for i in range(1, 21)]
    repo.write("f.txt", "".join(lines))
    first = repo.commit("first", "First", ALICE, "f.txt")
    repo.git("checkout", "-q", "-b", "feature")
    repo.write("f.txt", "".join([*lines[:9], "changed 10\n", *lines[10:]]))
    kept = repo.commit("kept", "Change line 10", BOB, "f.txt")
    repo.write("f.txt", "".join(lines))
    repo.commit("revert", "Put line 10 back", BOB, "f.txt")
    repo.git("checkout", "-q", "-")
    repo.git("merge", "-q", "--no-ff", "-m", "Merge feature", "feature")
    repo.write("f.txt", "".join([*lines, "line 21\n"]))
    head = CommitSha(repo.commit("tip", "Add line 21", ALICE, "f.txt"))
    git = GitRepo.discover(repo_dir)
    truth = git.blame("f.txt", head).origin(10)
    assert truth is not None
    assert truth.commit.value == first
    blamer = Blamer(git, BlameCache(tmp_path / "cache.db"))
    blamer.keep("f.txt", CommitSha(kept), git.blame("f.txt", CommitSha(kept)))
    assert blamer.origin("f.txt", 10, head) == truth
    assert blamer._known_last("f.txt", head) == git.last_commit("f.txt", head)


def test_a_hover_at_the_kept_blame_s_own_commit_never_blames_the_work_tree(
    tmp_path: Path,
) -> None:
    """HEAD back at the commit whose blame was kept: git, asked for ``^C C``, would blame the
    work tree's file (edited, or gone); the kept blame is the answer."""
    repo_dir = tmp_path / "repo"
    repo = FixtureRepo.create(repo_dir)
    repo.write("f.txt", "".join(f"line {i}\n" for i in range(1, 6)))
    repo.commit("first", "First", ALICE, "f.txt")
    repo.write("f.txt", "".join(f"line {i}\n" for i in [1, 2, 30, 4, 5]))
    kept = CommitSha(repo.commit("second", "Second", BOB, "f.txt"))
    git = GitRepo.discover(repo_dir)
    checkpoint = git.blame("f.txt", kept)
    repo.write("f.txt", "edited, not committed\n" * 5)
    for n in range(1, 6):
        assert line_since(git, checkpoint, kept, "f.txt", n) == checkpoint.origin(n)
    (repo_dir / "f.txt").unlink()
    assert line_since(git, checkpoint, kept, "f.txt", 3) == checkpoint.origin(3)
