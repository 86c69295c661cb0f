"""Hostile repositories, and every flow a user runs on one, recording all that a user sees.

Programs the configuration names are scripts that create a marker file; the flows are the real
ones: the CLI (as a process, its memory measured), the server over stdio, HTTP on the ASGI
app, and ingest then lookup in process as ``mem demo`` does it.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from bench.lspclient import LspClient, LspError

from poimen_memory.domain import ProjectId
from poimen_memory.http import create_app
from poimen_memory.ingest import IngestOptions, ingest
from poimen_memory.lookup import HoverRequest, build_service
from poimen_memory.operations import Services
from poimen_memory.render import render_hover
from poimen_memory.store import Store

from ..gitrepo import FixtureRepo
from .conftest import Faults

BUFFER = "src/kong/buffer.rs"
MEMORY_LIMIT = 2 << 30  # address space of each process started here: a runaway dies early
PEAK_BOUND = 300 << 20  # the peak resident memory any flow may reach

# Each program below, when run, creates <markers>/<name>; filters and textconv pass data on.
_PASS_THROUGH = ("textconv", "clean", "smudge", "pager")
_HOOKS = (
    "pre-commit", "post-commit", "post-checkout", "post-merge", "post-rewrite",
    "post-index-change", "reference-transaction", "pre-auto-gc", "fsmonitor-watchman",
    "push-to-checkout", "pre-push", "sendemail-validate", "p4-pre-submit",
)  # fmt: skip


def _program(bin_dir: Path, markers: Path, name: str) -> str:
    script = bin_dir / name
    rest = 'exec cat "$@"' if name.startswith(_PASS_THROUGH) else "exit 1"
    script.write_text(f'#!/bin/sh\ntouch "{markers}/{name}"\n{rest}\n')
    script.chmod(0o755)
    return str(script)


def _fake_signature(kind: str) -> str:
    return {
        "pgp": "-----BEGIN PGP SIGNATURE-----\n\niQEzBAABCAAdFiEE\n-----END PGP SIGNATURE-----",
        "ssh": "-----BEGIN SSH SIGNATURE-----\nU1NIU0lHAAAAAQ\n-----END SSH SIGNATURE-----",
        "x509": "-----BEGIN SIGNED MESSAGE-----\nMIAGCSqGSIb3\n-----END SIGNED MESSAGE-----",
    }[kind]


def add_signed_commits(repo: FixtureRepo) -> None:
    """Three empty commits on top of HEAD, signed (in form) with OpenPGP, SSH and X.509: with
    ``log.showSignature`` a git that shows them runs gpg.program, gpg.ssh.program or
    gpg.x509.program to verify them."""
    for kind in ("pgp", "ssh", "x509"):
        tree = repo.git("rev-parse", "HEAD^{tree}").strip()
        parent = repo.git("rev-parse", "HEAD").strip()
        repo.clock += 3600
        who = f"Bob Jones <bob@org.test> {repo.clock} +0000"
        signature = "\n ".join(_fake_signature(kind).splitlines())
        text = (
            f"tree {tree}\nparent {parent}\nauthor {who}\ncommitter {who}\n"
            f"gpgsig {signature}\n\nSigned ({kind})\n"
        )
        path = repo.root.parent / f"commit-{kind}.txt"
        path.write_text(text)
        sha = repo.git("hash-object", "-t", "commit", "-w", str(path)).strip()
        repo.git("update-ref", "HEAD", sha)
        repo.commits[f"signed-{kind}"] = sha


def arm(repo: FixtureRepo, markers: Path) -> None:
    """Set every configuration option that names a program to one that leaves a marker; the
    attributes that select the drivers are committed (``.gitattributes``) and local
    (``.git/info/attributes``). Call it last: after this, the test's own git runs them too."""
    bin_dir = markers.parent / f"{markers.name}-bin"
    bin_dir.mkdir()
    markers.mkdir(exist_ok=True)
    hooks = bin_dir / "hooks"
    hooks.mkdir()
    for hook in _HOOKS:
        (hooks / hook).write_text(f'#!/bin/sh\ntouch "{markers}/hook-{hook}"\n')
        (hooks / hook).chmod(0o755)

    def program(name: str) -> str:
        return _program(bin_dir, markers, name)

    settings = [
        ("log.showSignature", "true"),
        ("gpg.program", program("gpg")),
        ("gpg.ssh.program", program("gpg-ssh")),
        ("gpg.x509.program", program("gpg-x509")),
        ("core.fsmonitor", program("fsmonitor")),
        ("core.hooksPath", str(hooks)),
        ("core.sshCommand", program("ssh-command")),
        ("core.gitProxy", program("git-proxy")),
        ("core.askPass", program("askpass")),
        ("core.alternateRefsCommand", program("alternate-refs")),
        ("credential.helper", "!" + program("credential-helper")),
        ("core.pager", program("pager-core")),
        ("pager.blame", program("pager-blame")),
        ("pager.log", program("pager-log")),
        ("core.editor", program("editor")),
        ("sequence.editor", program("sequence-editor")),
        ("diff.external", program("diff-external")),
        ("uploadpack.packObjectsHook", program("pack-objects-hook")),
        ("remote.origin.uploadpack", program("uploadpack")),
        ("remote.origin.receivepack", program("receivepack")),
        ("protocol.allow", "always"),
    ]
    for driver in ("evil", "evil2"):
        settings += [
            (f"diff.{driver}.textconv", program(f"textconv-{driver}")),
            (f"diff.{driver}.command", program(f"diff-command-{driver}")),
            (f"filter.{driver}.clean", program(f"clean-{driver}")),
            (f"filter.{driver}.smudge", program(f"smudge-{driver}")),
            (f"filter.{driver}.process", program(f"process-{driver}")),
            (f"filter.{driver}.required", "true"),
            (f"merge.{driver}.driver", program(f"merge-{driver}") + " %O %A %B"),
        ]
    info = repo.root / ".git" / "info"
    info.mkdir(exist_ok=True)
    (info / "attributes").write_text("*.rs diff=evil2 filter=evil2 merge=evil2\n")
    for key, value in settings:
        repo.git("config", key, value)


def commit_attributes(repo: FixtureRepo) -> None:
    """A committed ``.gitattributes`` that puts every file under the ``evil`` drivers."""
    repo.write(".gitattributes", "* diff=evil filter=evil merge=evil\n")
    repo.commit("attributes", "Attributes", ("Bob Jones", "bob@org.test"))


# -- the flows --------------------------------------------------------------------------------


def memories(repo: FixtureRepo) -> list[dict[str, Any]]:
    """Evidence at buffer.rs:42 (through blame), handler.rs:10, and lines named at a commit."""
    return [
        {"type": "node", "id": "m1", "level": "L1", "query_id": "q-buffer", "text": "Kong body buffer raised to 16MB.", "created_at": "2026-08-20T08:00:00Z"},
        {"type": "node", "id": "e1", "level": "L0", "query_id": "q-buffer", "text": "Raised BODY_BUFFER from 8MB to 16MB.", "parents": ["m1"], "anchors": [{"file": BUFFER, "line": 42}], "created_at": "2026-08-20T07:00:00Z"},
        {"type": "node", "id": "e2", "level": "L0", "query_id": "q-large", "text": "Handler streams bodies larger than BODY_BUFFER.", "anchors": [{"file": "src/kong/handler.rs", "line": 10}], "created_at": "2026-08-20T07:10:00Z"},
        {"type": "node", "id": "e3", "level": "L0", "query_id": "q-initial", "text": "The buffer module as first written.", "anchors": [{"file": BUFFER, "lines": [40, 44], "commit": repo.commits["initial"][:10]}], "created_at": "2026-08-20T07:20:00Z"},
    ]  # fmt: skip


@dataclass
class Seen:
    """All that the flows showed a user, by flow, and what they cost."""

    texts: dict[str, list[str]] = field(default_factory=dict)
    hover: str = ""
    peaks: dict[str, int] = field(default_factory=dict)  # flow -> peak resident bytes
    seconds: dict[str, float] = field(default_factory=dict)  # flow -> wall time

    def add(self, flow: str, *texts: Any) -> None:
        shown = (t if isinstance(t, str) else json.dumps(t, default=str) for t in texts)
        self.texts.setdefault(flow, []).extend(shown)

    def of(self, flow: str) -> str:
        return "\n".join(self.texts.get(flow, []))

    def joined(self, but: tuple[str, ...] = ()) -> str:
        return "\n".join(self.of(flow) for flow in self.texts if flow not in but)


# Prefixes of a process started here: its address space capped, so a runaway dies early.
_LIMIT = f"import resource, sys; resource.setrlimit(resource.RLIMIT_AS, ({MEMORY_LIMIT},) * 2)\n"
_EXEC = _LIMIT + "import os; os.execvp(sys.argv[1], sys.argv[1:])\n"
# ...and its peak resident memory, its git processes' included, written to argv[1].
_MEASURE = _LIMIT + (
    "import subprocess\n"
    "code = subprocess.call(sys.argv[2:])\n"
    "with open(sys.argv[1], 'w') as out:\n"
    "    out.write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024))\n"
    "sys.exit(code)\n"
)


@dataclass
class Flows:
    """Runs the flows on the work tree ``root`` for ``project``, recording into ``seen``."""

    faults: Faults
    repo: FixtureRepo
    project: str
    seen: Seen = field(default_factory=Seen)

    @property
    def root(self) -> Path:
        return self.repo.root

    def mem(self, name: str, *args: str) -> subprocess.CompletedProcess[str]:
        """``mem`` run in the work tree, memory-capped; its peak (git's included) recorded."""
        peak = self.root.parent / f"peak-{uuid.uuid4().hex[:8]}"
        started = time.monotonic()
        done = subprocess.run(
            [
                sys.executable,
                "-c",
                _MEASURE,
                str(peak),
                sys.executable,
                "-m",
                "poimen_memory.cli",
                *args,
            ],
            cwd=self.root,
            env={**self.faults.env, "POIMEN_CACHE_DIR": str(self.root.parent / "cli-cache")},
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        self.seen.seconds[name] = time.monotonic() - started
        self.seen.peaks[name] = int(peak.read_text() or 0) if peak.exists() else 0
        self.seen.add(name, done.stdout, done.stderr)
        return done

    def cli(self, memories_file: Path, author: str) -> None:
        """mem ingest, by-git (a line and the file), by-commit and by-author."""
        repo, project = ["--repo", str(self.root)], ["--project", self.project]
        self.mem("ingest", "ingest", str(memories_file), *repo, *project)
        self.mem("by-git", "by-git", f"{BUFFER}:42", *repo, *project, "--json")
        self.mem("by-git-file", "by-git", BUFFER, *repo, *project, "--json")
        self.mem("by-commit", "by-commit", self.repo.commits["abc123"][:10], *repo, *project)
        self.mem("by-author", "by-author", author, *repo, *project, "--json")

    def editor(self, author: str) -> None:
        """The server over stdio: hover, code lens (and resolve), the lookup commands."""
        log = self.root.parent / f"server-{uuid.uuid4().hex[:8]}.log"
        client = LspClient(
            [sys.executable, "-c", _EXEC, sys.executable, "-m", "poimen_memory.cli", "lsp"],
            {**self.faults.env, "POIMEN_CACHE_DIR": str(self.root.parent / "lsp-cache")},
            self.root,
            log,
        )
        try:
            started = time.monotonic()
            client.initialize(
                self.root, {"poimenMemory": {"dsn": self.faults.dsn, "project": self.project}}
            )
            buffer = self.root / BUFFER
            uri = client.open(buffer, buffer.read_text())
            hover = client.request("textDocument/hover", _position(uri, 42), timeout=30)
            self.seen.hover = "" if hover is None else str(hover["contents"]["value"])
            self.seen.add("hover", self.seen.hover)
            self.seen.seconds["hover"] = time.monotonic() - started
            started = time.monotonic()
            lenses = client.request("textDocument/codeLens", {"textDocument": {"uri": uri}}, 30)
            self.seen.seconds["lens"] = time.monotonic() - started
            self.seen.add("lens", lenses)
            for lens in lenses or []:
                self.seen.add("lens", client.request("codeLens/resolve", lens, timeout=30))
            for command, argument in (
                ("mem.byGit", {"uri": uri, "line": 42}),
                ("mem.byCommit", {"commit_sha": self.repo.commits["abc123"][:10]}),
                ("mem.byAuthor", {"author": author}),
            ):
                try:
                    self.seen.add(command, _command(client, command, argument))
                except LspError as exc:
                    self.seen.add(command, str(exc))
            self.seen.peaks["server"] = _peak(client.proc.pid)
            assert client.proc.poll() is None, "the server died"
        finally:
            client.close()
            self.seen.add("notifications", list(client.notifications))
            self.seen.add("server log", log.read_text("utf-8", "replace"))

    def in_process(self, memories_file: Path) -> None:
        """As ``mem demo`` does it: ingest, then the hover, then HTTP on the same service."""
        cache = self.root.parent / f"demo-{uuid.uuid4().hex[:8]}.db"
        project = ProjectId(self.project)
        with Store(self.faults.dsn, max_size=2) as store:
            try:
                options = IngestOptions(project, self.root, cache_path=cache)
                summary = ingest([memories_file], store, options)
                self.seen.add("demo", str(summary))
                service = build_service(store, [self.root], project, cache_path=cache)
            except Exception as exc:  # what `mem demo` or `mem http` would print, and stop
                self.seen.add("demo", str(exc))
                service = build_service(store, [], project, cache_path=cache)
            else:
                found = service.hover(HoverRequest(file=str(self.root / BUFFER), line=42))
                self.seen.add("demo", render_hover(found, 400, markdown=False) if found else "")
            self.seen.add(
                "http", *asyncio.run(_http(create_app(Services.over(service)), self.repo))
            )


def _position(uri: str, line: int) -> dict[str, Any]:
    return {"textDocument": {"uri": uri}, "position": {"line": line - 1, "character": 0}}


def _command(client: LspClient, command: str, argument: dict[str, Any]) -> Any:
    params = {"command": command, "arguments": [argument]}
    return client.request("workspace/executeCommand", params, timeout=30)


def _peak(pid: int) -> int:
    """The peak resident memory of a running process."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0


async def _http(app: Any, repo: FixtureRepo) -> list[str]:
    transport = httpx.ASGITransport(app=app)
    bodies = []
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
        for path, body in (
            ("/memory/nodes/by-git", {"file": BUFFER, "line": 42}),
            ("/memory/nodes/by-git", {"file": BUFFER}),
            ("/memory/nodes/by-commit", {"commit_sha": repo.commits["abc123"][:10]}),
            ("/memory/nodes/by-author", {"author": "alice@org.test"}),
        ):
            response = await http.post(path, json=body)
            assert response.status_code < 500 or response.status_code == 503, response.text
            bodies.append(response.text)
    return bodies
