"""Where a test's embedded store keeps its data: ``data_dir/pgdata``, or, run as root, where
``embedded_root_dir`` puts it (this run's own directory, set in ``conftest``)."""

from __future__ import annotations

import os
from pathlib import Path

from poimen_memory.store import embedded_pgdata
from poimen_memory.store.embedded_root import ROOT_DIR

ROOT_ENV = "POIMEN_EMBEDDED_ROOT_DIR"


def root_dir() -> Path:
    return Path(os.environ.get(ROOT_ENV) or ROOT_DIR)


def pgdata_of(data_dir: Path) -> Path:
    """The embedded store's data directory for the data directory ``data_dir``."""
    return embedded_pgdata(data_dir, root_dir())
