"""The rule-break tool (``python -m mutation``): a break its tests notice is caught, one they
do not is reported surviving, a piece of code that moved is reported stale; and every entry of
``mutation/breaks.toml`` still names code that is there, exactly once."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from mutation.__main__ import Break, check, load
from mutation.scratch import ROOT


def _project(tmp_path: Path) -> Path:
    (tmp_path / "server").mkdir()
    (tmp_path / "rule.py").write_text("def positive(x: int) -> bool:\n    return x > 0\n")
    (tmp_path / "test_rule.py").write_text(
        "from rule import positive\n\n\n"
        "def test_zero_is_not_positive() -> None:\n    assert not positive(0)\n"
    )
    return tmp_path


def test_a_break_its_tests_notice_is_caught(tmp_path: Path) -> None:
    copy = _project(tmp_path)
    entry = Break("zero is not positive", "rule.py", "x > 0", "x >= 0", ("test_rule.py",))
    outcome = check(copy, entry)
    assert outcome.status == "caught"
    assert "1 failed" in outcome.detail
    assert (copy / "rule.py").read_text().endswith("return x > 0\n")  # restored


def test_a_break_no_test_notices_survives(tmp_path: Path) -> None:
    copy = _project(tmp_path)
    entry = Break("negatives", "rule.py", "x > 0", "x > -1 and x != 0", ("test_rule.py",))
    assert check(copy, entry).status == "survived"


def test_code_that_moved_is_stale(tmp_path: Path) -> None:
    copy = _project(tmp_path)
    entry = Break("gone", "rule.py", "x > 1", "x > 2", ("test_rule.py",))
    outcome = check(copy, entry)
    assert (outcome.status, outcome.detail) == ("stale", "the piece is found 0 times")


def test_every_entry_names_code_that_is_there_once() -> None:
    entries = load()
    assert len(entries) >= 3
    for entry in entries:
        text = (ROOT / entry.file).read_text()
        assert text.count(entry.find) == 1, (entry.rule, entry.file)
        assert entry.replace != entry.find, entry.rule
        for test in entry.tests:
            assert (ROOT / test.split("::")[0]).is_file(), (entry.rule, test)
            if "::" in test:
                name = test.split("::")[1].split("[")[0]
                assert f"def {name}(" in (ROOT / test.split("::")[0]).read_text(), test


def test_the_command_says_what_it_does() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "mutation", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "--only" in done.stdout
