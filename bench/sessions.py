"""Figure n: Claude Code sessions ingested through the hook, one after another.

1,000 sessions (50 with --quick; ``POIMEN_BENCH_SESSIONS_COUNT`` sets another number), some 3
minutes here with their making and their floors. They are made in a clone of a real repository
(``POIMEN_BENCH_SESSIONS_REPO``, a git work tree; else the bench corpus) by really editing
it, and written as Claude Code 2.x writes its transcripts
(``~/.claude/projects/<dir>/<session>.jsonl``): a file-history snapshot and a prompt,
assistant turns that explain a decision (each content block an entry of its own, as Claude
Code streams them), 1 to 6 Edit calls on lines of files of the repository (the old text read
from the file, a change of it as the new text), each followed by its result with what Claude
Code records (the file as it was, the ``structuredPatch``), now and then a thinking block,
Read and Bash calls with their output, or a further prompt. One session in twenty is long
(several prompts, whole files read, long test runs): transcripts go from some KB to a few MB.
Six in ten commit their work in the session (a Bash ``git commit``) before the hook runs; the
others leave it to the human, who commits once the hook has run: their edits wait as pending
anchors. Everything is seeded: the same repository gives the same sessions (their timestamps
start after its HEAD, and no earlier than a day ago, so that waiting edits have not expired).

Each session is ingested as Claude Code's ``SessionEnd`` hook has it ingested: the hook
(``mem hooks run claude-code``) hands the payload to a detached worker (``--wait``) and
returns; the worker calls ``run_hook(payload, wait=True)``. That call is timed here, in this
process, one session after another, into a fresh database; a worker's own start (a Python
process importing mem) is measured apart. The blame cache starts as the editor leaves it: the
files the sessions edit blamed once at the clone's HEAD, untimed (a file's first blame is
what figures a and c measure).

Floors, measured in the same run:

* per session: json.loads of every line of its transcript, and the git processes its answer
  needs at least: one ``git cat-file --batch`` (HEAD, and the edited files at HEAD, where the
  edits' lines are looked for); then, for a session whose lines HEAD holds, one ``git blame
  --porcelain -L`` of just those lines per file and one ``git log -p`` of the commits blame
  names (the arguments ingest uses: the anchors' line hashes and the patch ids come from those
  diffs); for one whose lines wait, its edited files read from the work tree;
* per session too: a connection of its own and one transaction that writes, committed: what
  any process the hook starts pays to store a session, however few its rows (one COPY of all
  sessions' rows would spread one connection and one commit over all of them);
* for the throughput, those per-session floors summed, plus COPY of every row the hook wrote
  (one COPY per table into a fresh migrated database, as figure g).
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg import conninfo, sql

from bench import floors
from bench.corpus import AUTHORS, QUICK, WORDS

if TYPE_CHECKING:
    from bench.__main__ import Bench

ENV = "POIMEN_BENCH_SESSIONS_REPO"
COUNT_ENV = "POIMEN_BENCH_SESSIONS_COUNT"
PROJECT = "bench-sessions"
SEED = 41
ASKED = 1000
SESSIONS = ASKED  # made by default (fewer: the detail says what ASKED would take)
QUICK_SESSIONS = 50
COMMITTED = 0.6  # the share of sessions that commit their work before the hook runs
WORKING_SET = 20  # files the sessions edit, some far more often than others
VERSION = "2.1.29"
MODEL = "claude-opus-4-5-20251101"
CONTEXT = 3  # context lines of a structuredPatch hunk, as Claude Code records them
READ_LIMIT = 2000  # lines Claude Code's Read returns at most
MAX_FILE_BYTES = 512_000
# The files an edit may go to: those whose line comments we know.
COMMENTS = {
    ".py": "#", ".rs": "//", ".go": "//", ".c": "//", ".h": "//", ".cc": "//", ".cpp": "//",
    ".hpp": "//", ".java": "//", ".kt": "//", ".scala": "//", ".swift": "//", ".cs": "//",
    ".js": "//", ".jsx": "//", ".ts": "//", ".tsx": "//", ".php": "//", ".rb": "#",
    ".sh": "#", ".pl": "#", ".r": "#", ".ex": "#", ".exs": "#", ".toml": "#", ".yaml": "#",
    ".yml": "#", ".sql": "--", ".lua": "--", ".hs": "--",
}  # fmt: skip

PROMPTS = (
    "The {a} {b} in {file} is too slow when the {c} is large; make it cheaper without changing"
    " what callers see.",
    "Users report {a} requests failing after a {b} timeout. Find where {file} handles the {c}"
    " and fix it.",
    "Refactor the {a} handling in {file}: the {b} and the {c} should not share one code path.",
    "Add a guard so that a missing {a} does not take the whole {b} down; {file} looks like the"
    " place.",
    "Why does the {a} {b} retry forever? Make it give up after a bounded {c}.",
    "Review {file} and tighten the {a} limits: the {b} budget is exceeded on big {c}s.",
)
FOLLOW_UPS = (
    "Also cover the {a} case in {file}.",
    "The tests still fail on the {a} {b}; have another look.",
    "Keep the old {a} behaviour behind the {b} flag, we roll it out slowly.",
    "Good. Now the same for the {a} {c}, please.",
)
REASONS = (
    "The {a} is computed once per {b}, so the change belongs in {file} rather than in its"
    " callers: they keep their contract.",
    "I'll change line {line} of {file}: the {a} there bounds the {b}, and raising it elsewhere"
    " would hide the {c} problem.",
    "Two options: cache the {a} or bound the {b}. Bounding is simpler and keeps memory flat,"
    " so I'm doing that in {file}.",
    "This {a} path is shared with the {b} handler; changing it here keeps the {c} behaviour"
    " the same for both.",
    "The {a} check has to come before the {b} is read, otherwise a large {c} is buffered"
    " first. Moving it up in {file}.",
)
THOUGHTS = (
    "Where is the {a} decided? {file} reads the {b} first and only then looks at the {c}; if"
    " I change the order the {a} never sees a partial {b}. Check the callers first.",
    "The simplest fix is in {file}. A {a} flag would work too but spreads the {b} logic;"
    " keep it local and note why next to the {c}.",
)
NOTES = (
    "bound the {a} by the {b}",
    "{a} before {b}: a large {c} is never buffered",
    "keep the {a} for the {b} path",
    "{a} is per {b}, not per {c}",
    "retry the {a} at most once per {b}",
)
REPLIES = (
    "Done. The {a} in {file} is now bounded by the {b}; callers are unchanged and the {c}"
    " path is covered.",
    "I changed {edits} place(s) in {files}: the {a} no longer depends on the {b}, which was"
    " the cause of the {c} failures.",
    "Fixed: {files} now handle the {a} before the {b}. I left the {c} as it was, since nothing"
    " relies on changing it.",
)
SUFFIXES = ("checked", "bounded", "cached", "limit", "inner", "once")
_NUMBER = re.compile(r"(?<![\w.])\d{1,6}(?![\w.])")
_WORD = re.compile(r"\b[a-z][a-z_]{3,}\b")
_PORCELAIN = re.compile(rb"^([0-9a-f]{40}) \d+ \d+", re.MULTILINE)


def stamp(epoch: float) -> str:
    """A timestamp as Claude Code writes it (UTC, milliseconds, ``Z``)."""
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def git(root: Path, *args: str, env: dict[str, str] | None = None) -> str:
    """git's output; RuntimeError with its message when it fails."""
    done = subprocess.run(
        ["git", *args], cwd=root, capture_output=True, text=True, check=False, env=env
    )
    if done.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout


def _pct(xs: Sequence[float], p: float) -> float:
    ordered = sorted(xs)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


# -- the repository --------------------------------------------------------------------------


def source_repo(default: Path) -> Path:
    """The repository to clone: the work tree ``POIMEN_BENCH_SESSIONS_REPO`` names, else
    ``default``."""
    named = os.environ.get(ENV)
    if not named:
        return default
    path = Path(named).expanduser()
    try:
        return Path(git(path, "rev-parse", "--show-toplevel").strip())
    except (RuntimeError, OSError):
        raise SystemExit(f"{ENV}: {path} is not a git work tree") from None


def clone_repo(source: Path, target: Path) -> Path:
    """A clone of ``source`` at ``target`` (a leftover one removed first), with ``source``'s
    remote as its own, so that it has the same identity."""
    shutil.rmtree(target, ignore_errors=True)
    subprocess.run(["git", "clone", "--no-hardlinks", "-q", str(source), str(target)], check=True)
    try:
        url = git(source, "config", "--get", "remote.origin.url").strip()
    except RuntimeError:
        url = ""
    if url:
        git(target, "remote", "set-url", "origin", url)
    else:
        git(target, "remote", "remove", "origin")
    return target


def editable_files(root: Path) -> list[str]:
    """The tracked text files an agent would edit: a known line comment, UTF-8, LF line
    ends, 20 lines or more, 512 KB at most."""
    out = []
    for path in git(root, "ls-files", "-z").split("\0"):
        full = root / path
        if not path or full.suffix.lower() not in COMMENTS or full.is_symlink():
            continue
        if not full.is_file() or not 200 <= full.stat().st_size <= MAX_FILE_BYTES:
            continue
        data = full.read_bytes()
        if b"\0" in data or b"\r" in data:
            continue
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            continue
        if text.count("\n") >= 20:
            out.append(path)
    return sorted(out)


def commit_all(root: Path, message: str, when: float, author: tuple[str, str]) -> str:
    """Commit every change to the tracked files as ``author`` at ``when`` (epoch seconds);
    git's summary of it, as ``git commit`` prints it."""
    date = f"@{int(when)} +0000"
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": author[0], "GIT_AUTHOR_EMAIL": author[1], "GIT_AUTHOR_DATE": date,
        "GIT_COMMITTER_NAME": author[0], "GIT_COMMITTER_EMAIL": author[1],
        "GIT_COMMITTER_DATE": date,
    }  # fmt: skip
    return git(
        root, "-c", "commit.gpgsign=false", "commit", "-a", "--no-verify", "-m", message, env=env
    )


def head_time(root: Path) -> int:
    """When HEAD was committed (epoch seconds)."""
    return int(git(root, "log", "-1", "--format=%ct", "HEAD").strip())


# -- edits ------------------------------------------------------------------------------------


def plan_edit(rng: random.Random, text: str, comment: str) -> tuple[str, str] | None:
    """An edit of ``text`` as an agent makes one: 1 to 3 whole lines that occur once in it
    (the old text) and a change of them (the new text); None when no such lines were found."""
    lines = text.split("\n")
    candidates = [i for i, line in enumerate(lines) if len(line.strip()) >= 3]
    for _ in range(24 if candidates else 0):
        at = rng.choice(candidates)
        block = lines[at : at + rng.choice((1, 1, 1, 2, 2, 3))]
        if any(len(line.strip()) < 3 for line in block):
            continue
        old = "\n".join(block)
        if text.count(old) != 1:
            continue
        new = _changed(rng, block, comment)
        if new != old:
            return old, new
    return None


def _words(rng: random.Random) -> dict[str, str]:
    a, b, c = rng.sample(WORDS, 3)
    return {"a": a, "b": b, "c": c}


def _changed(rng: random.Random, block: list[str], comment: str) -> str:
    """``block`` changed: a number in it, a name in it, a note after it or before it."""
    old = "\n".join(block)
    kind = rng.choice(("number", "number", "name", "note", "note", "trailing"))
    numbers = list(_NUMBER.finditer(old))
    names = list(_WORD.finditer(old))
    if kind == "number" and numbers:
        m = rng.choice(numbers)
        value = int(m.group()) * rng.choice((2, 4, 10)) + rng.randrange(1, 9)
        return old[: m.start()] + str(value) + old[m.end() :]
    if kind == "name" and names:
        m = rng.choice(names)
        return old[: m.start()] + f"{m.group()}_{rng.choice(SUFFIXES)}" + old[m.end() :]
    note = rng.choice(NOTES).format(**_words(rng))
    if kind == "trailing":
        return old + f"  {comment} {note}"
    first = block[0]
    indent = first[: len(first) - len(first.lstrip())]
    return f"{indent}{comment} {note}\n{old}"


@dataclass(frozen=True, slots=True)
class Hunk:
    """One edit's change of a file: the structuredPatch Claude Code records for it and the
    lines it added."""

    patch: list[dict[str, Any]]
    added: tuple[str, ...]

    def side(self) -> str:
        """The hunk's new side: its context and added lines."""
        return "\n".join(x[1:] for x in self.patch[0]["lines"] if x[:1] in (" ", "+"))

    def offset(self) -> int:
        """The line of the new side (from 0) the added lines start on."""
        kept = [x for x in self.patch[0]["lines"] if x[:1] in (" ", "+")]
        return next((k for k, x in enumerate(kept) if x[:1] == "+"), 0)


def hunk_of(before: str, old: str, new: str) -> Hunk:
    """The hunk replacing ``old`` (whole lines, once in ``before``) with ``new``: lines both
    share at either end are context, as a diff has them."""
    lines = before.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    at = before.count("\n", 0, before.index(old))
    olds, news = old.split("\n"), new.split("\n")
    head = 0
    while head < min(len(olds), len(news)) and olds[head] == news[head]:
        head += 1
    tail = 0
    while tail < min(len(olds), len(news)) - head and olds[-1 - tail] == news[-1 - tail]:
        tail += 1
    removed, added = olds[head : len(olds) - tail], news[head : len(news) - tail]
    start = at + head
    before_ctx = lines[max(0, start - CONTEXT) : start]
    after_ctx = lines[start + len(removed) : start + len(removed) + CONTEXT]
    first = max(0, start - CONTEXT) + 1
    body = [
        *(" " + x for x in before_ctx),
        *("-" + x for x in removed),
        *("+" + x for x in added),
        *(" " + x for x in after_ctx),
    ]
    patch = {
        "oldStart": first,
        "oldLines": len(before_ctx) + len(removed) + len(after_ctx),
        "newStart": first,
        "newLines": len(before_ctx) + len(added) + len(after_ctx),
        "lines": body,
    }
    return Hunk([patch], tuple(added))


# -- transcripts ------------------------------------------------------------------------------


class Transcript:
    """One session's entries as Claude Code 2.x writes them; the clock (epoch seconds) moves
    on a few seconds with each entry."""

    def __init__(
        self, rng: random.Random, session_id: str, cwd: Path, branch: str, clock: float
    ) -> None:
        self.rng = rng
        self.session_id = session_id
        self.cwd = cwd
        self.branch = branch
        self.clock = clock
        self.entries: list[dict[str, Any]] = []
        self.parent: str | None = None

    def _id(self, prefix: str, length: int) -> str:
        return prefix + "".join(self.rng.choices("ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz0123456789", k=length))  # fmt: skip

    def _uuid(self) -> str:
        return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))

    def _entry(self, kind: str, pause: float, **fields: Any) -> dict[str, Any]:
        self.clock += pause
        uid = self._uuid()
        entry = {
            "parentUuid": self.parent, "isSidechain": False, "userType": "external",
            "cwd": str(self.cwd), "sessionId": self.session_id, "version": VERSION,
            "gitBranch": self.branch, "type": kind, **fields, "uuid": uid,
            "timestamp": stamp(self.clock),
        }  # fmt: skip
        self.entries.append(entry)
        self.parent = uid
        return entry

    def prompt(self, text: str) -> None:
        """The user's prompt, after the file-history snapshot Claude Code takes before it."""
        message_id = self._uuid()
        self.entries.append({
            "type": "file-history-snapshot", "messageId": message_id, "isSnapshotUpdate": False,
            "snapshot": {"messageId": message_id, "trackedFileBackups": {}, "timestamp": stamp(self.clock)},
        })  # fmt: skip
        self._entry("user", self.rng.uniform(20, 240), message={"role": "user", "content": text})

    def assistant(self, *blocks: dict[str, Any]) -> None:
        """One assistant message, an entry per content block (one message id)."""
        message_id = self._id("msg_01", 22)
        request_id = self._id("req_011", 21)
        for block in blocks:
            message = {
                "model": MODEL, "id": message_id, "type": "message", "role": "assistant",
                "content": [block], "stop_reason": None, "stop_sequence": None,
                "usage": {"input_tokens": self.rng.randrange(4, 900), "cache_creation_input_tokens": self.rng.randrange(0, 9000),
                          "cache_read_input_tokens": self.rng.randrange(9000, 90000), "output_tokens": self.rng.randrange(20, 900),
                          "service_tier": "standard"},
            }  # fmt: skip
            self._entry("assistant", self.rng.uniform(1, 12), message=message, requestId=request_id)

    def say(self, text: str) -> None:
        self.assistant({"type": "text", "text": text})

    def think(self, text: str) -> None:
        signature = self._id("Eu", self.rng.randrange(200, 600))
        self.assistant({"type": "thinking", "thinking": text, "signature": signature})

    def call(self, name: str, tool_input: dict[str, Any]) -> str:
        """An assistant tool call; its id."""
        tool_id = self._id("toolu_01", 22)
        self.assistant({"type": "tool_use", "id": tool_id, "name": name, "input": tool_input})
        return tool_id

    def result(self, tool_id: str, content: str, outcome: object) -> None:
        """The tool's result: the block the model sees, and what the tool recorded."""
        block = {"tool_use_id": tool_id, "type": "tool_result", "content": content}
        self._entry(
            "user",
            self.rng.uniform(0.2, 4),
            message={"role": "user", "content": [block]},
            toolUseResult=outcome,
        )

    def save(self, path: Path) -> int:
        """Write the transcript; its size in bytes."""
        path.parent.mkdir(parents=True, exist_ok=True)
        data = "".join(json.dumps(e, ensure_ascii=False) + "\n" for e in self.entries)
        path.write_text(data, encoding="utf-8")
        return len(data.encode("utf-8"))


def _numbered(lines: Sequence[str], first: int) -> str:
    """Lines as Read and Edit results show them (``cat -n``)."""
    return "\n".join(f"{first + k:>6}\t{line}" for k, line in enumerate(lines))


# -- sessions ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Edited:
    """An edit a session made: the file, the new side of its hunk (context included) and
    the lines it added, from line ``offset`` of that side on."""

    file: str
    side: str
    offset: int
    added: tuple[str, ...]


@dataclass(slots=True)
class Session:
    """A session written to ``transcript``: its edits, and whether it committed them."""

    session_id: str
    transcript: Path
    cwd: Path
    committed: bool
    ended: float
    size: int = 0
    edits: list[Edited] = field(default_factory=list)

    def files(self) -> list[str]:
        """The files it edited, in the order first edited."""
        return list(dict.fromkeys(e.file for e in self.edits))

    def payload(self) -> bytes:
        """What Claude Code writes on the hook's stdin when the session ends."""
        return json.dumps({
            "session_id": self.session_id, "transcript_path": str(self.transcript),
            "cwd": str(self.cwd), "permission_mode": "default",
            "hook_event_name": "SessionEnd", "reason": "prompt_input_exit",
        }).encode()  # fmt: skip


@dataclass(frozen=True, slots=True)
class Shape:
    """How big a session is: prompts, files read per prompt, test output lines."""

    prompts: int
    reads: tuple[int, int]
    read_lines: tuple[int, int]
    test_lines: tuple[int, int]


SHORT = Shape(1, (0, 1), (40, 200), (5, 40))
MEDIUM = Shape(3, (1, 2), (100, 600), (20, 200))
LONG = Shape(7, (2, 4), (600, READ_LIMIT), (200, 1500))


class SessionMaker:
    """Makes sessions in the work tree ``root``, editing its ``files`` (the first ones more
    often) and writing their transcripts under ``out``; the clock starts at ``start``."""

    def __init__(
        self, root: Path, files: Sequence[str], out: Path, rng: random.Random, start: float
    ) -> None:
        if not files:
            raise ValueError(f"{root}: no file an agent could edit")
        self.root = root
        self.files = list(files)
        self.weights = [1 / (k + 1) for k in range(len(self.files))]
        self.out = out
        self.rng = rng
        self.clock = start
        self.branch = git(root, "branch", "--show-current").strip() or "HEAD"

    def make(self, commit: bool) -> Session:
        """A new session, its edits in the work tree (committed by it when ``commit``)."""
        rng = self.rng
        shape = rng.choices((SHORT, MEDIUM, LONG), weights=(70, 25, 5))[0]
        prompts = rng.randint(1, shape.prompts)
        edits = [1] + [0] * (prompts - 1)
        for _ in range(rng.randint(1, 6) - 1):
            edits[rng.randrange(prompts)] += 1
        chosen = self._chosen(min(rng.choice((1, 1, 2, 2, 3)), sum(edits), len(self.files)))
        session_id = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        t = Transcript(rng, session_id, self.root, self.branch, self.clock)
        session = Session(session_id, self.out / f"{session_id}.jsonl", self.root, commit, 0.0)
        for turn, count in enumerate(edits):
            self._turn(t, session, shape, chosen, count, first=turn == 0)
        session.committed = commit and bool(session.edits)
        if session.committed:
            self._commit(t, session)
        t.say(self._reply(session))
        session.ended = t.clock
        session.size = t.save(session.transcript)
        self.clock = t.clock + rng.uniform(120, 5400)
        return session

    def commit_later(self, session: Session) -> None:
        """The human's commit of what ``session`` left in the work tree, after the hook."""
        if not session.edits:
            return
        when = session.ended + self.rng.uniform(300, 5400)
        words = _words(self.rng)
        commit_all(self.root, "{a}: bound the {b} by the {c}".format(**words), when, self._author())
        self.clock = max(self.clock, when + self.rng.uniform(60, 1800))

    def _author(self) -> tuple[str, str]:
        return AUTHORS[self.rng.randrange(len(AUTHORS))]

    def _chosen(self, count: int) -> list[str]:
        chosen: list[str] = []
        while len(chosen) < count:
            pick = self.rng.choices(self.files, weights=self.weights)[0]
            if pick not in chosen:
                chosen.append(pick)
        return chosen

    def _fill(self, template: str, file: str, **more: object) -> str:
        return template.format(file=file, **_words(self.rng), **more)

    def _turn(
        self, t: Transcript, session: Session, shape: Shape, chosen: list[str], edits: int,
        *, first: bool,
    ) -> None:  # fmt: skip
        rng = self.rng
        main = chosen[0] if first else rng.choice(chosen)
        t.prompt(self._fill(rng.choice(PROMPTS if first else FOLLOW_UPS), main))
        if rng.random() < 0.4:
            t.think(self._fill(rng.choice(THOUGHTS), main))
        for _ in range(rng.randint(*shape.reads)):
            self._read(t, rng.choice(chosen), shape)
        if rng.random() < 0.3:
            self._search(t, main)
        for _ in range(edits):
            self._edit(t, session, rng.choice(chosen))
        if rng.random() < 0.5:
            self._tests(t, shape)
        if not first or rng.random() < 0.3:
            t.say(self._fill(rng.choice(REASONS), main, line=rng.randrange(1, 400)))

    def _read(self, t: Transcript, rel: str, shape: Shape) -> None:
        path = self.root / rel
        lines = path.read_text(encoding="utf-8").split("\n")
        if lines[-1] == "":
            lines.pop()
        count = min(len(lines), self.rng.randint(*shape.read_lines))
        first = self.rng.randrange(0, len(lines) - count + 1)
        tool_input: dict[str, Any] = {"file_path": str(path)}
        if count < len(lines):
            tool_input |= {"offset": first + 1, "limit": count}
        tool_id = t.call("Read", tool_input)
        shown = lines[first : first + count]
        t.result(tool_id, _numbered(shown, first + 1), {
            "type": "text",
            "file": {"filePath": str(path), "content": "\n".join(shown), "numLines": count,
                     "startLine": first + 1, "totalLines": len(lines)},
        })  # fmt: skip

    def _search(self, t: Transcript, rel: str) -> None:
        lines = (self.root / rel).read_text(encoding="utf-8").split("\n")
        word = self.rng.choice(_WORD.findall("\n".join(lines[:400])) or ["fn"])
        found = [f"{rel}:{n + 1}:{line}" for n, line in enumerate(lines) if word in line][:60]
        command = f"rg -n '{word}' {rel.rsplit('/', 1)[0] if '/' in rel else '.'}"
        tool_id = t.call("Bash", {"command": command, "description": f"Find uses of {word}"})
        out = "\n".join(found)
        t.result(tool_id, out, {"stdout": out, "stderr": "", "interrupted": False, "isImage": False})  # fmt: skip

    def _tests(self, t: Transcript, shape: Shape) -> None:
        rng = self.rng
        count = rng.randint(*shape.test_lines)
        tool_id = t.call("Bash", {"command": "make test", "description": "Run the tests"})
        names = (f"{rng.choice(WORDS)}::{rng.choice(WORDS)}_{rng.choice(WORDS)}" for _ in range(count))  # fmt: skip
        out = "\n".join(f"test {name} ... ok" for name in names)
        out += f"\n\ntest result: ok. {count} passed; 0 failed; finished in {rng.uniform(0.5, 40):.2f}s"
        t.result(tool_id, out, {"stdout": out, "stderr": "", "interrupted": False, "isImage": False})  # fmt: skip

    def _edit(self, t: Transcript, session: Session, rel: str) -> None:
        """An Edit call on ``rel`` with its result, made in the work tree (another of the
        session's files when no lines of ``rel`` can be edited)."""
        for candidate in [rel, *(f for f in session.files() if f != rel), *self.files]:
            path = self.root / candidate
            before = path.read_text(encoding="utf-8")
            planned = plan_edit(self.rng, before, COMMENTS[path.suffix.lower()])
            if planned is not None:
                break
        else:
            return
        old, new = planned
        hunk = hunk_of(before, old, new)
        line = before.count("\n", 0, before.index(old)) + 1
        t.say(self._fill(self.rng.choice(REASONS), candidate, line=line))
        tool_id = t.call(
            "Edit",
            {"file_path": str(path), "old_string": old, "new_string": new, "replace_all": False},
        )
        after = before.replace(old, new, 1)
        path.write_text(after, encoding="utf-8")
        shown = after.split("\n")[max(0, line - 5) : line + 5 + new.count("\n")]
        t.result(
            tool_id,
            f"The file {path} has been updated. Here's the result of running `cat -n` on a "
            f"snippet of the edited file:\n{_numbered(shown, max(1, line - 4))}",
            {
                "filePath": str(path), "oldString": old, "newString": new,
                "originalFile": before, "structuredPatch": hunk.patch,
                "userModified": False, "replaceAll": False,
            },
        )  # fmt: skip
        session.edits.append(Edited(candidate, hunk.side(), hunk.offset(), hunk.added))

    def _commit(self, t: Transcript, session: Session) -> None:
        """The agent commits its work (Bash ``git commit``), as told to."""
        message = self._fill("{a}: {b} before {c} in {file}", session.files()[0])
        command = f'git commit -a -m "{message}"'
        tool_id = t.call("Bash", {"command": command, "description": "Commit the change"})
        out = commit_all(self.root, message, t.clock, self._author())
        t.result(tool_id, out, {"stdout": out, "stderr": "", "interrupted": False, "isImage": False})  # fmt: skip

    def _reply(self, session: Session) -> str:
        files = ", ".join(session.files()) or "nothing"
        template = self.rng.choice(REPLIES)
        return self._fill(template, files.split(", ")[0], files=files, edits=len(session.edits))


def sessions_dir(base: Path, cwd: Path) -> Path:
    """Where Claude Code keeps the transcripts of sessions in ``cwd``, under ``base``."""
    return base / re.sub(r"[^A-Za-z0-9]", "-", str(cwd))


def first_clock(root: Path) -> float:
    """When the first session starts: an hour after HEAD, no earlier than a day ago."""
    return float(max(head_time(root) + 3600, int(time.time()) // 3600 * 3600 - 86400))


# -- the figure -------------------------------------------------------------------------------


@contextlib.contextmanager
def hook_environment(cache: Path, config: Path) -> Iterator[None]:
    """The environment a hook's worker sees here: no ``POIMEN_*`` setting but its cache
    directory (log, locks, blame cache) and a config file that does not exist."""
    saved = dict(os.environ)
    for key in [k for k in os.environ if k.startswith("POIMEN_")]:
        del os.environ[key]
    os.environ.update(POIMEN_CACHE_DIR=str(cache), POIMEN_CONFIG=str(config))
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def ingest_session(session: Session, dsn: str, project: str = PROJECT) -> float:
    """Seconds the hook's worker takes to ingest ``session`` into ``project``: ``run_hook``
    with the SessionEnd payload and ``wait=True``, in this process."""
    from poimen_memory.hooks import run_hook

    raw = session.payload()
    started = time.perf_counter()
    run_hook(raw, project=project, dsn=dsn, wait=True)
    return time.perf_counter() - started


def logged(session: Session) -> dict[str, Any]:
    """The hook log's entry of the run that ingested ``session``; AssertionError when the run
    did not end well."""
    from poimen_memory.hooks import read_log

    entries = read_log(1)
    entry = entries[-1] if entries else {}
    if entry.get("session") != session.session_id or entry.get("outcome") != "ok":
        raise AssertionError(f"the hook did not ingest session {session.session_id}: {entry}")
    return entry


def _blame_all(root: Path, files: Sequence[str]) -> None:
    from poimen_memory.gitio import BlameCache, Blamer, GitRepo
    from poimen_memory.settings import load_settings

    repo = GitRepo.discover(root)
    cache = BlameCache(load_settings().blame_cache_path)
    try:
        blamer = Blamer(repo, cache)
        for path in files:
            blamer.blame_file(path)
    finally:
        cache.close()
        repo.close()


def warm_blames(root: Path, files: Sequence[str]) -> float:
    """Blame ``files`` at HEAD into the blame cache the hook uses (two at a time); seconds
    taken."""
    started = time.perf_counter()
    with ThreadPoolExecutor(2) as pool:
        list(pool.map(lambda part: _blame_all(root, part), (files[0::2], files[1::2])))
    return time.perf_counter() - started


def _objects(out: bytes, names: Sequence[str]) -> dict[str, bytes | None]:
    """``git cat-file --batch`` output for ``names``: each object's content (None: missing)."""
    found: dict[str, bytes | None] = {}
    at = 0
    for name in names:
        end = out.index(b"\n", at)
        header = out[at:end].split()
        at = end + 1
        if header[-1] == b"missing":
            found[name] = None
            continue
        size = int(header[2])
        found[name] = out[at : at + size]
        at += size + 1
    return found


def _ranges(text: bytes | None, edits: Sequence[Edited]) -> list[tuple[int, int]]:
    """Where the lines ``edits`` added are in ``text`` (first and last line): each edit's
    new side looked for once, else its added lines alone when they occur once."""
    if text is None:
        return []
    whole = text.decode("utf-8", "surrogateescape")
    out = []
    for edit in edits:
        if not edit.added:
            continue
        block = "\n".join(edit.added)
        at, offset = whole.find(edit.side), edit.offset
        if at < 0 or whole.find(edit.side, at + 1) >= 0:
            at, offset = whole.find(block), 0
            if not block or at < 0 or whole.find(block, at + 1) >= 0:
                continue
        first = whole.count("\n", 0, at) + 1 + offset
        out.append((first, first + len(edit.added) - 1))
    return out


class Floor:
    """What one session's answer needs at least, timed: its transcript's lines parsed with
    json.loads, and the git processes that read what ingest must read."""

    def __init__(self, root: Path) -> None:
        from poimen_memory.gitio import GitRepo
        from poimen_memory.gitio.patches import LOG_ARGS

        repo = GitRepo.discover(root)
        self.root = root
        self.argv = repo.runner.argv
        self.log_args = LOG_ARGS
        repo.close()

    def _run(self, args: Sequence[str], stdin: bytes = b"") -> bytes:
        return subprocess.run(
            self.argv(args), cwd=self.root, input=stdin, capture_output=True, check=True
        ).stdout

    def parse(self, session: Session) -> float:
        started = time.perf_counter()
        with session.transcript.open("rb") as lines:
            for line in lines:
                json.loads(line)
        return time.perf_counter() - started

    def git(self, session: Session) -> float:
        started = time.perf_counter()
        files = session.files()
        names = ["HEAD", *(f"HEAD:{f}" for f in files)]
        blobs = _objects(self._run(["cat-file", "--batch"], "".join(f"{n}\n" for n in names).encode()), names)  # fmt: skip
        if not session.committed:
            for f in files:
                (self.root / f).read_bytes()
            return time.perf_counter() - started
        commits: set[bytes] = set()
        for f in files:
            ranges = _ranges(blobs[f"HEAD:{f}"], [e for e in session.edits if e.file == f])
            if ranges:
                lines = [f"-L{a},{b}" for a, b in ranges]
                out = self._run(["blame", "--porcelain", *lines, "HEAD", "--", f])
                commits.update(_PORCELAIN.findall(out))
        if commits:
            self._run(self.log_args, b"".join(c + b"\n" for c in sorted(commits)))
        return time.perf_counter() - started


def _dump_table(dsn: str, table: str) -> tuple[list[str], bytes, int]:
    """One table's rows as binary COPY data, as floors.dump_tables has them."""
    with psycopg.connect(dsn) as conn:
        columns = floors.stored_columns(conn, table)
        cols = sql.SQL(", ").join(map(sql.Identifier, columns))
        statement = sql.SQL("COPY {} ({}) TO STDOUT (FORMAT binary)").format(
            sql.Identifier(table), cols
        )
        with conn.cursor() as cur, cur.copy(statement) as copy:
            data = b"".join(bytes(chunk) for chunk in copy)
        row = conn.execute(sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(table)))
        count = row.fetchone()
    assert count is not None
    return columns, data, int(count[0])


def session_floor(dsn: str, runs: int = 30) -> float:
    """Median seconds of what any process writing one session's rows pays besides the rows:
    a connection of its own and one transaction that writes (one row, so that its commit
    waits for the write-ahead log as a session's does), then closing."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS n_floor_commit (x int)")
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        with psycopg.connect(dsn) as conn:  # one transaction, committed on leaving
            conn.execute("INSERT INTO n_floor_commit VALUES (1)")
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def copy_floor(bench: Bench, dsn: str) -> tuple[float, float, dict[str, int]]:
    """COPY of every row the hook wrote into a fresh migrated database (the median of a few
    loads, each into the emptied tables); a session's own connection and commit there
    (session_floor); the rows per table."""
    dump = floors.dump_tables(dsn) | {"pending_anchor": _dump_table(dsn, "pending_anchor")}
    target = bench.fresh_db("n_copy")
    try:
        loads = []
        for _ in range(bench.repeats):
            floors.empty_tables(target)  # pending_anchor too: its rows refer to memory_node
            started = time.perf_counter()
            floors.copy_tables(target, dump)
            loads.append(time.perf_counter() - started)
        written = {table: rows for table, (_, _, rows) in dump.items()}
        copied = {t: r for t, (_, _, r) in floors.dump_tables(target).items()}
        copied["pending_anchor"] = _dump_table(target, "pending_anchor")[2]
        assert copied == written, f"COPY loaded {copied}, the hook wrote {written}"
        each = session_floor(target)
    finally:
        bench.drop_db(str(conninfo.conninfo_to_dict(target)["dbname"]))
    return statistics.median(loads), each, written


def worker_start(bench: Bench, runs: int = 3) -> float:
    """Median seconds of a hook worker's start with nothing to do (``mem hooks run
    claude-code --wait`` on an empty payload: Python, mem's imports, one log line)."""
    argv = [sys.executable, "-m", "poimen_memory.cli", "hooks", "run", "claude-code", "--wait"]
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(argv, input=b"", capture_output=True, check=True, cwd=bench.work)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


@dataclass(slots=True)
class Run:
    """What the sessions cost, one entry per session, and what the hook said it did."""

    ours: list[float] = field(default_factory=list)
    parse: list[float] = field(default_factory=list)
    git: list[float] = field(default_factory=list)
    sizes: list[int] = field(default_factory=list)
    committed: int = 0
    edits: int = 0
    seconds: float = 0.0  # the whole loop: making, committing, ingesting, floors
    logged: dict[str, int] = field(
        default_factory=lambda: {"nodes": 0, "anchors": 0, "pending_edits": 0, "bad_records": 0}
    )

    def floor_each(self, commit: float = 0.0) -> list[float]:
        """Each session's floor: its transcript parsed, its git, and ``commit`` (a session's
        own connection and transaction)."""
        return [p + g + commit for p, g in zip(self.parse, self.git, strict=True)]


def run_sessions(maker: SessionMaker, count: int, dsn: str, rng: random.Random) -> Run:
    """Make ``count`` sessions and ingest each through the hook as it ends (the floor timed
    before the hook for one session, after it for the next); an uncommitted session's work
    is committed once the hook has run."""
    run = Run()
    floor = Floor(maker.root)
    started = time.perf_counter()
    for index in range(count):
        session = maker.make(commit=rng.random() < COMMITTED)
        if index % 2:
            run.parse.append(floor.parse(session))
            run.git.append(floor.git(session))
        run.ours.append(ingest_session(session, dsn))
        entry = logged(session)
        if not index % 2:
            run.parse.append(floor.parse(session))
            run.git.append(floor.git(session))
        if not session.committed:
            maker.commit_later(session)
        run.sizes.append(session.size)
        run.committed += session.committed
        run.edits += len(session.edits)
        for key in run.logged:
            run.logged[key] += int(entry.get(key, 0))
    run.seconds = time.perf_counter() - started
    return run


def session_count(bench: Bench) -> int:
    """How many sessions to make: ``POIMEN_BENCH_SESSIONS_COUNT`` when set, else SESSIONS
    (QUICK_SESSIONS with --quick)."""
    named = os.environ.get(COUNT_ENV, "")
    if named:
        if not named.isdigit() or int(named) < 20:
            raise SystemExit(f"{COUNT_ENV}: expected a whole number of 20 or more, got {named!r}")
        return int(named)
    return QUICK_SESSIONS if bench.size is QUICK else SESSIONS


def fig_n(bench: Bench) -> None:
    """Claude Code sessions ingested through the hook: sessions/s and p95 per session."""
    count = session_count(bench)
    source = source_repo(bench.repo)
    root = clone_repo(source, bench.work / "sessions-repo")
    rng = random.Random(SEED)
    files = editable_files(root)
    files = rng.sample(files, min(WORKING_SET, len(files)))
    cache, transcripts = bench.work / "n-cache", bench.work / "n-transcripts"
    for leftover in (cache, transcripts):
        shutil.rmtree(leftover, ignore_errors=True)
    maker = SessionMaker(
        root, files, sessions_dir(transcripts, root), random.Random(SEED + 1), first_clock(root)
    )
    dsn = bench.fresh_db("n_ingest")
    try:
        with hook_environment(cache, bench.work / "no-config.toml"):
            warm = warm_blames(root, files)
            run = run_sessions(maker, count, dsn, random.Random(SEED + 2))
            start = worker_start(bench)
            blames = (cache / "blame.sqlite3").stat().st_size
        copy, commit, written = copy_floor(bench, dsn)
    finally:
        bench.drop_db(str(conninfo.conninfo_to_dict(dsn)["dbname"]))
        for scratch in (cache, transcripts):  # each some hundreds of MB
            shutil.rmtree(scratch, ignore_errors=True)
    assert written["git_anchor"], f"no session's edits were anchored: {written}"
    assert written["pending_anchor"], f"no session's edits waited for their commit: {written}"
    where = "the bench corpus" if source == bench.repo else source.name
    setup = (
        f"the blame cache warmed untimed ({len(files)} files blamed at HEAD in {warm:.0f}s),"
        f" {blames / 2**20:.0f} MB at the end;"
        f" a worker's own start (Python, mem's imports) adds {start * 1000:.0f} ms a session,"
        " not counted"
    )
    _throughput(bench, run, where, copy, commit, written, setup)
    _latency(bench, run, commit)


def _sessions(bench: Bench, run: Run, where: str) -> str:
    """What the sessions were, and why so many, for a figure's detail."""
    n = len(run.ours)
    kb = sorted(s / 1024 for s in run.sizes)
    text = (
        f"{n} Claude Code sessions in a clone of {where} ({run.edits} Edit calls; transcripts"
        f" {kb[0]:.0f} KB to {kb[-1] / 1024:.1f} MB, median {statistics.median(kb):.0f} KB),"
        f" {run.committed} committed before the hook, the others after it"
        f" ({run.logged['pending_edits']} edits waited)"
    )
    if n >= ASKED or bench.size is QUICK:
        return text
    if os.environ.get(COUNT_ENV):
        return f"{text} ({COUNT_ENV}={n})"
    minutes = ASKED * run.seconds / n / 60
    over = ", over the 4 this figure may take" if minutes > 4 else ""
    return (
        f"{text}; {n} sessions, not {ASKED:,}: making, committing, ingesting and timing the"
        f" floor of one takes {run.seconds / n:.2f}s here, so {ASKED:,} would take"
        f" {minutes:.1f} min{over} ({COUNT_ENV}={ASKED} makes them all)"
    )


def _throughput(
    bench: Bench,
    run: Run,
    where: str,
    copy: float,
    commit: float,
    written: dict[str, int],
    setup: str,
) -> None:
    n = len(run.ours)
    ours, parse, git_s = sum(run.ours), sum(run.parse), sum(run.git)
    commits = n * commit
    rows = ", ".join(f"{table} {count}" for table, count in written.items() if count)
    # Throughput ratio: ours per second / floor per second = floor time / our time.
    bench.add(
        "n. hook ingest, sessions/s vs COPY + commit + parse + git",
        n / ours,
        n / (copy + commits + parse + git_s),
        ">= 0.5x",
        lambda r: r >= 0.5,
        "sessions/s",
        detail=f"{_sessions(bench, run, where)}; run_hook(wait=True) in process, what the"
        f" detached worker of `mem hooks run claude-code` runs: {ours:.1f}s in all,"
        f" {run.logged['nodes']} nodes, {run.logged['anchors']} anchors,"
        f" {run.logged['bad_records']} bad records; the rows written ({rows}) by COPY"
        f" {copy:.2f}s + a connection and a commit per session {commits:.1f}s"
        f" ({commit * 1000:.1f} ms each) + json.loads of the transcripts {parse:.1f}s + git"
        f" {git_s:.1f}s; {setup}",
    )


def _latency(bench: Bench, run: Run, commit: float) -> None:
    floor = run.floor_each(commit)
    ms = {
        "ours": [
            x * 1000 for x in (_pct(run.ours, 95), statistics.median(run.ours), max(run.ours))
        ],
        "floor": [x * 1000 for x in (_pct(floor, 95), statistics.median(floor), max(floor))],
    }
    bench.add(
        "n. hook ingest p95 per session vs parse + git + commit p95",
        _pct(run.ours, 95),
        _pct(floor, 95),
        "<= 2x",
        lambda r: r <= 2.0,
        detail="p95 {:.0f} ms, p50 {:.0f} ms, max {:.0f} ms; ".format(*ms["ours"])
        + "the floor per session (json.loads of its transcript; git cat-file --batch of HEAD"
        " and its files, then blame -L of its lines HEAD holds and log -p of their commits; a"
        " connection and a commit, {:.1f} ms): p95 {:.0f} ms, p50 {:.0f} ms, max {:.0f} ms;"
        " writing the rows themselves is in ours only".format(commit * 1000, *ms["floor"]),
    )
