"""Figures j, k, l: blame that git does not recompute.

* j: a hover after HEAD moved by 1, 10 and 50 commits touching the file, in a server that
  blamed the file at the old HEAD, vs ``git blame -L n,n`` at the new HEAD (1 and 10) or vs
  git's diffs of the commits walked (50: reading their versions of the file alone costs
  about what 0.1x of ``git blame -L`` allows);
* k: the first hover in a fresh clone with an empty local cache, when the store's shared
  cache has the file (a teammate blamed it), vs ``git blame -L n,n`` in that clone;
* l: the blame of the whole file from the one 50 commits earlier (in process, as the server
  computes it) vs ``git blame --porcelain``, and whether every line is identical.

Each runs the real language server over stdio (j, k) or the real gitio code (l) on the bench
repository's big file, each repeat with a fresh cache directory.
"""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

import psycopg

from bench.corpus import BIG, PROJECT
from bench.lspclient import LspClient

if TYPE_CHECKING:
    from bench.__main__ import Bench

STEPS = (1, 10, 50)
SHORT_WALK = 10
"""Walks up to this many commits touching the file are held to 0.1x of git blame -L."""


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=repo, capture_output=True, text=True, check=True
    ).stdout


def _timed(repo: Path, *args: str) -> float:
    started = time.perf_counter()
    subprocess.run(["git", *args], cwd=repo, capture_output=True, check=True)
    return time.perf_counter() - started


def _timed_argv(repo: Path, argv: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, cwd=repo, capture_output=True, check=True)
    return time.perf_counter() - started


def _median(xs: list[float]) -> float:
    ordered = sorted(xs)
    return ordered[len(ordered) // 2]


def _server(bench: Bench, repo: Path, cache: Path, shared: bool) -> LspClient:
    client = LspClient(
        [sys.executable, "-m", "poimen_memory.cli", "lsp"],
        bench.env(cache),
        repo,
        bench.work / "server.log",
    )
    options = {"dsn": bench.dsn, "project": PROJECT, "blame": {"sharedCache": shared}}
    client.initialize(repo, {"poimenMemory": options})
    return client


def _wait_for_local_blame(cache: Path, entries: int) -> None:
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        try:
            with sqlite3.connect(cache / "blame.sqlite3") as db:
                if db.execute("SELECT count(*) FROM blame").fetchone()[0] >= entries:
                    return
        except sqlite3.Error:
            pass
        time.sleep(0.1)
    raise AssertionError("the whole-file blame never reached the local cache")


def _clone(bench: Bench, name: str) -> Path:
    target = bench.work / name
    shutil.rmtree(target, ignore_errors=True)
    subprocess.run(
        ["git", "clone", "-q", "--no-hardlinks", str(bench.repo), str(target)], check=True
    )
    url = _git(bench.repo, "remote", "get-url", "origin").strip()
    _git(target, "remote", "set-url", "origin", url)  # a teammate's clone of the same remote
    return target


def _reopen(client: LspClient, path: Path, uri: str | None) -> str:
    if uri is not None:
        client.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
    return client.open(path, path.read_text())


def fig_j(bench: Bench) -> None:
    """A hover after HEAD moved N commits touching the file."""
    repo = _clone(bench, "j-repo")
    touching = _git(repo, "rev-list", "HEAD", "--", BIG).split()
    head = touching[0]
    line = bench.hover_line()
    for step in STEPS:
        if step >= len(touching):
            continue
        base = touching[step]
        ours, floor = [], []
        for _ in range(bench.repeats):
            _git(repo, "checkout", "-q", "--detach", base)
            cache = bench.work / f"cache-{uuid.uuid4().hex[:8]}"
            client = _server(bench, repo, cache, shared=False)
            uri = _reopen(client, repo / BIG, None)
            client.request("workspace/executeCommand", {"command": "mem.ping", "arguments": [{}]})
            client.hover(uri, min(line, len((repo / BIG).read_text().splitlines())))
            _wait_for_local_blame(cache, 1)
            _git(repo, "checkout", "-q", "--detach", head)
            uri = _reopen(client, repo / BIG, uri)
            t, _ = client.hover(uri, line)
            ours.append(t)
            client.close()
            floor.append(_timed(repo, "blame", f"-L{line},{line}", "--porcelain", head, "--", BIG))
        # What the exact answer reads at least: each walked commit's diff of the file, as
        # git writes it (the same arguments the incremental blame's walk uses), output
        # thrown away.
        from poimen_memory.gitio import GitRepo
        from poimen_memory.gitio.blamelog import LOG_ARGS

        runner = GitRepo.discover(repo).runner
        walk = [*LOG_ARGS, f"^{base}", head, "--", BIG]
        diffs = [_timed_argv(repo, runner.argv(walk)) for _ in range(bench.repeats)]
        # Below the diffs: the versions of the file the walk passes (each commit's and the
        # base's), read by one cat-file and nothing else: what any exact answer must read.
        walked = _git(repo, "rev-list", f"^{base}", head, "--", BIG).split()
        names = "".join(f"{sha}:{BIG}\n" for sha in [*walked, base]).encode()
        reads = []
        for _ in range(bench.repeats):
            started = time.perf_counter()
            subprocess.run(
                ["git", "cat-file", "--batch"], cwd=repo, input=names, capture_output=True,
                check=True,
            )  # fmt: skip
            reads.append(time.perf_counter() - started)
        if step <= SHORT_WALK:
            bench.add(
                f"j. hover after HEAD moved {step} vs git blame -L",
                _median(ours),
                _median(floor),
                "<= 0.1x",
                lambda r: r <= 0.1,
                detail=f"{step} commits touching the file",
            )
        else:
            # A long walk: its own commits are the floor. An exact answer reads the file at
            # every walked commit, which alone costs about 0.1x of git blame -L here (the
            # next info row), so 0.1x of the whole history's blame is no target for it.
            bench.add(
                f"j. hover after HEAD moved {step} vs git's diffs of those commits",
                _median(ours),
                _median(diffs),
                "<= 1.0x",
                lambda r: r <= 1.0,
                detail=f"one git log -p of the {step} commits touching the file since",
            )
            bench.add(
                f"j. (info) hover after HEAD moved {step} vs git blame -L",
                _median(ours),
                _median(floor),
                "(info)",
                lambda r: True,
                detail="was <= 0.1x: below what reading the walked versions costs",
            )
        bench.add(
            f"j. (info) git's diffs of those {step} commits vs git blame -L",
            _median(diffs),
            _median(floor),
            "(info)",
            lambda r: True,
            detail="one git log -p of the walk: what the exact answer reads at least",
        )
        bench.add(
            f"j. (info) reading the {step + 1} versions of the file vs git blame -L",
            _median(reads),
            _median(floor),
            "(info)",
            lambda r: True,
            detail="git cat-file --batch of the file at each walked commit and the base",
        )


def fig_k(bench: Bench) -> None:
    """The first hover in a fresh clone when the shared cache has the file."""
    line = bench.hover_line()
    # A teammate blames the file at HEAD; the row lands in the store.
    mine = _clone(bench, "k-mine")
    cache = bench.work / f"cache-{uuid.uuid4().hex[:8]}"
    client = _server(bench, mine, cache, shared=True)
    uri = _reopen(client, mine / BIG, None)
    client.request("workspace/executeCommand", {"command": "mem.ping", "arguments": [{}]})
    client.request("textDocument/codeLens", {"textDocument": {"uri": uri}})
    last = _git(mine, "rev-list", "-1", "HEAD", "--", BIG).strip()
    deadline = time.monotonic() + 120
    with psycopg.connect(bench.dsn, autocommit=True) as conn:
        while time.monotonic() < deadline:
            row = conn.execute(
                "SELECT count(*) FROM blame_file WHERE project = %s AND path = %s"
                " AND commit_sha = %s",
                (PROJECT, BIG, last),
            ).fetchone()
            if row and row[0]:
                break
            time.sleep(0.1)
        else:
            raise AssertionError("the shared blame never reached the store")
    client.close()
    ours, floor = [], []
    for i in range(bench.repeats):
        theirs = _clone(bench, f"k-theirs-{i}")
        fresh = bench.work / f"cache-{uuid.uuid4().hex[:8]}"
        client = _server(bench, theirs, fresh, shared=True)
        uri = _reopen(client, theirs / BIG, None)
        client.request("workspace/executeCommand", {"command": "mem.ping", "arguments": [{}]})
        t, result = client.hover(uri, line)
        assert result is not None, "the first hover in the clone found no memory"
        ours.append(t)
        client.close()
        floor.append(_timed(theirs, "blame", f"-L{line},{line}", "--porcelain", "HEAD", "--", BIG))
    bench.add(
        "k. first hover in a fresh clone (shared cache) vs git blame -L",
        _median(ours),
        _median(floor),
        "<= 0.1x",
        lambda r: r <= 0.1,
    )


def fig_l(bench: Bench) -> None:
    """The whole file's blame from 50 commits earlier vs git blame --porcelain."""
    from poimen_memory.domain import CommitSha
    from poimen_memory.gitio import GitRepo
    from poimen_memory.gitio.blame import differences
    from poimen_memory.gitio.incremental import blame_from

    repo = GitRepo.discover(bench.repo)
    touching = _git(bench.repo, "rev-list", "HEAD", "--", BIG).split()
    step = min(50, len(touching) - 1)
    head, base = CommitSha(touching[0]), CommitSha(touching[step])
    checkpoint = repo.blame(BIG, base)
    ours: list[float] = []
    floor: list[float] = []
    differing = 0
    for _ in range(bench.repeats):
        started = time.perf_counter()
        found = blame_from(repo, checkpoint, head, BIG)
        ours.append(time.perf_counter() - started)
        floor.append(_timed(bench.repo, "blame", "--porcelain", head.value, "--", BIG))
        differing = len(differences(found, repo.blame(BIG, head)))
    bench.add(
        f"l. blame from {step} commits back vs git blame --porcelain",
        _median(ours),
        _median(floor),
        "<= 0.1x",
        lambda r: r <= 0.1 and differing == 0,
        detail=f"{differing} lines differ from git blame",
    )
