"""The benchmark corpus, generated deterministically from a seed.

* A git repository built with ``git fast-import`` (then repacked, as git advises after an
  import): an initial commit of ``files`` modules of ``file_lines`` lines and one big file of
  ``big_lines`` lines, then ``commits`` commits by several authors. ``big_commits`` of them
  edit lines of the big file (which is renamed half way), the others edit lines of the
  modules. Every commit records which lines (in its own version of the file) it changed, so
  memories can be anchored where blame will find them.
* A store: L2, L1 and L0 nodes with edges and anchors over those commits, loaded with COPY.
  A tenth of the L0 nodes are anchored at lines their commit changed (found by blame from a
  hover); the rest at other lines of files their commit touched (they fill the index).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import random
import subprocess
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path

import psycopg

from poimen_memory.domain import NODE_TAG
from poimen_memory.store import connect, migrate

AUTHORS = [
    ("Alice Smith", "alice@bench.example"),
    ("Bob Jones", "bob@bench.example"),
    ("Carol White", "carol@bench.example"),
    ("Dan Brown", "dan@bench.example"),
    ("Eve Black", "eve@bench.example"),
    ("Frank Green", "frank@bench.example"),
]
WORDS = [
    "buffer",
    "body",
    "kong",
    "upload",
    "stream",
    "handler",
    "retry",
    "timeout",
    "cache",
    "blame",
    "commit",
    "author",
    "parser",
    "index",
    "query",
    "latency",
    "memory",
    "evidence",
    "session",
    "agent",
    "token",
    "budget",
    "chunk",
    "anchor",
    "repo",
    "file",
    "line",
    "rename",
    "history",
    "merge",
    "branch",
    "config",
    "socket",
    "pool",
    "migrate",
    "schema",
    "vacuum",
    "lock",
    "queue",
]
REMOTE = "https://bench.example/poimen/bench.git"
REPO_ID = "bench.example/poimen/bench"
PROJECT = "bench"
BIG_OLD = "src/core.rs"
BIG = "src/engine/core.rs"


@dataclass(frozen=True)
class Size:
    """How big a corpus to build."""

    commits: int
    big_commits: int
    big_lines: int
    files: int
    file_lines: int
    l0: int
    l1: int
    l2: int
    anchors_per_l0: int
    ingest_nodes: int

    @property
    def key(self) -> str:
        return hashlib.sha256(json.dumps(self.__dict__, sort_keys=True).encode()).hexdigest()[:12]

    def scaled(self, factor: int) -> Size:
        """The same repository with ``factor`` times the memories (and so the anchors)."""
        if factor == 1:
            return self
        return replace(self, l0=self.l0 * factor, l1=self.l1 * factor, l2=self.l2 * factor)


FULL = Size(5000, 2000, 7000, 50, 5000, 1_000_000, 100_000, 1_000, 2, 100_000)
QUICK = Size(400, 150, 2000, 10, 1000, 20_000, 2_000, 20, 2, 5_000)


@dataclass
class CommitRecord:
    """A generated commit: its author, time and the lines it changed, per path."""

    index: int
    sha: str = ""
    author: tuple[str, str] = AUTHORS[0]
    time: int = 0
    message: str = ""
    changed: dict[str, list[int]] = field(default_factory=dict)
    touched: dict[str, int] = field(default_factory=dict)  # path -> line count after commit


def _line(rng: random.Random, n: int) -> str:
    a, b = rng.randrange(10_000), rng.randrange(10_000)
    return f"    let v{n}_{a} = compute({b}, {rng.choice(WORDS)});"


def _blob(lines: list[str]) -> bytes:
    return ("\n".join(lines) + "\n").encode()


def build_repo(root: Path, size: Size, seed: int = 7) -> list[CommitRecord]:
    """Create the repository at ``root`` with git fast-import; returns the commit records."""
    rng = random.Random(seed)
    root.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", "-b", "main", str(root)], check=True)
    subprocess.run(["git", "-C", str(root), "remote", "add", "origin", REMOTE], check=True)
    counter = 0

    def fresh() -> str:
        nonlocal counter
        counter += 1
        return _line(rng, counter)

    modules = {
        f"src/mod_{k:02d}.rs": [fresh() for _ in range(size.file_lines)] for k in range(size.files)
    }
    big = [fresh() for _ in range(size.big_lines)]
    big_path = BIG_OLD
    records: list[CommitRecord] = []
    clock = 1_780_000_000
    proc = subprocess.Popen(
        ["git", "-C", str(root), "fast-import", "--quiet", "--done"], stdin=subprocess.PIPE
    )
    assert proc.stdin is not None
    out = proc.stdin

    def emit_commit(
        mark: int, rec: CommitRecord, files: dict[str, list[str]], extra: list[bytes]
    ) -> None:
        name, email = rec.author
        msg = rec.message.encode()
        out.write(f"commit refs/heads/main\nmark :{mark}\n".encode())
        out.write(f"author {name} <{email}> {rec.time} +0000\n".encode())
        out.write(f"committer {name} <{email}> {rec.time} +0000\n".encode())
        out.write(f"data {len(msg)}\n".encode() + msg + b"\n")
        if mark > 1:
            out.write(f"from :{mark - 1}\n".encode())
        for line in extra:
            out.write(line)
        for path, lines in files.items():
            data = _blob(lines)
            out.write(f"M 100644 inline {path}\ndata {len(data)}\n".encode() + data + b"\n")

    first = CommitRecord(0, author=AUTHORS[0], time=clock, message="Initial import")
    emit_commit(1, first, {**modules, big_path: big}, [])
    first.touched = {p: len(v) for p, v in {**modules, big_path: big}.items()}
    records.append(first)
    big_every = size.commits / max(size.big_commits, 1)
    next_big = 0.0
    rename_at = size.commits // 2
    for i in range(1, size.commits + 1):
        clock += rng.randrange(300, 7200)
        rec = CommitRecord(i, author=rng.choice(AUTHORS), time=clock)
        extra: list[bytes] = []
        if i == rename_at:
            extra.append(f"R {BIG_OLD} {BIG}\n".encode())
            big_path = BIG
        if i >= next_big:
            next_big += big_every
            path, lines = big_path, big
        else:
            path = rng.choice(sorted(modules))
            lines = modules[path]
        changed: list[int] = []
        for _ in range(rng.randrange(1, 5)):  # hunks of consecutive lines, as edits are
            length = rng.randrange(3, 25)
            start = rng.randrange(0, max(1, len(lines) - length))
            for n in range(start, min(start + length, len(lines))):
                lines[n] = fresh()
                changed.append(n)
        if rng.random() < 0.2:  # sometimes insert a block, shifting everything below
            at = rng.randrange(len(lines))
            block = [fresh() for _ in range(rng.randrange(1, 6))]
            lines[at:at] = block
            changed = [n if n < at else n + len(block) for n in changed] + list(
                range(at, at + len(block))
            )
        rec.changed = {path: sorted(n + 1 for n in set(changed))}
        rec.touched = {path: len(lines)}
        rec.message = (
            f"{rng.choice(WORDS).capitalize()} {rng.choice(WORDS)} in {path.rsplit('/', 1)[-1]}"
        )
        emit_commit(i + 1, rec, {path: lines}, extra)
        records.append(rec)
    out.write(b"done\n")
    out.close()
    if proc.wait() != 0:
        raise RuntimeError("git fast-import failed")
    repack(root)
    subprocess.run(["git", "-C", str(root), "checkout", "-q", "main"], check=True)
    shas = subprocess.run(
        ["git", "-C", str(root), "rev-list", "--reverse", "main"],
        capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    assert len(shas) == len(records), (len(shas), len(records))
    for rec, sha in zip(records, shas, strict=True):
        rec.sha = sha
    return records


def repack(root: Path) -> None:
    """Repack the objects as git's fast-import documentation advises after an import.

    fast-import deltifies each blob against the blob written just before it, whatever its
    path: on this corpus a 47-line change to the big file became a 245 KB delta, 50 deep, and
    reading one old version of that file cost 45 ms, where a clone of a real repository
    (deltas chosen by ``pack-objects``) reads it in well under one. Every git floor and every
    figure that reads history is measured on the repacked objects.
    """
    subprocess.run(["git", "-C", str(root), "repack", "-a", "-d", "-f", "-q"], check=True)


def _enc(value: str) -> bytes:
    data = value.encode()
    return len(data).to_bytes(8, "big") + data


def node_sha(level: str, project: str, query_id: str | None, text: str) -> str:
    """The node identity (domain.MemoryNode.canonical_bytes), without building nodes."""
    opt = b"\x00" if query_id is None else b"\x01" + _enc(query_id)
    return hashlib.sha256(NODE_TAG + _enc(level) + _enc(project) + opt + _enc(text)).hexdigest()


_SYLLABLES = [
    "ka",
    "lo",
    "mi",
    "nu",
    "pe",
    "ra",
    "si",
    "to",
    "vu",
    "xe",
    "ba",
    "de",
    "fi",
    "go",
    "hu",
]
VOCABULARY = (
    WORDS + sorted({a + b + c for a in _SYLLABLES for b in _SYLLABLES for c in _SYLLABLES})[:4000]
)


def _text(rng: random.Random, n: int) -> str:
    # Mostly rare words, so a search matches a realistic fraction of the store.
    return " ".join(rng.choice(VOCABULARY) for _ in range(n))


def _blocks(rec: CommitRecord) -> list[tuple[str, int, int]]:
    """The commit's changed lines as runs (path, first, last)."""
    out = []
    for path, lines in rec.changed.items():
        start = prev = lines[0]
        for n in lines[1:]:
            if n != prev + 1:
                out.append((path, start, prev))
                start = n
            prev = n
        out.append((path, start, prev))
    return out


def load_store(dsn: str, records: list[CommitRecord], size: Size, seed: int = 11) -> dict[str, int]:
    """Fill the store with COPY; returns row counts."""
    rng = random.Random(seed)
    with connect(dsn) as conn:
        migrate(conn)
    created = "2026-08-01 00:00:00+00"
    counts = {"l0": 0, "l1": 0, "l2": 0, "edges": 0, "anchors": 0, "commits": 0}
    with psycopg.connect(dsn, autocommit=False) as conn, conn.cursor() as cur:
        # Bulk load in dependency order; skipping per-row FK triggers needs a superuser.
        with contextlib.suppress(psycopg.errors.InsufficientPrivilege), conn.transaction():
            cur.execute("SET LOCAL session_replication_role = replica")
        with cur.copy(
            "COPY git_commit (project, repo, commit_sha, message, author_name, author_email,"
            " author_date) FROM STDIN"
        ) as copy:
            for rec in records:
                when = datetime.fromtimestamp(rec.time, UTC)
                copy.write_row((PROJECT, REPO_ID, rec.sha, rec.message or "Initial import",
                                rec.author[0], rec.author[1], when))  # fmt: skip
                counts["commits"] += 1
        node_rows = []
        l2s = []
        for k in range(size.l2):
            text = f"Synthesis {k}: {_text(rng, 12)}"
            sha = node_sha("L2", PROJECT, None, text)
            l2s.append(sha)
            node_rows.append((PROJECT, sha, "L2", None, "bench-run", 0, text, created))
        l1s = []
        edge_rows = []
        for k in range(size.l1):
            q = f"q{k}"
            text = f"Memory {k}: {_text(rng, 16)}"
            sha = node_sha("L1", PROJECT, q, text)
            l1s.append((sha, q))
            node_rows.append((PROJECT, sha, "L1", q, "bench-run", 1, text, created))
            edge_rows.append((PROJECT, sha, l2s[k % len(l2s)]))
        anchor_rows = []
        runs_of = {rec.sha: _blocks(rec) for rec in records[1:]}
        for k in range(size.l0):
            parent, q = l1s[k % len(l1s)]
            text = f"Evidence {k}: {_text(rng, 30)}"
            sha = node_sha("L0", PROJECT, q, text)
            node_rows.append((PROJECT, sha, "L0", q, "bench-run", 1, text, created))
            edge_rows.append((PROJECT, sha, parent))
            # Evidence sits on lines its commit changed: sub-ranges of the commit's hunks.
            rec = records[rng.randrange(1, len(records))]
            mine: set[tuple[str, int, int]] = set()
            while len(mine) < size.anchors_per_l0:  # distinct, so every anchor is a row
                path, first, last = rng.choice(runs_of[rec.sha])
                start = rng.randrange(first, last + 1)
                end = min(last, start + rng.randrange(0, 4))
                if (path, start, end) not in mine:
                    mine.add((path, start, end))
                    anchor_rows.append((PROJECT, sha, REPO_ID, rec.sha, path, start, end))
        with cur.copy(
            "COPY memory_node (project, sha256, level, query_id, run_id, t, text, created_at)"
            " FROM STDIN"
        ) as copy:
            for row in node_rows:
                copy.write_row(row)
        with cur.copy("COPY memory_edge (project, child_sha256, parent_sha256) FROM STDIN") as copy:
            for row in edge_rows:
                copy.write_row(row)
        with cur.copy(
            "COPY git_anchor (project, node_sha256, repo, commit_sha, file, line_start, line_end)"
            " FROM STDIN"
        ) as copy:
            for row in dict.fromkeys(anchor_rows):
                copy.write_row(row)
                counts["anchors"] += 1
        conn.commit()
        cur.execute("ANALYZE")
    counts.update(l0=size.l0, l1=size.l1, l2=size.l2, edges=len(edge_rows))
    return counts
