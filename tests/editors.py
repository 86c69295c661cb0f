"""Editor programs for the editor-client tests: skipped with a reason when absent, unless
``POIMEN_REQUIRE_EDITORS=1`` (set by .ci/run after editors/ci-setup.sh) makes absence a failure."""

from __future__ import annotations

import os
import shutil

import pytest

REQUIRE_ENV = "POIMEN_REQUIRE_EDITORS"


def editors_required() -> bool:
    """True when a missing editor must fail the test instead of skipping it."""
    return os.environ.get(REQUIRE_ENV, "") == "1"


def missing(reason: str) -> None:
    """Skip (or, when editors are required, fail) with ``reason``."""
    hint = f"{reason}; editors/ci-setup.sh installs it"
    if editors_required():
        pytest.fail(f"{hint} ({REQUIRE_ENV}=1: a missing editor is a failure)")
    pytest.skip(hint)


def require_program(program: str) -> str:
    """The path of ``program`` on PATH (or the path itself if it is executable), else skip or
    fail naming it."""
    found = shutil.which(program)
    if found is None:
        missing(f"{program} is not installed")
    assert found is not None
    return found
