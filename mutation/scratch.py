"""A scratch copy of the tree, where code can be broken without touching the work tree."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def scratch_copy(into: Path) -> Path:
    """The tracked files of the tree as they are now (uncommitted changes too)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.split(b"\0")
    for name in filter(None, listed):
        source = ROOT / os.fsdecode(name)
        if not source.is_file():
            continue
        target = into / os.fsdecode(name)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target)
    return into
