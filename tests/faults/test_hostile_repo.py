"""A repository is untrusted input: no program its configuration names ever runs, no file it
holds is read through a link or without a bound, and git's words, which may quote a file,
never reach a user. Every flow is the real one (see hostile.py)."""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

import pytest

from ..gitrepo import ALICE, ALICE_OLD, FixtureRepo, kong_repo
from .conftest import Faults
from .hostile import (
    PEAK_BOUND,
    Flows,
    Seen,
    add_signed_commits,
    arm,
    commit_attributes,
    memories,
)

SECRET = "poimen-secret: correct horse battery staple 7f3e"


def _hostile(tmp_path: Path, name: str = "hostile") -> FixtureRepo:
    """The kong history under a remote of its own (its commit metadata is its own too)."""
    return kong_repo(tmp_path / name, remote=f"git@github.com:hostile/{uuid.uuid4().hex[:8]}.git")


def _memories_file(repo: FixtureRepo) -> Path:
    path = repo.root.parent / f"memories-{uuid.uuid4().hex[:6]}.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in memories(repo)))
    return path


def _flows(faults: Faults, repo: FixtureRepo, author: str, in_process: bool = True) -> Flows:
    flows = Flows(faults, repo, f"hostile-{uuid.uuid4().hex[:8]}")
    source = _memories_file(repo)
    flows.cli(source, author)
    flows.editor(author)
    if in_process:
        flows.in_process(source)
    return flows


# -- 1. no program the repository's configuration names ---------------------------------------


def test_no_program_the_repository_configures_ever_runs(faults: Faults, tmp_path: Path) -> None:
    repo = _hostile(tmp_path)
    commit_attributes(repo)
    add_signed_commits(repo)
    markers = tmp_path / "markers"
    arm(repo, markers)
    flows = _flows(faults, repo, ALICE_OLD[1])
    assert sorted(os.listdir(markers)) == []
    # The flows did the work that would have run them: blame, metadata, the mailmap.
    assert "Raised BODY\\_BUFFER" in flows.seen.hover
    assert "Raised BODY_BUFFER" in flows.seen.joined()
    assert "The buffer module as first written." in flows.seen.joined()


def test_a_partial_clone_fetches_nothing_and_runs_no_transport(
    faults: Faults, tmp_path: Path
) -> None:
    # A missing object of a partial clone is fetched on demand, through the transport the
    # configuration names (remote.*.uploadpack, core.sshCommand, ...): never by us.
    source = _hostile(tmp_path, "upstream")
    source.git("config", "uploadpack.allowFilter", "true")
    clone = tmp_path / "partial"
    source.git("clone", "-q", "--filter=blob:none", source.root.as_uri(), str(clone))
    repo = FixtureRepo(clone, commits=dict(source.commits))
    markers = tmp_path / "markers"
    arm(repo, markers)
    repo.git("config", "remote.origin.url", str(source.root))
    flows = _flows(faults, repo, ALICE_OLD[1])
    assert sorted(os.listdir(markers)) == []
    shown = flows.seen.joined()
    assert "objects missing (a partial clone; nothing is fetched)" in shown
    assert "Traceback" not in flows.seen.joined(but=("server log",))


# -- 2. a .mailmap that is not a small regular file ----------------------------------------------


def _special_file(tmp_path: Path, kind: str) -> Path:
    if kind == "dev-zero":
        return Path("/dev/zero")
    target = tmp_path / f"outside-{kind}"
    if kind == "fifo":
        os.mkfifo(target)
    else:
        with target.open("wb") as sparse:
            sparse.truncate(1 << 30)
    return target


def _mapped_by_a_big_blob(repo: FixtureRepo) -> str:
    """A blob just over the size cap whose last line maps alice: honoured, it would show."""
    padding = "# padding\n" * ((4 << 20) // 10 + 1)
    data = repo.root.parent / "big.mailmap"
    data.write_text(padding + f"{ALICE[0]} <{ALICE[1]}> <{ALICE_OLD[1]}>\n")
    return repo.git("hash-object", "-w", str(data)).strip()


def _assert_quick_and_small(seen: Seen) -> None:
    """Every flow took seconds, not git's timeout, and no process grew past the bound."""
    slow = {flow: round(s, 1) for flow, s in seen.seconds.items() if s > 20}
    assert not slow, slow
    big = {flow: peak >> 20 for flow, peak in seen.peaks.items() if peak > PEAK_BOUND}
    assert not big, f"peak resident MB: {big}"


@pytest.mark.parametrize(
    ("how", "kind"),
    [
        ("committed-link", "dev-zero"),
        ("committed-link", "fifo"),
        ("committed-link", "sparse"),
        ("mailmap.file", "dev-zero"),
        ("mailmap.file", "fifo"),
        ("mailmap.file", "sparse"),
        ("mailmap.blob", "too-big"),
    ],
)
def test_a_mailmap_that_is_no_small_file_is_ignored_quickly(
    faults: Faults, tmp_path: Path, how: str, kind: str
) -> None:
    repo = _hostile(tmp_path)
    (repo.root / ".mailmap").unlink()  # alice's old address is mapped by nothing else
    if how == "committed-link":
        os.symlink(_special_file(tmp_path, kind), repo.root / ".mailmap")
        repo.commit("mailmap", "Link the mailmap", ALICE_OLD)
    elif how == "mailmap.file":
        repo.commit("mailmap", "Drop the mailmap", ALICE_OLD)
        repo.git("config", "mailmap.file", str(_special_file(tmp_path, kind)))
    else:
        repo.commit("mailmap", "Drop the mailmap", ALICE_OLD)
        repo.git("config", "mailmap.blob", _mapped_by_a_big_blob(repo))
    # Not in this process: here a git that read /dev/zero would have no memory limit.
    flows = _flows(faults, repo, ALICE_OLD[1], in_process=False)
    seen = flows.seen
    _assert_quick_and_small(seen)
    # Answered as if there were no .mailmap: alice under her old name and address.
    assert "Raised BODY\\_BUFFER" in seen.hover
    assert ALICE_OLD[0] in seen.hover
    assert ALICE[0] not in seen.joined()
    assert "Raised BODY_BUFFER" in seen.of("by-author")


@pytest.mark.parametrize("kind", ["dev-zero", "fifo", "sparse"])
def test_a_configuration_that_includes_no_small_file_fails_fast(
    faults: Faults, tmp_path: Path, kind: str
) -> None:
    # Only a hostile .git/config can do this; git itself would wait on the FIFO for ever.
    repo = _hostile(tmp_path)
    target = _special_file(tmp_path, kind)
    repo.git("config", "include.path", str(target))
    flows = _flows(faults, repo, ALICE_OLD[1], in_process=False)
    seen = flows.seen
    _assert_quick_and_small(seen)
    assert f"git configuration: {target} is not a regular file" in seen.of("by-git")
    assert seen.hover == ""


# -- 4. git's words never reach a user -----------------------------------------------------------


@pytest.mark.parametrize(
    "how",
    ["committed-link", "configured-link", "configured-file", "included-config", "shallow-link"],
)
def test_no_file_leaks_through_an_ignore_revs_list_or_the_configuration(
    faults: Faults, tmp_path: Path, how: str
) -> None:
    secret = tmp_path / "outside" / "secret.txt"
    secret.parent.mkdir()
    secret.write_text(f"{SECRET}\nsecond line\n")
    repo = _hostile(tmp_path)
    if how in ("committed-link", "configured-link"):
        os.symlink(secret, repo.root / ".git-blame-ignore-revs")
        repo.commit("revs", "Ignore revisions", ALICE_OLD)
    if how == "configured-link":
        repo.git("config", "blame.ignoreRevsFile", ".git-blame-ignore-revs")
    elif how == "configured-file":
        repo.git("config", "blame.ignoreRevsFile", str(secret))
    elif how == "included-config":
        repo.git("config", "include.path", str(secret))
    elif how == "shallow-link":  # git reads it through the link, and quotes a bad line
        os.symlink(secret, repo.root / ".git" / "shallow")
    flows = _flows(faults, repo, ALICE_OLD[1])
    shown = flows.seen.joined()
    assert SECRET not in shown
    assert "correct horse" not in shown
    assert "Traceback" not in flows.seen.joined(but=("server log",))
    if how == "included-config":
        assert f"unreadable git configuration in {secret}" in shown
    elif how == "shallow-link":
        # The first git process to read it says so (rev-list or blame, by the path taken).
        assert "failed (exit 128): unreadable .git/shallow" in shown
    else:  # the list is not used, and blame works without it
        assert "Raised BODY\\_BUFFER" in flows.seen.hover
