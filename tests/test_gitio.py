"""gitio on real repositories: identity, blame, cache, line mapping, metadata, safety."""

from __future__ import annotations

import hashlib
import os
import stat
import subprocess
from pathlib import Path

import pytest

from poimen_memory.domain import CommitSha, RepoId
from poimen_memory.gitio import (
    BinaryFile,
    BlameCache,
    Blamer,
    EmptyRepository,
    GitError,
    GitNotFound,
    GitRepo,
    GitRunner,
    NotARepository,
    OutsideRepository,
    UnknownCommit,
    UnsafeArgument,
    Untracked,
    blob_id_of,
    map_buffer_to_head,
    normalize_remote,
)

from .gitrepo import ALICE, ALICE_OLD, BOB, CAROL, FixtureRepo, kong_repo


@pytest.fixture
def kong(tmp_path: Path) -> FixtureRepo:
    return kong_repo(tmp_path / "kong")


class ShimGit:
    """A `git` in front of the real one that logs every process it starts."""

    def __init__(self, tmp_path: Path) -> None:
        self.log = tmp_path / "git-calls.log"
        self.path = tmp_path / "shim" / "git"
        self.path.parent.mkdir()
        self.path.write_text(f'#!/bin/sh\necho "$*" >> "{self.log}"\nexec git "$@"\n')
        self.path.chmod(self.path.stat().st_mode | stat.S_IEXEC)

    def calls(self) -> list[str]:
        return self.log.read_text().splitlines() if self.log.exists() else []

    def reset(self) -> None:
        self.log.unlink(missing_ok=True)

    def blames(self) -> list[str]:
        return [c for c in self.calls() if " blame " in f" {c} "]

    def commands(self) -> list[str]:
        """The git subcommand of each call (the ``-c name=value`` pairs skipped)."""
        out = []
        for call in self.calls():
            words = call.split()
            while words[:1] == ["-c"]:
                words = words[2:]
            out.append(words[0])
        return out


@pytest.fixture
def shim(tmp_path: Path) -> ShimGit:
    return ShimGit(tmp_path)


# -- identity -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "git@github.com:org/x.git",
        "https://github.com/org/x",
        "ssh://git@github.com/org/x.git",
        "https://token:x-oauth@github.com/org/x.git/",
        "ssh://git@github.com:22/Org/X",
    ],
)
def test_remote_spellings_give_one_identity(url: str) -> None:
    assert normalize_remote(url) == RepoId("github.com/org/x")


def test_other_hosts_keep_path_case_and_differ() -> None:
    assert normalize_remote("https://gitlab.example/Team/X.git") == RepoId("gitlab.example/Team/X")
    assert normalize_remote("git@gitlab.com:org/x.git") != normalize_remote("git@github.com:org/x")


def test_option_looking_remote_is_refused() -> None:
    with pytest.raises(UnsafeArgument, match="looks like an option"):
        normalize_remote("--upload-pack=touch /tmp/pwned")


def test_repo_identity_from_origin_local_and_override(tmp_path: Path, kong: FixtureRepo) -> None:
    assert GitRepo.discover(kong.root / "src" / "kong").identity() == RepoId(
        "github.com/org/poimen"
    )
    local = kong_repo(tmp_path / "local", remote=None)
    clone = tmp_path / "clone"
    local.git("clone", "-q", str(local.root), str(clone))
    FixtureRepo(clone).git("remote", "remove", "origin")
    ident = GitRepo.discover(local.root).identity()
    assert ident.value.startswith("local/")
    # Stable: the same history elsewhere has the same identity (root commit, not path).
    assert GitRepo.discover(clone).identity() == ident
    assert GitRepo.discover(local.root).identity("https://gitlab.com/org/poimen") == RepoId(
        "gitlab.com/org/poimen"
    )


def test_discover_outside_a_repository(tmp_path: Path) -> None:
    (tmp_path / "plain").mkdir()
    with pytest.raises(NotARepository, match="not inside a git work tree"):
        GitRepo.discover(tmp_path / "plain" / "file.txt")


# -- blame ----------------------------------------------------------------------------------


def test_blame_gives_origins_authors_and_summaries(kong: FixtureRepo) -> None:
    repo = GitRepo.discover(kong.root)
    blame = repo.blame("src/kong/buffer.rs", repo.head())
    assert len(blame.lines) == 60
    line42 = blame.origin(42)
    assert line42 is not None
    assert line42.commit.value == kong.commits["abc123"]
    assert (line42.orig_path, line42.orig_line) == ("src/kong/buffer.rs", 42)
    commit = blame.commits[line42.commit]
    # .mailmap applied: committed as alice.smith@old-laptop.test.
    assert (commit.author_name, commit.author_email) == ALICE
    assert commit.summary == "Increase buffer"
    assert not commit.boundary
    line41 = blame.origin(41)
    assert line41 is not None
    assert line41.commit.value == kong.commits["initial"]
    assert blame.commits[line41.commit].author_email == CAROL[1]
    assert blame.origin(61) is None
    assert blame.origin(0) is None


def test_blame_follows_renames(kong: FixtureRepo) -> None:
    kong.git("mv", "src/kong/buffer.rs", "src/kong/body_buffer.rs")
    kong.commit("rename", "Rename buffer module", BOB)
    repo = GitRepo.discover(kong.root)
    origin = repo.blame("src/kong/body_buffer.rs", repo.head()).origin(42)
    assert origin is not None
    assert origin.commit.value == kong.commits["abc123"]
    assert origin.orig_path == "src/kong/buffer.rs"


def test_blame_follows_lines_moved_within_the_file(kong: FixtureRepo) -> None:
    lines = kong.lines("src/kong/buffer.rs")
    kong.write("src/kong/buffer.rs", "\n".join(["// new header"] * 5 + lines) + "\n")
    kong.commit("shift", "Add header", BOB)
    repo = GitRepo.discover(kong.root)
    origin = repo.blame("src/kong/buffer.rs", repo.head()).origin(47)
    assert origin is not None
    assert origin.commit.value == kong.commits["abc123"]
    assert origin.orig_line == 42


@pytest.mark.parametrize("configured", [False, True], ids=["conventional-file", "config"])
def test_ignore_revs_are_honoured(kong: FixtureRepo, configured: bool) -> None:
    kong.set_line("src/kong/buffer.rs", 42, "const BODY_BUFFER: usize = 16*MB;  // reformatted")
    fmt = kong.commit("fmt", "Reformat", BOB)
    name = ".git-blame-ignore-revs" if not configured else "ignored-revs.txt"
    kong.write(name, f"{fmt}\n")
    if configured:
        kong.git("config", "blame.ignoreRevsFile", name)
    kong.commit("ignore", "Ignore the reformat in blame", BOB)
    repo = GitRepo.discover(kong.root)
    origin = repo.blame("src/kong/buffer.rs", repo.head()).origin(42)
    assert origin is not None
    assert origin.commit.value == kong.commits["abc123"]


def test_single_line_fast_path(kong: FixtureRepo) -> None:
    repo = GitRepo.discover(kong.root)
    partial = repo.blame("src/kong/buffer.rs", repo.head(), (42, 42))
    assert not partial.complete
    assert len(partial.lines) == 1
    origin = partial.origin(42)
    assert origin is not None
    assert origin.commit.value == kong.commits["abc123"]
    assert partial.origin(41) is None


def test_commit_metadata_for_many_commits_in_one_process(kong: FixtureRepo, shim: ShimGit) -> None:
    repo = GitRepo.discover(kong.root, GitRunner(git=str(shim.path)))
    repo.identity()
    shim.reset()
    wanted = [CommitSha(kong.commits[k]) for k in ("abc123", "def456", "initial")]
    missing = CommitSha("f" * 40)
    infos = repo.commits([*wanted, missing])
    assert set(infos) == set(wanted)
    # GitPython's persistent contents reader (commits are small: no headers reader), one
    # process for the .mailmap.
    assert sorted(shim.commands()) == ["cat-file", "check-mailmap"]
    assert repo.runner.spawned == 2
    shim.reset()
    assert repo.commits(wanted) == infos
    assert shim.commands() == ["check-mailmap"]  # the readers stay up
    abc = infos[wanted[0]]
    assert (abc.message, abc.author_name, abc.author_email) == ("Increase buffer", *ALICE)
    assert abc.repo == RepoId("github.com/org/poimen")
    assert infos[wanted[1]].author_email == BOB[1]


def test_with_no_mailmap_no_git_process_maps_authors(kong: FixtureRepo, shim: ShimGit) -> None:
    """Where git has no mailmap to read (no .mailmap, no mailmap.file or mailmap.blob),
    authors are as recorded and no check-mailmap runs; a .mailmap written later is read."""
    (kong.root / ".mailmap").unlink()
    repo = GitRepo.discover(kong.root, GitRunner(git=str(shim.path)))
    repo.identity()
    abc = CommitSha(kong.commits["abc123"])
    repo.commits([abc])  # the object readers start
    shim.reset()
    info = repo.commits([abc])[abc]
    assert (info.author_name, info.author_email) == ALICE_OLD
    assert repo.mailmap(ALICE_OLD[1]) == {ALICE_OLD[1]}
    assert shim.commands() == []
    (kong.root / ".mailmap").write_text(f"{ALICE[0]} <{ALICE[1]}> <{ALICE_OLD[1]}>\n")
    info = repo.commits([abc])[abc]
    assert (info.author_name, info.author_email) == ALICE
    assert ALICE[1] in repo.mailmap(ALICE_OLD[1])
    assert "check-mailmap" in shim.commands()
    # A mailmap.file named in the configuration is read too.
    (kong.root / ".mailmap").rename(kong.root / "people.map")
    kong.git("config", "mailmap.file", "people.map")
    fresh = GitRepo.discover(kong.root, GitRunner(git=str(shim.path)))
    info = fresh.commits([abc])[abc]
    assert (info.author_name, info.author_email) == ALICE


def test_resolve_commit_prefix_and_refusals(kong: FixtureRepo) -> None:
    repo = GitRepo.discover(kong.root)
    full = kong.commits["abc123"]
    assert repo.resolve_commit(full[:10]).value == full
    assert repo.resolve_commit(full.upper()).value == full
    with pytest.raises(UnknownCommit, match="'deadbeef' is not a commit"):
        repo.resolve_commit("deadbeef")
    for bad in ("--upload-pack=touch /tmp/pwned", "HEAD", "abc", "a" * 65, ""):
        with pytest.raises(UnsafeArgument, match="commit_sha: expected 4 to 64 hex digits"):
            repo.resolve_commit(bad)


# -- the cache ------------------------------------------------------------------------------


def test_cache_survives_unrelated_commit_and_restart(
    tmp_path: Path, kong: FixtureRepo, shim: ShimGit
) -> None:
    db = tmp_path / "cache" / "blame.sqlite3"
    runner = GitRunner(git=str(shim.path))
    blamer = Blamer(GitRepo.discover(kong.root, runner), BlameCache(db))
    first = blamer.blame_file("src/kong/buffer.rs")
    assert len(shim.blames()) == 1

    kong.write("docs/notes.md", "unrelated\n")
    kong.commit("docs", "Add notes", BOB)
    again = blamer.blame_file("src/kong/buffer.rs")
    assert len(shim.blames()) == 1  # no new blame: the file's last commit did not change
    assert again.lines == first.lines
    assert again.rev.value == kong.commits["docs"]

    # A new process: fresh repo object, fresh cache object on the same file.
    shim.reset()
    restarted = Blamer(GitRepo.discover(kong.root, runner), BlameCache(db))
    assert restarted.blame_file("src/kong/buffer.rs").lines == first.lines
    assert shim.blames() == []
    # Warm: the second request spawns no git process at all.
    head = restarted.repo.head()
    shim.reset()
    restarted.blame_file("src/kong/buffer.rs", head)
    restarted.origin("src/kong/buffer.rs", 42, head)
    assert shim.calls() == []


def test_cache_is_invalidated_by_a_commit_touching_the_file(
    tmp_path: Path, kong: FixtureRepo, shim: ShimGit
) -> None:
    blamer = Blamer(
        GitRepo.discover(kong.root, GitRunner(git=str(shim.path))), BlameCache(tmp_path / "c.db")
    )
    blamer.blame_file("src/kong/buffer.rs")
    kong.set_line("src/kong/buffer.rs", 42, "const BODY_BUFFER: usize = 32 * MB;")
    sha = kong.commit("bump", "Increase buffer again", BOB)
    after = blamer.blame_file("src/kong/buffer.rs")
    origin = after.origin(42)
    assert origin is not None
    assert origin.commit.value == sha
    # The new key is computed from the cached blame and the one commit since, not by git
    # blame again; and it is git's answer.
    assert len(shim.blames()) == 1
    assert blamer.sources["incremental"] == 1
    assert after.lines == blamer.repo.blame("src/kong/buffer.rs", blamer.repo.head()).lines


def test_cache_is_bounded(tmp_path: Path, kong: FixtureRepo) -> None:
    cache = BlameCache(tmp_path / "c.db", max_entries=2, memory_entries=1)
    blamer = Blamer(GitRepo.discover(kong.root), cache)
    for path in ("src/kong/buffer.rs", "src/kong/handler.rs", "README.md"):
        blamer.blame_file(path)
    assert cache.stats()[0] == 2
    # The least recently used one went; the others are served from disk.
    assert blamer.cached("README.md", blamer.repo.head()) is not None
    assert blamer.cached("src/kong/buffer.rs", blamer.repo.head()) is None


def test_cold_line_uses_single_line_blame(tmp_path: Path, kong: FixtureRepo, shim: ShimGit) -> None:
    blamer = Blamer(
        GitRepo.discover(kong.root, GitRunner(git=str(shim.path))), BlameCache(tmp_path / "c.db")
    )
    origin = blamer.origin("src/kong/handler.rs", 10)
    assert origin is not None
    assert origin.commit.value == kong.commits["def456"]
    assert [b for b in shim.blames() if "-L10,10" in b] != []


def test_unusable_cache_directory_still_blames(tmp_path: Path, kong: FixtureRepo) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    blamer = Blamer(GitRepo.discover(kong.root), BlameCache(blocker / "c.db"))
    assert blamer.blame_file("src/kong/buffer.rs").origin(42) is not None


# -- unsaved buffers ------------------------------------------------------------------------


def test_line_mapping_insertions_deletions_and_moves() -> None:
    head = "".join(f"h{i}\n" for i in range(1, 11))
    lines = head.splitlines()
    inserted = "\n".join(["typed a", "typed b", *lines])
    assert map_buffer_to_head(head, inserted) == [None, None, *range(1, 11)]
    deleted = "\n".join(lines[:3] + lines[5:])
    assert map_buffer_to_head(head, deleted) == [1, 2, 3, 6, 7, 8, 9, 10]
    changed = "\n".join([*lines[:4], "h5 edited", *lines[5:]])
    assert map_buffer_to_head(head, changed) == [1, 2, 3, 4, None, 6, 7, 8, 9, 10]
    moved = "\n".join(lines[5:8] + lines[:5] + lines[8:])
    mapped = map_buffer_to_head(head, moved)
    # Every line that exists in HEAD maps to itself or to nothing; none maps to a wrong line.
    for buffer_line, head_line in zip(moved.splitlines(), mapped, strict=True):
        assert head_line is None or lines[head_line - 1] == buffer_line
    assert sum(m is not None for m in mapped) >= 7
    assert map_buffer_to_head(head, head) == list(range(1, 11))
    assert map_buffer_to_head(head, "") == []


def test_line_mapping_never_maps_to_a_different_text() -> None:
    head = "a\nb\na\nb\nc\n"
    buffer = "b\na\nx\nb\nc\na\n"
    for text, mapped in zip(buffer.splitlines(), map_buffer_to_head(head, buffer), strict=True):
        assert mapped is None or head.splitlines()[mapped - 1] == text


# -- safety and defined results -------------------------------------------------------------


@pytest.mark.parametrize(
    "name", ["with space.rs", "ünï cödé.rs", "-leading-dash.rs", "--output=x.rs"]
)
def test_awkward_file_names_blame(kong: FixtureRepo, name: str) -> None:
    kong.write(f"src/{name}", "one\ntwo\n")
    sha = kong.commit("awkward", "Add awkward file", BOB)
    repo = GitRepo.discover(kong.root)
    origin = repo.blame(f"src/{name}", repo.head()).origin(2)
    assert origin is not None
    assert origin.commit.value == sha
    assert origin.orig_path == f"src/{name}"
    assert not (kong.root / "x.rs").exists()


def test_option_looking_path_at_top_level_is_refused(kong: FixtureRepo) -> None:
    repo = GitRepo.discover(kong.root)
    with pytest.raises(UnsafeArgument, match="looks like an option"):
        repo.blame("--output=/tmp/x", repo.head())


def test_untracked_binary_and_outside_files(tmp_path: Path, kong: FixtureRepo) -> None:
    repo = GitRepo.discover(kong.root)
    kong.write("new.rs", "not committed\n")
    with pytest.raises(Untracked, match=r"new\.rs is not in commit"):
        repo.blame("new.rs", repo.head())
    kong.write("logo.png", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00binary")
    kong.commit("bin", "Add logo", BOB)
    with pytest.raises(BinaryFile, match=r"logo\.png is a binary file"):
        repo.blame("logo.png", repo.head())
    outside = tmp_path / "secret.txt"
    outside.write_text("secret\n")
    os.symlink(outside, kong.root / "link.txt")
    with pytest.raises(OutsideRepository, match="outside the repository"):
        repo.relpath(kong.root / "link.txt")
    with pytest.raises(OutsideRepository):
        repo.relpath(outside)
    with pytest.raises(OutsideRepository, match=r"inside \.git"):
        repo.relpath(kong.root / ".git" / "config")
    assert repo.relpath(kong.root / "src" / "kong" / "buffer.rs") == "src/kong/buffer.rs"


def test_empty_repository(tmp_path: Path) -> None:
    empty = FixtureRepo.create(tmp_path / "empty")
    repo = GitRepo.discover(empty.root)
    with pytest.raises(EmptyRepository, match="no commits yet"):
        repo.head()
    assert repo.identity().value.startswith("local/")


def test_detached_head(kong: FixtureRepo) -> None:
    kong.git("checkout", "-q", "--detach", kong.commits["abc123"])
    repo = GitRepo.discover(kong.root)
    assert repo.head().value == kong.commits["abc123"]
    origin = repo.blame("src/kong/buffer.rs", repo.head()).origin(42)
    assert origin is not None
    assert origin.commit.value == kong.commits["abc123"]


def test_head_read_in_process_matches_git(kong: FixtureRepo, shim: ShimGit) -> None:
    repo = GitRepo.discover(kong.root, GitRunner(git=str(shim.path)))
    shim.reset()
    assert repo.head().value == kong.git("rev-parse", "HEAD").strip()
    kong.git("pack-refs", "--all")
    assert repo.head().value == kong.git("rev-parse", "HEAD").strip()
    assert shim.calls() == []


def test_shallow_clone_marks_boundary(tmp_path: Path, kong: FixtureRepo) -> None:
    shallow = tmp_path / "shallow"
    kong.git("clone", "-q", "--depth", "1", f"file://{kong.root}", str(shallow))
    repo = GitRepo.discover(shallow)
    blame = repo.blame("src/kong/buffer.rs", repo.head())
    origin = blame.origin(42)
    assert origin is not None
    assert blame.commits[origin.commit].boundary


def test_git_missing_is_a_defined_error(kong: FixtureRepo) -> None:
    with pytest.raises(GitNotFound, match="git is not installed"):
        GitRepo.discover(kong.root, GitRunner(git="/nonexistent/git"))


def test_only_git_errors_leave_gitio(tmp_path: Path, kong: FixtureRepo) -> None:
    repo = GitRepo.discover(kong.root)
    (kong.root / ".git" / "objects").chmod(0o755)  # leave the repository usable for cleanup
    head = repo.head()
    for path in ("missing.rs", "src", "src/kong/buffer.rs\nx", "a\x00b"):
        with pytest.raises(GitError):
            repo.blame(path, head)
    assert repo.commits([]) == {}
    assert repo.existing([]) == set()
    assert BOB  # fixture authors are in use above


def test_detect_moves_keeps_the_origin_of_a_moved_block(tmp_path: Path) -> None:
    repo = FixtureRepo.create(tmp_path / "moves")
    block = [
        f"fn handler_{i}(request: Request) -> Response {{ route_{i}(request) }}" for i in range(8)
    ]
    rest = [f"// filler line number {i} with enough text to matter" for i in range(30)]
    repo.write("a.rs", "\n".join(block + rest) + "\n")
    original = repo.commit("orig", "Add handlers", ALICE)
    repo.write("a.rs", "\n".join(rest + block) + "\n")
    repo.commit("move", "Move handlers to the end", BOB)
    plain = GitRepo.discover(repo.root)
    moved_line = len(rest) + 1
    plain_origin = plain.blame("a.rs", plain.head()).origin(moved_line)
    assert plain_origin is not None
    assert plain_origin.commit.value == repo.commits["move"]
    tracking = GitRepo.discover(repo.root, detect_moves=True)
    origin = tracking.blame("a.rs", tracking.head()).origin(moved_line)
    assert origin is not None
    assert origin.commit.value == original
    assert origin.orig_line == 1


# -- blame as git finds the lines (--incremental) ---------------------------------------------


def test_incremental_blame_is_the_porcelain_blame_entry_by_entry(tmp_path: Path) -> None:
    """Blamed with its lines reported as git finds them, every file gives the blame the
    porcelain output gives (commits, authors through .mailmap, original paths after a rename,
    boundary marks in a shallow clone), and the entries cover each line once."""
    kong = kong_repo(tmp_path / "kong")
    kong.git("mv", "src/kong/buffer.rs", "src/kong/buffers.rs")
    kong.set_line("src/kong/buffers.rs", 7, "// seven, renamed")
    kong.commit("renamed", "Rename the buffer", BOB)
    for n in (3, 30, 55):
        kong.set_line("src/kong/buffers.rs", n, f"// changed {n}")
        kong.commit(f"c{n}", f"Change {n}", ALICE if n % 2 else CAROL)
    shallow = tmp_path / "shallow"
    done = os.system(f"git clone -q --depth 2 file://{kong.root} {shallow} 2>/dev/null")
    assert done == 0
    for root in (kong.root, shallow):
        repo = GitRepo.discover(root)
        head = repo.head()
        for path in ("src/kong/buffers.rs", "src/kong/handler.rs", "README.md", ".mailmap"):
            entries: list[tuple[object, ...]] = []
            streamed = repo.blame(path, head, on_entry=entries.append)
            assert streamed == repo.blame(path, head), (root, path)
            covered = sorted(e[3] + i for e in entries for i in range(int(e[4])))  # type: ignore[call-overload]
            assert covered == list(range(1, len(streamed.lines) + 1))
        moved = repo.blame("src/kong/buffers.rs", head, on_entry=lambda e: None)
        assert {o.orig_path for o in moved.lines} == (
            {"src/kong/buffer.rs", "src/kong/buffers.rs"} if root == kong.root else
            {"src/kong/buffers.rs"}
        )  # fmt: skip


def test_incremental_blame_of_a_binary_file_is_refused(kong: FixtureRepo) -> None:
    kong.write("logo.bin", "GIF89a\x00\x01\x02\nmore\n")
    kong.commit("bin", "Add a logo", BOB)
    repo = GitRepo.discover(kong.root)
    with pytest.raises(BinaryFile):
        repo.blame("logo.bin", repo.head(), on_entry=lambda e: None)


def test_a_file_s_id_through_its_trees_is_git_s_blob_id(tmp_path: Path) -> None:
    """file_id walks the commit's trees on the contents process; it must name what git's own
    lookup of ``rev:path`` names, for every path and commit, and nothing for what is not a
    file (a directory, a submodule, a missing path)."""
    repo_dir = FixtureRepo.create(tmp_path / "r")
    repo_dir.write("top.txt", "one\n")
    repo_dir.write("a/b/deep.rs", "fn x() {}\n")
    repo_dir.write("a/b c/spaced name.txt", "s\n")
    repo_dir.commit("c1", "first", ALICE)
    repo_dir.write("a/b/deep.rs", "fn y() {}\n")
    os.symlink("top.txt", repo_dir.root / "link")
    repo_dir.git("update-index", "--add", "--cacheinfo", f"160000,{'1' * 40},mod")
    repo_dir.commit("c2", "second", BOB)
    repo = GitRepo.discover(repo_dir.root)
    paths = ["top.txt", "a/b/deep.rs", "a/b c/spaced name.txt", "link", "mod", "a", "a/b",
             "missing", "a/missing.rs", "top.txt/x"]  # fmt: skip
    for rev in (repo_dir.commits["c1"], repo_dir.commits["c2"]):
        for path in paths:
            assert repo.file_id(CommitSha(rev), path) == repo.blob_id(CommitSha(rev), path), (
                rev,
                path,
            )
    assert repo.file_id(CommitSha(repo_dir.commits["c2"]), "link") is not None
    assert repo.file_id(CommitSha(repo_dir.commits["c2"]), "mod") is None
    assert repo.file_id("0" * 40, "top.txt") is None


# -- a buffer recognised as HEAD's text by its id -------------------------------------------


@pytest.mark.parametrize(
    "data",
    [b"", b"one line\n", b"no newline at the end", b"crlf\r\nlines\r\n", b"\x00\xffbinary"],
)
def test_blob_id_of_is_gits_hash_object(tmp_path: Path, data: bytes) -> None:
    src = tmp_path / "data"
    src.write_bytes(data)
    expected = subprocess.run(
        ["git", "hash-object", "--no-filters", str(src)],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    assert blob_id_of(data) == expected


def test_a_buffer_of_heads_text_is_known_by_its_id_without_reading_the_file(
    tmp_path: Path, kong: FixtureRepo
) -> None:
    path = "src/kong/buffer.rs"
    blamer = Blamer(GitRepo.discover(kong.root), BlameCache(tmp_path / "c.db"))
    head = blamer.repo.head()
    data = (kong.root / path).read_bytes()
    text = data.decode("utf-8")
    sha = hashlib.sha256(data).hexdigest()
    edited = text.replace("\n", "\n// typed\n", 1)
    edited_id = blob_id_of(edited.encode())
    # Another text, or another text's id, is not HEAD's; nothing is remembered for it.
    assert not blamer.same_text(path, head, edited, edited_id, sha)
    assert not blamer.same_text(path, head, text, "", sha)
    assert blamer.text_sha(path, head) is None

    def unread(*_: object) -> bytes:
        raise AssertionError("the file was read from git")

    blamer.repo.blob = unread  # type: ignore[method-assign]
    assert blamer.same_text(path, head, text, blob_id_of(data), sha)
    assert blamer.text_sha(path, head) == sha
    assert blamer.head_blob(path, head) == data  # the buffer's bytes, git not asked


def test_a_configuration_read_before_is_read_again_once_its_file_changes(kong: FixtureRepo) -> None:
    """GitPython's readers are shared while their files are as they were: a value written
    after one was read is seen by the next reader, in the same repository or a new one."""
    repo = GitRepo.discover(kong.root)
    assert repo.config_values("poimen", "probe") == ()
    kong.git("config", "poimen.probe", "one")
    assert repo.config_values("poimen", "probe") == ("one",)
    assert GitRepo.discover(kong.root).config_values("poimen", "probe") == ("one",)
    kong.git("config", "--add", "poimen.probe", "two")
    assert repo.config_values("poimen", "probe") == ("one", "two")


def test_a_configuration_with_includes_is_read_anew_each_time(kong: FixtureRepo) -> None:
    """An included file's change changes nothing lstat sees of the including one: such a
    configuration is never shared, so the change is seen."""
    extra = kong.root.parent / "extra.gitconfig"
    extra.write_text("[poimen]\n\tprobe = one\n")
    kong.git("config", "include.path", str(extra))
    repo = GitRepo.discover(kong.root)
    assert repo.config_values("poimen", "probe") == ("one",)
    extra.write_text("[poimen]\n\tprobe = two\n")
    assert repo.config_values("poimen", "probe") == ("two",)


def test_configuration_readers_are_shared_while_their_files_are_unchanged(
    kong: FixtureRepo,
) -> None:
    first = GitRepo.discover(kong.root)
    reader = first._gp.config_reader()
    assert first._gp.config_reader() is reader
    assert GitRepo.discover(kong.root)._gp.config_reader() is reader
    kong.git("config", "poimen.probe", "one")
    assert first._gp.config_reader() is not reader


def test_a_linked_configuration_is_read_again_once_the_file_it_leads_to_changes(
    tmp_path: Path, kong: FixtureRepo
) -> None:
    """lstat of a link says nothing of an edit of the file it leads to: the reader is shared
    only while both are unchanged."""
    config = kong.root / ".git" / "config"
    target = tmp_path / "linked-config"
    target.write_text(config.read_text() + "[poimen]\n\tprobe = one\n")
    config.unlink()
    config.symlink_to(target)
    repo = GitRepo.discover(kong.root)
    assert repo.config_values("poimen", "probe") == ("one",)
    target.write_text(target.read_text().replace("probe = one", "probe = two"))
    assert repo.config_values("poimen", "probe") == ("two",)


def test_a_conditional_include_after_a_tab_is_checked_and_never_shared(
    kong: FixtureRepo,
) -> None:
    """git takes ``[includeIf<TAB>"..."]`` as a conditional include, and so does the reader:
    the file it names is checked like any include (a FIFO refuses the configuration, or
    every git would wait on it), and such a configuration is never shared."""
    extra = kong.root.parent / "extra-if.gitconfig"
    extra.write_text("[poimen]\n\tprobe = one\n")
    with (kong.root / ".git" / "config").open("a") as config:
        config.write(f'[includeIf\t"gitdir:{kong.root}/"]\n\tpath = {extra}\n')
    repo = GitRepo.discover(kong.root)
    assert repo._gp.config_reader() is not repo._gp.config_reader()
    extra.unlink()
    os.mkfifo(extra)
    with pytest.raises(GitError, match="configuration"):
        repo.config_values("poimen", "probe")
