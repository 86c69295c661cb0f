"""Figure m: are memories of rewritten commits shown on the lines their change produced, and
nowhere else?

A repository is generated deterministically (seeded ``random``) with ``git fast-import``:

* ``main`` starts with ``files`` base files of ``file_lines`` lines of code-like text, with
  repeated short lines (``}``, ``pass``, ``return None``) and a few non-trivial lines copied
  within and across files;
* feature branches of 1-4 commits each (``branch_commits`` in all) edit a few lines of one or
  two files: replacements, insertions and deletions, sometimes over lines an earlier branch
  landed (so landed lines are overwritten later) or over lines an earlier commit of the same
  branch wrote; now and then a line is a common one (imports, ``continue``), a short one or a
  copy of a line of another file;
* every branch commit gets one memory (an L0 node) anchored to the lines it added, in its own
  version of the file, ingested through ``poimen_memory.ingest.pipeline.ingest`` while the
  branch commits exist;
* each branch then lands on the main that moved meanwhile, in one of these ways: squash (one
  commit of the branch's combined change), rebase (every commit replayed: same change, new
  parent, original author date, newer committer date), cherry-pick (one commit that applies
  alone), a true merge (the control: its commits stay in the history) or never (abandoned);
  maintainers also commit directly to main (no memories), sometimes common or copied lines;
* then the branch refs are deleted and ``git gc --prune=now`` removes the commits that no
  longer belong to the history.

Every line the generator writes carries the branch commit that produced it (a line rewritten
later takes its new producer), so the expected memory of every line at HEAD is known:
the memory of its producer, when a branch commit produced it; none otherwise. The real lookup
service (code lens for every file, hover for a sample of lines) is then asked what it shows.

recall = expected (line, memory) pairs shown / expected pairs, by code lens over every line at
HEAD, for the lines that squash, rebase and cherry-pick landings produced (merged branches are
the control, reported apart); false hits = (line, memory) pairs shown that are not expected,
on any line (lens and hover). Lines whose blame at HEAD disagrees with the generator's
bookkeeping (a diff placing an ambiguous line elsewhere) are left out of both and counted.
"""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg import conninfo, sql

from bench.corpus import AUTHORS, QUICK, WORDS

if TYPE_CHECKING:
    from bench.__main__ import Bench

REMOTE = "https://bench.example/poimen/attribution.git"
PROJECT = "attribution"
EPOCH = 1_780_000_000

KINDS = ("squash", "rebase", "pick", "merge", "abandoned")
# Roughly equal squash, rebase and cherry-pick; a minority merged (control) or abandoned.
KIND_WEIGHTS = (27, 27, 26, 10, 10)

SHORT_LINES = ("}", "    }", "    pass", "        return None", ")", "    return None")
COMMON_LINES = (
    "import os",
    "import logging",
    "from typing import Any",
    "logger = logging.getLogger(__name__)",
    "        continue",
    "        break",
    "    if not data:",
    "    except KeyError:",
    "        raise ValueError(name)",
    "    return result",
    "    self.lock.release()",
    "    yield from items",
)
TEMPLATES = (
    "    let {w}_{n} = {v}({a}, {u});",
    "        self.{w}_{n} = {v}_{u}({a})",
    "    if {w}_{n} > {a}: return {v}({u})",
    "    {w}_{n}.{v}(&{u}, {a})?;",
    "        total_{n} += {w}.{v}({a}) * {u}_factor",
    '    log.info("{w} {v} {n}", {u}={a})',
)


@dataclass(frozen=True)
class AttrSize:
    """How big a history to generate."""

    files: int
    file_lines: int
    branch_commits: int
    hovers: int


ATTR_FULL = AttrSize(files=40, file_lines=200, branch_commits=3000, hovers=300)
ATTR_QUICK = AttrSize(files=10, file_lines=120, branch_commits=150, hovers=120)


class Line:
    """One line written somewhere: its text, the branch commit that produced it (-1: base,
    -2: a direct commit) and the mark of the commit blame at HEAD should name for it."""

    __slots__ = ("landed", "src", "text")

    def __init__(self, text: str, src: int) -> None:
        self.text = text
        self.src = src
        self.landed: int | None = None


@dataclass
class Hunk:
    """An edit by identity: ``deleted`` lines (contiguous, between ``before`` and ``after``)
    replaced by ``added``."""

    path: str
    before: Line | None
    after: Line | None
    deleted: list[Line]
    added: list[Line]


@dataclass
class BranchCommit:
    gid: int
    branch: int
    index: int
    mark: int
    time: int
    author: tuple[str, str]
    message: str
    hunks: list[Hunk] = field(default_factory=list)
    anchors: list[tuple[str, int, int]] = field(default_factory=list)  # (path, first, last)
    sha: str = ""


@dataclass
class Branch:
    n: int
    kind: str
    fork_mark: int
    commits: list[BranchCommit] = field(default_factory=list)
    files: dict[str, list[Line]] = field(default_factory=dict)  # the branch's versions
    claims: set[int] = field(default_factory=set)  # ids of main lines it relies on
    picked: int | None = None  # the commit a cherry-pick landed
    landed_as: list[int] = field(default_factory=list)  # marks of main commits


@dataclass
class History:
    """What the generator did, for the ground truth."""

    root: Path
    files: dict[str, list[Line]]  # main at HEAD
    branches: list[Branch]
    commits: list[BranchCommit]  # every branch commit, by gid
    shas: dict[int, str]  # mark -> sha
    root_mark: int
    main_marks: list[int]
    changes_of: dict[int, list[str]]  # main mark -> texts its change added
    direct_marks: set[int]


def _blob(lines: list[Line]) -> bytes:
    return ("\n".join(line.text for line in lines) + "\n").encode()


def _index(lines: list[Line], obj: Line) -> int:
    for i, line in enumerate(lines):
        if line is obj:
            return i
    raise KeyError("line not in file")


def _apply(lines: list[Line], hunk: Hunk) -> None:
    """Apply ``hunk`` in place; AssertionError when it does not apply cleanly."""
    if hunk.deleted:
        at = _index(lines, hunk.deleted[0])
    else:
        at = 0 if hunk.before is None else _index(lines, hunk.before) + 1
    d = len(hunk.deleted)
    assert all(a is b for a, b in zip(lines[at : at + d], hunk.deleted, strict=True))
    assert (hunk.before is None and at == 0) or (at > 0 and lines[at - 1] is hunk.before)
    end = at + d
    assert (hunk.after is None and end == len(lines)) or (
        end < len(lines) and lines[end] is hunk.after
    )
    lines[at:end] = hunk.added


def _applies(files: dict[str, list[Line]], hunks: Iterable[Hunk]) -> bool:
    trial = {p: list(v) for p, v in files.items()}
    try:
        for h in hunks:
            _apply(trial[h.path], h)
    except (AssertionError, KeyError):
        return False
    return True


class Generator:
    """Builds the repository through one ``git fast-import`` stream."""

    def __init__(self, root: Path, size: AttrSize, seed: int = 17) -> None:
        self.root = root
        self.size = size
        self.rng = random.Random(seed)
        self.counter = 0
        self.clock = EPOCH
        self.mark = 0
        self.out: Any = None
        self.main: dict[str, list[Line]] = {}
        self.main_mark = 0
        self.main_marks: list[int] = []
        self.claims: dict[int, int] = {}  # id(line) -> branch relying on it
        self.branches: list[Branch] = []
        self.commits: list[BranchCommit] = []
        self.changes_of: dict[int, list[str]] = {}
        self.direct_marks: set[int] = set()

    # -- text -------------------------------------------------------------------------------

    def fresh(self) -> str:
        self.counter += 1
        rng = self.rng
        return rng.choice(TEMPLATES).format(
            w=rng.choice(WORDS),
            v=rng.choice(WORDS),
            u=rng.choice(WORDS),
            n=self.counter,
            a=rng.randrange(1000),
        )

    def added_text(self, path: str, shorts: float, commons: float, copies: float) -> str:
        r = self.rng.random()
        if r < shorts:
            return self.rng.choice(SHORT_LINES)
        if r < shorts + commons:
            return self.rng.choice(COMMON_LINES)
        if r < shorts + commons + copies:
            others = [p for p in self.main if p != path]
            lines = self.main[self.rng.choice(others)]
            pick = lines[self.rng.randrange(len(lines))].text
            if len(pick.strip()) > 12:
                return pick
        return self.fresh()

    # -- fast-import ------------------------------------------------------------------------

    def emit(
        self,
        ref: str,
        parent: int | None,
        author: tuple[str, str],
        author_time: int,
        commit_time: int,
        message: str,
        files: dict[str, list[Line]],
        merge: int | None = None,
    ) -> int:
        self.mark += 1
        name, email = author
        msg = message.encode()
        out = self.out
        out.write(f"commit {ref}\nmark :{self.mark}\n".encode())
        out.write(f"author {name} <{email}> {author_time} +0000\n".encode())
        out.write(f"committer {name} <{email}> {commit_time} +0000\n".encode())
        out.write(f"data {len(msg)}\n".encode() + msg + b"\n")
        if parent is not None:
            out.write(f"from :{parent}\n".encode())
        if merge is not None:
            out.write(f"merge :{merge}\n".encode())
        for path, lines in files.items():
            data = _blob(lines)
            out.write(f"M 100644 inline {path}\ndata {len(data)}\n".encode() + data + b"\n")
        return self.mark

    def commit_main(
        self,
        author: tuple[str, str],
        author_time: int,
        message: str,
        paths: Iterable[str],
        merge: int | None = None,
    ) -> int:
        mark = self.emit(
            "refs/heads/main",
            self.main_mark or None,
            author,
            author_time,
            self.clock,
            message,
            {p: self.main[p] for p in dict.fromkeys(paths)},
            merge,
        )
        self.main_mark = mark
        self.main_marks.append(mark)
        return mark

    def tick(self, lo: int = 60, hi: int = 900) -> int:
        self.clock += self.rng.randrange(lo, hi)
        return self.clock

    # -- edits ------------------------------------------------------------------------------

    def hunk(
        self,
        lines: list[Line],
        path: str,
        src: int,
        owner: int | None,
        busy: set[int],
        targets: list[int],
        texts: Callable[[], str],
    ) -> Hunk | None:
        """A hunk on ``lines`` (not applied): at one of ``targets`` (indexes) or anywhere; its
        lines, neighbours and deleted lines clear of other branches' claims and of ``busy``;
        never a diff git could place differently (no added text equal to a deleted one or to
        a neighbour on the side it could slide to)."""
        rng = self.rng
        for _ in range(30):
            kind = rng.random()
            d = rng.randrange(1, 4) if kind < 0.6 else (0 if kind < 0.95 else rng.randrange(1, 3))
            b = rng.randrange(1, 6) if kind < 0.6 else (rng.randrange(1, 7) if kind < 0.95 else 0)
            if targets and rng.random() < 0.7:
                at = rng.choice(targets)
                if d == 0:
                    d = 1  # overwrite the target
            else:
                at = rng.randrange(0, len(lines) + 1 - d)
            if at + d > len(lines) or (d == 0 and b == 0):
                continue
            before = lines[at - 1] if at > 0 else None
            after = lines[at + d] if at + d < len(lines) else None
            deleted = lines[at : at + d]
            refs = [x for x in (before, *deleted, after) if x is not None]
            if any(id(x) in busy for x in refs):
                continue
            if any(self.claims.get(id(x), owner) != owner for x in refs):
                continue
            gone = {x.text for x in deleted}
            added = [Line(texts(), src) for _ in range(b)]
            if any(x.text in gone for x in added):
                continue
            if len({x.text for x in added}) != len(added):
                continue
            if added:
                if before is not None and added[-1].text == before.text:
                    continue
                if after is not None and added[0].text == after.text:
                    continue
            if deleted:
                if before is not None and deleted[-1].text == before.text:
                    continue
                if after is not None and deleted[0].text == after.text:
                    continue
            if b == 0 and before is not None and after is not None and before.text == after.text:
                continue
            busy.update(id(x) for x in (*refs, *added))
            return Hunk(path, before, after, list(deleted), added)
        return None

    def new_branch(self, n: int, kind: str, commits: int) -> Branch:
        branch = Branch(n, kind, self.main_mark)
        branch.files = {p: list(v) for p, v in self.main.items()}
        author = self.rng.choice(AUTHORS)
        parent = self.main_mark
        own: dict[str, list[Line]] = defaultdict(list)
        for k in range(commits):
            gid = len(self.commits)
            t = self.tick(30, 600)
            rec = BranchCommit(gid, n, k, 0, t, author, "")
            busy: set[int] = set()
            paths = sorted(branch.files)
            touched = [p for p in own if own[p]]
            chosen: list[str] = []
            for _ in range(1 if self.rng.random() < 0.7 else 2):
                if touched and self.rng.random() < 0.5:
                    p = self.rng.choice(touched)
                else:
                    p = self.rng.choice(paths)
                if p not in chosen:
                    chosen.append(p)
            for path in chosen:
                lines = branch.files[path]
                for _ in range(1 if self.rng.random() < 0.65 else 2):
                    mine = {id(x) for x in own[path]}
                    r = self.rng.random()
                    if mine and r < 0.35:  # over a line this branch wrote before
                        targets = [i for i, x in enumerate(lines) if id(x) in mine]
                    elif r < 0.6:  # over a line an earlier branch landed
                        targets = [
                            i for i, x in enumerate(lines) if x.src >= 0 and x.landed is not None
                        ]
                    else:
                        targets = []
                    h = self.hunk(
                        lines,
                        path,
                        gid,
                        n,
                        busy,
                        targets,
                        lambda path=path: self.added_text(path, 0.04, 0.03, 0.015),
                    )
                    if h is None:
                        continue
                    _apply(lines, h)
                    rec.hunks.append(h)
                    self.claim(branch, h)
                    own[path].extend(h.added)
            if not any(h.added for h in rec.hunks):
                # Every commit adds something: a line after a random unclaimed place.
                path = chosen[0]
                lines = branch.files[path]
                h = self.hunk(lines, path, gid, n, busy, [], lambda: self.fresh())
                if h is not None and h.added:
                    _apply(lines, h)
                    rec.hunks.append(h)
                    self.claim(branch, h)
                    own[path].extend(h.added)
            if not rec.hunks:
                continue
            paths_done = list(dict.fromkeys(h.path for h in rec.hunks))
            for path in paths_done:
                lines = branch.files[path]
                run: list[int] = [i + 1 for i, x in enumerate(lines) if x.src == gid]
                for first, last in _runs(run):
                    rec.anchors.append((path, first, last))
            words = " ".join(self.rng.choice(WORDS) for _ in range(3))
            rec.message = f"b{n}/{k}: {words} in {paths_done[0].rsplit('/', 1)[-1]}"
            rec.mark = self.emit(
                f"refs/heads/b/{n}",
                parent,
                author,
                t,
                t,
                rec.message,
                {p: branch.files[p] for p in paths_done},
            )
            parent = rec.mark
            self.commits.append(rec)
            branch.commits.append(rec)
        self.branches.append(branch)
        return branch

    def claim(self, branch: Branch, hunk: Hunk) -> None:
        """Keep other branches (and direct commits) off the main lines ``hunk`` relies on."""
        for x in (hunk.before, *hunk.deleted, hunk.after):
            if x is not None and x.landed is not None:  # on main (base lines too)
                branch.claims.add(id(x))
                self.claims[id(x)] = branch.n

    def release(self, branch: Branch) -> None:
        for key in branch.claims:
            if self.claims.get(key) == branch.n:
                del self.claims[key]
        branch.claims.clear()

    def land(self, branch: Branch) -> None:
        """Land ``branch`` on main as its kind says."""
        self.release(branch)
        kind = branch.kind
        if kind == "abandoned" or not branch.commits:
            return
        maintainer = AUTHORS[0]
        if kind == "rebase":
            for c in branch.commits:
                for h in c.hunks:
                    _apply(self.main[h.path], h)
                self.tick(5, 30)
                mark = self.commit_main(c.author, c.time, c.message, [h.path for h in c.hunks])
                self._landed(c.hunks, mark)
                branch.landed_as.append(mark)
            return
        if kind == "pick":
            fits = [c for c in branch.commits if _applies(self.main, c.hunks)]
            if not fits:
                branch.kind = "abandoned"
                return
            c = self.rng.choice(fits)
            branch.picked = c.gid
            for h in c.hunks:
                _apply(self.main[h.path], h)
            self.tick()
            mark = self.commit_main(
                c.author,
                c.time,
                f"{c.message}\n\n(cherry picked from commit {c.mark})",
                [h.path for h in c.hunks],
            )
            self._landed(c.hunks, mark)
            branch.landed_as.append(mark)
            return
        hunks = [h for c in branch.commits for h in c.hunks]
        for h in hunks:
            _apply(self.main[h.path], h)
        paths = [h.path for h in hunks]
        self.tick()
        if kind == "squash":
            c = branch.commits[0]
            mark = self.commit_main(
                c.author, self.clock, f"{c.message} (squashed, #{branch.n})", paths
            )
            self._landed(hunks, mark)
        else:  # a true merge: the branch's commits stay in the history
            mark = self.commit_main(
                maintainer,
                self.clock,
                f"Merge branch 'b/{branch.n}'",
                paths,
                merge=branch.commits[-1].mark,
            )
            by_gid = {c.gid: c.mark for c in branch.commits}
            for h in hunks:
                for x in h.added:
                    x.landed = by_gid[x.src]
            self.changes_of[mark] = []
        branch.landed_as.append(mark)

    def _landed(self, hunks: list[Hunk], mark: int) -> None:
        present = {id(x) for h in hunks for x in self.main[h.path]}
        texts = []
        for h in hunks:
            for x in h.added:
                if id(x) in present:
                    x.landed = mark
                    texts.append(x.text)
        self.changes_of[mark] = texts

    def direct(self) -> None:
        """A maintainer's commit on main (no memory): a few lines, sometimes a common one or
        one copied from another file."""
        path = self.rng.choice(sorted(self.main))
        lines = self.main[path]
        landed = [i for i, x in enumerate(lines) if x.src >= 0 and x.landed is not None]
        targets = landed if self.rng.random() < 0.3 else []
        h = self.hunk(
            lines,
            path,
            -2,
            None,
            set(),
            targets,
            lambda: self.added_text(path, 0.05, 0.15, 0.15),
        )
        if h is None:
            return
        _apply(lines, h)
        self.tick()
        mark = self.commit_main(AUTHORS[1], self.clock, f"Tidy {path.rsplit('/', 1)[-1]}", [path])
        for x in h.added:
            x.landed = mark
        self.changes_of[mark] = [x.text for x in h.added]
        self.direct_marks.add(mark)

    # -- the whole history ------------------------------------------------------------------

    def build(self) -> History:
        root, size, rng = self.root, self.size, self.rng
        root.mkdir(parents=True, exist_ok=True)
        subprocess.run(["git", "init", "-q", "-b", "main", str(root)], check=True)
        subprocess.run(["git", "-C", str(root), "remote", "add", "origin", REMOTE], check=True)
        marks_file = root / ".git" / "bench-marks"
        proc = subprocess.Popen(
            ["git", "-C", str(root), "fast-import", "--quiet", "--done",
             f"--export-marks={marks_file}"],
            stdin=subprocess.PIPE,
        )  # fmt: skip
        assert proc.stdin is not None
        self.out = proc.stdin
        for k in range(size.files):
            lines: list[Line] = []
            while len(lines) < size.file_lines:
                r = rng.random()
                if r < 0.1:
                    text = rng.choice(SHORT_LINES)
                elif r < 0.115 and lines:
                    text = rng.choice(lines).text  # a line repeated in the file
                else:
                    text = self.fresh()
                lines.append(Line(text, -1))
            self.main[f"src/pkg_{k // 10}/mod_{k:02d}.py"] = lines
        for k, path in enumerate(sorted(self.main)):  # a few lines copied across files
            other = self.main[sorted(self.main)[(k + 1) % len(self.main)]]
            for _ in range(2):
                self.main[path][rng.randrange(size.file_lines)] = Line(rng.choice(other).text, -1)
        root_mark = self.commit_main(AUTHORS[0], self.clock, "Initial import", sorted(self.main))
        for lines in self.main.values():
            for x in lines:
                x.landed = root_mark
        open_: list[Branch] = []
        n = 0
        while len(self.commits) < size.branch_commits:
            kind = rng.choices(KINDS, KIND_WEIGHTS)[0]
            commits = min(rng.randrange(1, 5), size.branch_commits - len(self.commits))
            open_.append(self.new_branch(n, kind, commits))
            n += 1
            while len(open_) > rng.randrange(4, 12):
                self.tick()
                self.land(open_.pop(rng.randrange(len(open_))))
                if rng.random() < 0.12:
                    self.direct()
        while open_:
            self.tick()
            self.land(open_.pop(0))
        self.out.write(b"done\n")
        self.out.close()
        if proc.wait() != 0:
            raise RuntimeError("git fast-import failed")
        shas = {}
        for row in marks_file.read_text().splitlines():
            mark, sha = row.split()
            shas[int(mark[1:])] = sha
        for c in self.commits:
            c.sha = shas[c.mark]
        subprocess.run(["git", "-C", str(root), "checkout", "-q", "main"], check=True)
        return History(
            root,
            self.main,
            self.branches,
            self.commits,
            shas,
            root_mark,
            self.main_marks,
            self.changes_of,
            self.direct_marks,
        )


def _runs(lines: list[int]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for n in lines:
        if out and out[-1][1] == n - 1:
            out[-1] = (out[-1][0], n)
        else:
            out.append((n, n))
    return out


def forget_branches(root: Path) -> None:
    """Delete every branch but main and drop what only they reached."""
    refs = subprocess.run(
        ["git", "-C", str(root), "for-each-ref", "--format=%(refname)", "refs/heads/b/"],
        capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    stdin = "".join(f"delete {r}\n" for r in refs)
    subprocess.run(["git", "-C", str(root), "update-ref", "--stdin"], input=stdin, text=True, check=True)  # fmt: skip
    subprocess.run(["git", "-C", str(root), "reflog", "expire", "--expire=now", "--all"], check=True)  # fmt: skip
    subprocess.run(["git", "-C", str(root), "gc", "--prune=now", "-q"], check=True)


def memory_rows(history: History) -> list[dict[str, Any]]:
    """One L0 node per branch commit, anchored to the lines it added (in its own version)."""
    rows = []
    for c in history.commits:
        stamp = datetime.fromtimestamp(c.time, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        rows.append({
            "type": "node", "id": f"c{c.gid}", "level": "L0", "query_id": f"b{c.branch}",
            "run_id": "attribution", "created_at": stamp,
            "text": f"c{c.gid}: why commit {c.index + 1} of branch {c.branch} changed "
                    + ", ".join(sorted({a[0] for a in c.anchors})),
            "anchors": [{"file": p, "lines": [a, b], "commit": c.sha} for p, a, b in c.anchors],
        })  # fmt: skip
    return rows


# -- measuring ------------------------------------------------------------------------------


@dataclass
class Outcome:
    recall: float
    false_hits: int
    detail: str
    report: dict[str, Any]


def measure(work: Path, admin_dsn: str, size: AttrSize, log: Callable[[str], None]) -> Outcome:
    from poimen_memory.domain import ProjectId
    from poimen_memory.gitio.history import line_hash
    from poimen_memory.ingest import IngestOptions, ingest
    from poimen_memory.lookup import DocumentRequest, HoverRequest, build_service
    from poimen_memory.lookup.results import NODE
    from poimen_memory.lookup.rewrites import MAX_LANDING
    from poimen_memory.store import Store, connect, migrate

    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    repo = work / "repo"
    t = time.perf_counter()
    history = Generator(repo, size).build()
    built = time.perf_counter() - t
    kind_of = {b.n: b.kind for b in history.branches}
    n_landed = Counter(b.kind for b in history.branches)
    log(
        f"m: generated {len(history.commits)} branch commits over {len(history.branches)}"
        f" branches ({dict(n_landed)}), {len(history.main_marks)} main commits in {built:.1f}s"
    )

    params = conninfo.conninfo_to_dict(admin_dsn)
    params["dbname"] = f"poimen_bench_attribution_{'quick' if size is ATTR_QUICK else 'full'}"
    dsn = conninfo.make_conninfo(**params)
    with psycopg.connect(admin_dsn, autocommit=True) as admin:
        admin.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                sql.Identifier(params["dbname"])
            )
        )
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(params["dbname"])))
    with connect(dsn) as conn:
        migrate(conn)

    src = work / "memories.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in memory_rows(history)))
    project = ProjectId(PROJECT)
    with Store(dsn) as store:
        t = time.perf_counter()
        summary = ingest([src], store, IngestOptions(project, repo, cache_path=work / "ingest.db"))
        ingest_s = time.perf_counter() - t
    assert not summary.skipped, summary.to_json()
    log(f"m: ingested {len(history.commits)} memories in {ingest_s:.1f}s")
    # Statistics, as autovacuum keeps them in a store in use: without any, the planner takes
    # the fresh tables for empty and the lookups' candidate query for a file can take minutes.
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("ANALYZE")

    # Stored anchors at a commit other than their memory's: blame at the branch commit
    # disagreed with the generator on which lines it added.
    with psycopg.connect(dsn) as conn:
        stray = conn.execute(
            "SELECT count(*) FROM git_anchor a JOIN memory_node n"
            " ON n.project = a.project AND n.sha256 = a.node_sha256"
            " WHERE a.project = %s AND a.commit_sha <> ALL(%s::text[])",
            (PROJECT, [c.sha for c in history.commits]),
        ).fetchone()[0]
        node_gid = {
            sha: int(text.split(":", 1)[0][1:])
            for sha, text in conn.execute(
                "SELECT sha256, text FROM memory_node WHERE project = %s", (PROJECT,)
            )
        }

    t = time.perf_counter()
    forget_branches(repo)
    log(f"m: branches deleted, gc in {time.perf_counter() - t:.1f}s")

    gid_node = {g: s for s, g in node_gid.items()}
    commit_of = {c.gid: c for c in history.commits}

    def kind_of_node(node: str) -> str:
        return kind_of[commit_of[node_gid[node]].branch]

    merged_marks = {c.mark for b in history.branches if b.kind == "merge" for c in b.commits}

    # Expected: the producer's memory on every line a branch commit produced.
    expected: set[tuple[str, int, str]] = set()
    ambiguous: set[tuple[str, int]] = set()
    shown_lens: set[tuple[str, int, str]] = set()
    lens_times: list[float] = []
    landings: dict[str, int] = {}  # file -> landing commits (rewritten) of its lines
    file_counts: dict[str, Counter[int | None]] = {}

    with Store(dsn) as store:
        service = build_service(store, [repo], project, cache_path=work / "lookup.db")
        _, blamer = service.checkouts.blamer(None)
        for path in sorted(history.files):
            lines = history.files[path]
            t = time.perf_counter()
            doc = service.document(DocumentRequest(file=str(repo / path)))
            lens_times.append(time.perf_counter() - t)
            assert doc is not None
            blame = blamer.blame_file(path)
            assert len(blame.lines) == len(lines), (path, len(blame.lines), len(lines))
            hashes = [line_hash(x.text) for x in lines]
            file_counts[path] = Counter(hashes)
            for i, (x, b) in enumerate(zip(lines, blame.lines, strict=True)):
                if x.landed is None or b.commit.value != history.shas[x.landed]:
                    ambiguous.add((path, i + 1))
                    continue
                if x.src >= 0:
                    expected.add((path, i + 1, gid_node[x.src]))
            landings[path] = len(
                {
                    x.landed
                    for x in lines
                    if x.src >= 0 and x.landed is not None and x.landed not in merged_marks
                }
            )
            for n, memories in doc.by_line.items():
                if (path, n) in ambiguous:
                    continue
                for m in memories:
                    shown_lens.add((path, n, m[NODE]))

        # Hovers: a sample of lines with an expected memory, and of lines with none.
        rng = random.Random(29)
        with_memory = sorted({(p, n) for p, n, node in expected if kind_of_node(node) != "merge"})
        has_memory = set(with_memory)
        without = sorted(
            (p, i + 1)
            for p, lines in history.files.items()
            for i in range(len(lines))
            if (p, i + 1) not in ambiguous and (p, i + 1) not in has_memory
        )
        k = min(len(with_memory), size.hovers * 2 // 3)
        sample = rng.sample(with_memory, k) + rng.sample(
            without, min(len(without), size.hovers - k)
        )
        shown_hover: set[tuple[str, int, str]] = set()
        landed_how: dict[tuple[str, int, str], str] = {}
        hover_times = []
        for p, n in sample:
            t = time.perf_counter()
            result = service.hover(HoverRequest(file=str(repo / p), line=n))
            hover_times.append(time.perf_counter() - t)
            for m in result.evidence if result is not None else []:
                shown_hover.add((p, n, m.node.sha256.value))
                landed_how[(p, n, m.node.sha256.value)] = m.landed.how if m.landed else "direct"

        # Lens misses, asked again one line at a time: does the hover find them?
        missed = sorted(expected - shown_lens)  # (merged ones too, if any)
        probe_found: set[tuple[str, int, str]] = set()
        for p, n, node in missed:
            result = service.hover(HoverRequest(file=str(repo / p), line=n))
            if result is not None and any(m.node.sha256.value == node for m in result.evidence):
                probe_found.add((p, n, node))
        false_examples = sorted((shown_lens | shown_hover) - expected)
        for p, n, node in false_examples[:40]:
            result = service.hover(HoverRequest(file=str(repo / p), line=n))
            for m in result.evidence if result is not None else []:
                if m.node.sha256.value == node and m.landed:
                    landed_how[(p, n, node)] = f"{m.landed.how} via {m.landed.landed.short()}"

    # -- the figures and why lines were missed ------------------------------------------------

    # Recall over the rewritten landings; merged branches (whose commits stay in the
    # history) are the control, reported apart.
    rewritten = {e for e in expected if kind_of_node(e[2]) != "merge"}
    found = rewritten & shown_lens
    recall = len(found) / len(rewritten) if rewritten else 1.0
    false_pairs = (shown_lens | shown_hover) - expected
    sampled = set(sample)
    sampled_expected = {e for e in rewritten if (e[0], e[1]) in sampled}
    hover_recall = (
        len(sampled_expected & shown_hover) / len(sampled_expected) if sampled_expected else 1.0
    )

    per_kind: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for e in expected:
        per_kind[kind_of_node(e[2])][1] += 1
        if e in shown_lens:
            per_kind[kind_of_node(e[2])][0] += 1

    # Places the anchored texts have among all memories (what the squash rule counts).
    places: dict[int | None, set[tuple[int, str, int]]] = defaultdict(set)
    for c in history.commits:
        version: dict[str, list[Line]] = {}
        for h in c.hunks:
            for x in h.added:
                version.setdefault(h.path, []).append(x)
        for x_path, xs in version.items():
            for x in xs:
                places[line_hash(x.text)].add((c.gid, x_path, id(x)))
    reasons: Counter[str] = Counter()
    reason_examples: dict[str, list[str]] = defaultdict(list)
    for p, n, node in missed:
        x = history.files[p][n - 1]
        h = line_hash(x.text)
        landing = x.landed
        kind = kind_of_node(node)
        change_count = Counter(line_hash(t) for t in history.changes_of.get(landing or 0, []))
        if h is None:
            why = "text under 3 characters"
        elif (p, n, node) in probe_found:
            why = "lens only (the hover finds it)"
        elif file_counts[p][h] > 1:
            why = "text twice in the file"
        elif change_count[h] > 1:
            why = "text twice in the landing change"
        elif len(places[h]) > 1:
            why = "text at several anchored places"
        elif kind in ("rebase", "pick"):
            why = "same change not recognised"
        else:
            why = "other"
        reasons[why] += 1
        if len(reason_examples[why]) < 3:
            reason_examples[why].append(
                f"{p}:{n} [{kind}] {x.text.strip()!r} c{node_gid[node]}"
                f" landed {history.shas.get(landing or 0, '?')[:10]}"
            )

    false_kinds: Counter[str] = Counter()
    false_list = []
    for p, n, node in sorted(false_pairs):
        x = history.files[p][n - 1]
        if x.src >= 0:
            line_is = f"produced by c{x.src} ({kind_of[commit_of[x.src].branch]})"
            category = "a line another branch commit produced"
        elif x.landed in history.direct_marks:
            line_is = category = "a line of a direct commit (no memory)"
        else:
            line_is = category = "a base line"
        shown_kind = kind_of_node(node)
        false_kinds[f"{shown_kind} memory on {category}"] += 1
        false_list.append(
            f"{p}:{n} {x.text.strip()!r}: {line_is}; shown c{node_gid[node]} ({shown_kind},"
            f" {landed_how.get((p, n, node), 'lens')})"
        )

    at_head = {id(x) for lines in history.files.values() for x in lines}
    landed_lines = [
        x for c in history.commits for h in c.hunks for x in h.added if x.landed is not None
    ]
    overwritten = sum(1 for x in landed_lines if id(x) not in at_head)
    lens_total = sum(lens_times)
    report = {
        "branch_commits": len(history.commits),
        "branches": dict(Counter(b.kind for b in history.branches)),
        "main_commits": len(history.main_marks),
        "direct_commits": len(history.direct_marks),
        "lines_at_head": sum(len(v) for v in history.files.values()),
        "expected_pairs": len(expected),
        "expected_pairs_rewritten": len(rewritten),
        "found_pairs_rewritten": len(found),
        "recall": recall,
        "recall_per_kind": {k: (v[0] / v[1] if v[1] else None, v[1]) for k, v in per_kind.items()},
        "false_hits": len(false_pairs),
        "false_hits_lens": len(shown_lens - expected),
        "false_hits_hover": len(shown_hover - expected),
        "false_kinds": dict(false_kinds),
        "false_examples": false_list[:40],
        "hover_sample": len(sample),
        "hover_recall": hover_recall,
        "hover_expected": len(sampled_expected),
        "miss_reasons": dict(reasons),
        "miss_examples": dict(reason_examples),
        "lens_misses_found_by_hover": len(probe_found),
        "recall_lens_or_hover": len(found | (probe_found & rewritten)) / len(rewritten)
        if rewritten
        else 1.0,
        "lens_max_landing": MAX_LANDING,
        "landing_commits_per_file_median": sorted(landings.values())[len(landings) // 2],
        "landing_commits_per_file_max": max(landings.values()),
        "ambiguous_lines": len(ambiguous),
        "stray_anchors": stray,
        "landed_lines": len(landed_lines),
        "landed_lines_overwritten_later": overwritten,
        "seconds": {
            "generate": round(built, 2),
            "ingest": round(ingest_s, 2),
            "lens_total": round(lens_total, 2),
            "lens_per_file_median": round(sorted(lens_times)[len(lens_times) // 2], 4),
            "lens_per_file_max": round(max(lens_times), 4),
            "hover_median": round(sorted(hover_times)[len(hover_times) // 2], 4),
        },
    }
    (work / "report.json").write_text(json.dumps(report, indent=2) + "\n")
    kinds = ", ".join(
        f"{k}{' (control)' if k == 'merge' else ''} {v[0] / v[1]:.3f}"
        for k, v in sorted(per_kind.items())
        if v[1]
    )
    branches = Counter(b.kind for b in history.branches)
    detail = (
        f"code lens over every line of {len(history.files)} files at HEAD:"
        f" {len(found)}/{len(rewritten)} (line, memory) pairs of {len(history.commits)} branch"
        f" commits ({', '.join(f'{k} {v}' for k, v in sorted(branches.items()))} branches);"
        f" per kind {kinds}; hover {hover_recall:.3f} on {len(sampled_expected)} sampled lines;"
        f" {len(probe_found)}/{len(missed)} lens misses found by hover;"
        f" ingest {ingest_s:.1f}s, lens {report['seconds']['lens_per_file_median'] * 1000:.0f}"
        f" ms/file (median), hover {report['seconds']['hover_median'] * 1000:.1f} ms (median)"
    )
    return Outcome(recall, len(false_pairs), detail, report)


def fig_m(bench: Bench) -> None:
    """Figure m on the bench's size (quick or full)."""
    size = ATTR_QUICK if bench.size is QUICK else ATTR_FULL
    key = "quick" if size is ATTR_QUICK else "full"
    out = measure(
        bench.work / f"attribution-{key}",
        bench.admin_dsn,
        size,
        lambda s: print(s, flush=True),
    )
    r = out.report
    print(
        f"m: misses by reason {r['miss_reasons']}; false hits by kind {r['false_kinds']};"
        f" ambiguous lines {r['ambiguous_lines']}, stray anchors {r['stray_anchors']}",
        flush=True,
    )
    bench.add(
        "m. attribution recall on rewritten history",
        out.recall,
        1.0,
        ">= 0.95",
        lambda ratio: ratio >= 0.95,
        unit="",
        detail=out.detail,
    )
    bench.add(
        "m. attribution false hits",
        float(out.false_hits),
        1.0,
        "0",
        lambda ratio: out.false_hits == 0,
        unit="",
        detail="; ".join(
            [
                f"lens {r['false_hits_lens']}, hover {r['false_hits_hover']}"
                f" ({r['hover_sample']} hovers)",
                *(f"{n} {k}" for k, n in sorted(r["false_kinds"].items())),
                *(f"e.g. {e}" for e in r["false_examples"][:2]),
            ]
        ),
    )
