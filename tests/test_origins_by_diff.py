"""Lines a commit added are its own: the shortcut ingest takes for lines named at a past
commit must say exactly what `git blame` at that commit says, on a history with edits in the
middle of files, repeated lines, renames with edits, a merge and a root commit."""

from __future__ import annotations

import random
from pathlib import Path

from poimen_memory.domain import CommitSha
from poimen_memory.gitio import GitRepo
from poimen_memory.gitio.history import changes
from poimen_memory.ingest.enrich import _added_by

from .gitrepo import ALICE, BOB, FixtureRepo


def _history(root: Path) -> FixtureRepo:
    rng = random.Random(14)
    repo = FixtureRepo.create(root)
    files = {f"src/m{i}.py": [f"line {i}.{n} = {n}" for n in range(30)] for i in range(3)}
    for path, lines in files.items():
        repo.write(path, "\n".join(lines) + "\n")
    repo.commit("c0", "root", ALICE)
    for k in range(1, 25):
        path = rng.choice(sorted(files))
        lines = files[path]
        at = rng.randrange(len(lines))
        kind = rng.choice(["insert", "replace", "delete", "repeat"])
        if kind == "insert":
            lines[at:at] = [f"new {k}.{j}" for j in range(rng.randint(1, 3))]
        elif kind == "replace":
            lines[at] = f"changed {k}"
        elif kind == "delete" and len(lines) > 5:
            del lines[at]
        else:
            lines.insert(at, "}")  # a line that also occurs elsewhere
        if k == 12:  # a rename with an edit
            repo.git("mv", path, path.replace(".py", "_renamed.py"))
            files[path.replace(".py", "_renamed.py")] = files.pop(path)
            path = path.replace(".py", "_renamed.py")
        repo.write(path, "\n".join(files[path]) + "\n")
        repo.commit(f"c{k}", f"change {k}", BOB if k % 2 else ALICE)
    repo.git("checkout", "-q", "-b", "side", "HEAD~3")
    side_path = sorted(files)[0]
    repo.write(side_path, "\n".join(["side line", *files[side_path][1:]]) + "\n")
    repo.commit("side", "side change", BOB)
    repo.git("checkout", "-q", "main")
    repo.git("merge", "-q", "--no-edit", "side")
    repo.commits["merge"] = repo.git("rev-parse", "HEAD").strip()
    return repo


def test_lines_a_commit_added_have_the_origin_blame_gives(tmp_path: Path) -> None:
    fixture = _history(tmp_path / "repo")
    repo = GitRepo.discover(fixture.root)
    shas = [CommitSha(s) for s in fixture.commits.values()]
    found = changes(repo, shas)
    checked = 0
    for sha in shas:
        change = found[sha]
        for path in change.files:
            count = len(repo.blob(sha, path).splitlines())
            blame = repo.blame(path, sha)
            for line in range(1, count + 1):
                own = _added_by(change, path, [(line, line)])
                if not own:
                    continue
                checked += 1
                assert own[line] == blame.lines[line - 1], (sha.short(), path, line)
    assert checked > 50
    merge = found[CommitSha(fixture.commits["merge"])]
    assert merge.merge
    assert _added_by(merge, sorted(merge.files)[0], [(1, 1)]) == {}
