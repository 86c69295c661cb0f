"""The README is the user's door: its commands must be the ones that really run."""

from __future__ import annotations

import re
from pathlib import Path

from poimen_memory.cli import build_parser

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text("utf-8")


def test_ci_runs_exactly_the_readme_test_command() -> None:
    ci_lines = [
        line.strip()
        for line in (ROOT / ".ci" / "run").read_text().splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]
    command = ci_lines[-1]
    assert command == "python3 -m pytest"
    assert f"pip install -e '.[test]' && {command}" in README


def test_every_cli_command_is_documented() -> None:
    parser = build_parser()
    documented = set()
    for usage in re.findall(r"^\| `mem ([^`]*)`", README, re.MULTILINE):
        words = []
        for word in usage.split():
            if not re.fullmatch(r"[a-z][a-z-]*", word):
                break
            words.append(word)
        documented.add(" ".join(words))
    subparsers = parser._subparsers._group_actions[0]  # type: ignore[union-attr]
    commands = set()
    for name, sub in subparsers.choices.items():
        nested = [a for a in sub._actions if a.__class__.__name__ == "_SubParsersAction"]
        if nested:
            commands |= {f"{name} {child}" for child in nested[0].choices}
        else:
            commands.add(name)
    # A row may go on with the command's fixed words (`mem hooks install claude-code`).
    missing = {c for c in commands if not any(d == c or d.startswith(f"{c} ") for d in documented)}
    assert not missing, missing


def test_every_server_setting_has_its_own_heading() -> None:
    from poimen_memory.lsp.config import SECTION, SETTINGS

    for key in SETTINGS:
        assert f"#### `{SECTION}.{key}`" in README, key


def test_every_lsp_command_is_documented() -> None:
    from poimen_memory.lsp import commands

    for command in commands.ALL:
        assert f"| `{command}` |" in README, command
