"""Real git repositories for tests, built in tmp_path with known authors, dates and history."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

ALICE = ("Alice Smith", "alice@org.test")
ALICE_OLD = ("alice", "alice.smith@old-laptop.test")  # mapped to ALICE by .mailmap
BOB = ("Bob Jones", "bob@org.test")
CAROL = ("Carol White", "carol@org.test")


@dataclass
class FixtureRepo:
    """A work tree with helpers to write files and commit as a given author at a given time."""

    root: Path
    clock: int = 1_786_000_000  # 2026-08-06, advanced one hour per commit
    commits: dict[str, str] = field(default_factory=dict)  # label -> sha

    @classmethod
    def create(cls, root: Path, remote: str | None = None) -> FixtureRepo:
        root.mkdir(parents=True, exist_ok=True)
        repo = cls(root)
        repo.git("init", "-q", "-b", "main")
        repo.git("config", "user.name", "Fixture")
        repo.git("config", "user.email", "fixture@test")
        repo.git("config", "commit.gpgsign", "false")
        if remote:
            repo.git("remote", "add", "origin", remote)
        return repo

    def git(self, *args: str, env: dict[str, str] | None = None) -> str:
        full_env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", **(env or {})}
        done = subprocess.run(
            ["git", *args], cwd=self.root, env=full_env, capture_output=True, text=True, check=False
        )
        if done.returncode != 0:
            raise AssertionError(f"git {' '.join(args)} failed: {done.stderr}")
        return done.stdout

    def write(self, path: str, text: str | bytes) -> Path:
        target = self.root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(text, bytes):
            target.write_bytes(text)
        else:
            target.write_bytes(text.encode("utf-8"))
        return target

    def commit(self, label: str, message: str, author: tuple[str, str], *paths: str) -> str:
        self.clock += 3600
        stamp = f"@{self.clock} +0000"
        self.git("add", "-A", "--", *(paths or ["."]))
        self.git(
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            message,
            env={
                "GIT_AUTHOR_NAME": author[0],
                "GIT_AUTHOR_EMAIL": author[1],
                "GIT_AUTHOR_DATE": stamp,
                "GIT_COMMITTER_NAME": author[0],
                "GIT_COMMITTER_EMAIL": author[1],
                "GIT_COMMITTER_DATE": stamp,
            },
        )
        sha = self.git("rev-parse", "HEAD").strip()
        self.commits[label] = sha
        return sha

    def lines(self, path: str) -> list[str]:
        return (self.root / path).read_text("utf-8").splitlines()

    def set_line(self, path: str, number: int, text: str) -> None:
        lines = self.lines(path)
        lines[number - 1] = text
        self.write(path, "\n".join(lines) + "\n")


def numbered(prefix: str, n: int) -> str:
    return "".join(f"{prefix} line {i}\n" for i in range(1, n + 1))


def kong_repo(root: Path, remote: str | None = "git@github.com:org/poimen.git") -> FixtureRepo:
    """The seed's setup (M3.5.9): alice changes buffer.rs:42 "Increase buffer", bob changes
    handler.rs:10 "Handle large bodies", on top of carol's initial commit; then an unrelated
    commit, so HEAD is not the commit that touched those files."""
    repo = FixtureRepo.create(root, remote)
    repo.write("src/kong/buffer.rs", numbered("// buffer", 60))
    repo.write("src/kong/handler.rs", numbered("// handler", 20))
    repo.write(".mailmap", f"{ALICE[0]} <{ALICE[1]}> <{ALICE_OLD[1]}>\n")
    repo.commit("initial", "Initial kong module", CAROL)
    repo.set_line("src/kong/buffer.rs", 42, "const BODY_BUFFER: usize = 16 * MB;")
    repo.commit("abc123", "Increase buffer", ALICE_OLD)
    repo.set_line("src/kong/handler.rs", 10, "if body.len() > BODY_BUFFER { return stream(body); }")
    repo.commit("def456", "Handle large bodies", BOB)
    repo.write("README.md", "kong\n")
    repo.commit("unrelated", "Add README", CAROL)
    return repo


def git_as(repo: FixtureRepo, who: tuple[str, str], *args: str, authored: bool = False) -> str:
    """Run a git command that writes commits (rebase, cherry-pick, amend, merge, revert) as
    committer ``who`` at the repository's next clock tick, with no editor. Rewritten commits
    keep their author dates, as git keeps them; ``authored``: new commits are authored by
    ``who`` at that tick too."""
    repo.clock += 3600
    stamp = f"@{repo.clock} +0000"
    env = {
        "GIT_COMMITTER_NAME": who[0],
        "GIT_COMMITTER_EMAIL": who[1],
        "GIT_COMMITTER_DATE": stamp,
        "GIT_EDITOR": "true",
        "GIT_SEQUENCE_EDITOR": "true",
    }
    if authored:
        env |= {"GIT_AUTHOR_NAME": who[0], "GIT_AUTHOR_EMAIL": who[1], "GIT_AUTHOR_DATE": stamp}
    return repo.git(*args, env=env)


def clone(url: str, root: Path) -> FixtureRepo:
    """A clone of ``url`` at ``root``, set up like FixtureRepo.create."""
    done = subprocess.run(
        ["git", "clone", "-q", url, str(root)],
        env={**os.environ, "GIT_CONFIG_NOSYSTEM": "1"},
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise AssertionError(f"git clone {url} failed: {done.stderr}")
    repo = FixtureRepo(root)
    repo.git("config", "user.name", "Fixture")
    repo.git("config", "user.email", "fixture@test")
    repo.git("config", "commit.gpgsign", "false")
    return repo


def forget_unreachable(repo: FixtureRepo) -> None:
    """Drop every commit no branch or tag reaches: reflogs expired, then gc --prune=now."""
    (repo.root / ".git" / "ORIG_HEAD").unlink(missing_ok=True)
    repo.git("reflog", "expire", "--expire=now", "--all")
    repo.git("gc", "-q", "--prune=now")


def has_commit(repo: FixtureRepo, sha: str) -> bool:
    """Whether the repository still holds commit ``sha``."""
    try:
        repo.git("cat-file", "-e", f"{sha}^{{commit}}")
    except AssertionError:
        return False
    return True


def blame_at_head(repo: FixtureRepo, path: str) -> dict[int, str]:
    """HEAD line -> the commit `git blame --root` attributes it to (no -M/-C, as lookups)."""
    out = repo.git("blame", "--porcelain", "--root", "HEAD", "--", path)
    commits: dict[int, str] = {}
    for row in out.splitlines():
        parts = row.split(" ")
        if not row.startswith("\t") and len(parts) in (3, 4) and len(parts[0]) == 40:
            commits[int(parts[2])] = parts[0]
    return commits
