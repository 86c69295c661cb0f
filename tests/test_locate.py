"""Where a file is: remembered per path, and found again when the path names another file."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from poimen_memory.domain import RepoId
from poimen_memory.lookup import new_checkouts
from poimen_memory.lookup.errors import NotInRepository

from .gitrepo import FixtureRepo, kong_repo


def _repo(root: Path, name: str, remote: str) -> FixtureRepo:
    return kong_repo(root / name, remote=remote)


def test_a_path_relinked_to_another_work_tree_is_located_there(tmp_path: Path) -> None:
    one = _repo(tmp_path, "one", "git@github.com:org/one.git")
    two = _repo(tmp_path, "two", "git@github.com:org/two.git")
    checkouts = new_checkouts(cache_path=tmp_path / "cache.db")
    link = tmp_path / "current"
    link.symlink_to(one.root, target_is_directory=True)
    path = link / "src" / "kong" / "buffer.rs"
    first = checkouts.locate(path)
    assert first[0] == RepoId("github.com/org/one")
    assert first[2] == "src/kong/buffer.rs"
    assert checkouts.locate(path) == first  # remembered: the same file
    # The same path now names a file of the other work tree (another inode): found again.
    link.unlink()
    link.symlink_to(two.root, target_is_directory=True)
    again = checkouts.locate(path)
    assert again[0] == RepoId("github.com/org/two")
    assert again[1] is not first[1]


def test_a_file_replaced_under_its_path_is_located_again(tmp_path: Path) -> None:
    one = _repo(tmp_path, "one", "git@github.com:org/one.git")
    checkouts = new_checkouts(cache_path=tmp_path / "cache.db")
    inside = one.root / "src" / "kong" / "buffer.rs"
    outside = tmp_path / "secret.txt"
    outside.write_text("not in any work tree\n")
    assert checkouts.locate(inside)[2] == "src/kong/buffer.rs"
    # The file becomes a link out of the work tree: refused, not answered from memory.
    saved = inside.read_text()
    inside.unlink()
    inside.symlink_to(outside)
    try:
        with pytest.raises(NotInRepository):
            checkouts.locate(inside)
    finally:
        inside.unlink()
        inside.write_text(saved)
    assert os.path.realpath(inside) == str(inside)
    assert checkouts.locate(inside)[2] == "src/kong/buffer.rs"


def test_a_work_tree_registered_inside_a_known_one_takes_its_files(tmp_path: Path) -> None:
    outer = _repo(tmp_path, "outer", "git@github.com:org/outer.git")
    inner = _repo(outer.root / "vendor", "inner", "git@github.com:org/inner.git")
    checkouts = new_checkouts(cache_path=tmp_path / "cache.db")
    path = inner.root / "src" / "kong" / "buffer.rs"
    checkouts.add(outer.root)
    assert checkouts.locate(path)[0] == RepoId("github.com/org/outer")
    checkouts.add(inner.root)
    assert checkouts.locate(path)[0] == RepoId("github.com/org/inner")
