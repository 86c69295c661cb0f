"""Incremental blame against git's own, line for line, on generated histories.

Each example builds a real repository with git plumbing: edits on any earlier commit
(branches), merges of two commits (criss-cross included) resolved in several ways, renames,
a file deleted and added again, unrelated commits, CRLF and whitespace-only changes, whole
rewrites, optionally an ignore-revs file and the indent heuristic off. Then, for every
commit and every checkpoint the product would find, the blame computed from the checkpoint
must equal ``git blame --porcelain`` at that commit: per line the commit, the original path
and the original line.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from poimen_memory.domain import CommitSha
from poimen_memory.gitio import GitRepo
from poimen_memory.gitio.incremental import Unsupported, blame_from, checkpoint_candidates

WORDS = ["a", "b", "c", "}", "", "x = 1", "return y", "  a", "\tb", "// note", "end"]
PATHS = ["f.txt", "g.txt", "h.txt"]


@dataclass
class History:
    root: Path
    clock: int = 1_700_000_000
    commits: list[str] = field(default_factory=list)
    trees: list[dict[str, bytes]] = field(default_factory=list)

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
    h.git("update-ref", "HEAD", h.commits[-1])
    return h


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
            # One line traced alone (a hover's answer) is the same line.
            for n in {1, (len(want) + 1) // 2, len(want)} - {0}:
                one = blame_from(repo, checkpoint, last, path, line=n)
                assert not one.complete
                assert one.lines == (got.lines[n - 1],), (sha, candidate.value, path, n)
            compared += 1
    return compared, unsupported


TOTAL = {"compared": 0}


@settings(
    max_examples=int(os.environ.get("POIMEN_BLAME_EXAMPLES", "45")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    steps=st.lists(step, min_size=3, max_size=10),
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


def test_generated_histories_were_really_compared() -> None:
    # Runs after the property test (file order): the comparisons must have happened.
    assert TOTAL["compared"] >= 50, TOTAL


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
