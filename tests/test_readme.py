"""The README is the user's door and docs/ the house: their commands must be the ones that
really run, and every command, setting and figure must be documented where the README points."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path
from types import ModuleType

from bench.__main__ import markdown_table

from poimen_memory.cli import build_parser

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text("utf-8")
DOCS = ROOT / "docs"


def _doc(page: str) -> str:
    return (DOCS / page).read_text("utf-8")


def _hook() -> ModuleType:
    """The docs build's hook that generates the reference sections."""
    name = "poimen_docs_reference"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, DOCS / "_hooks" / "reference.py")
        assert spec
        assert spec.loader
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def _generated(surface: str) -> set[str]:
    """What the generated operations reference documents on ``surface`` (``lsp``: command
    ids; ``cli``: commands without ``mem``): each operation served there that says what it
    does."""
    hook = _hook()
    names = set()
    for op in hook.operations():
        reached = hook._surface(op, surface)
        if reached and (getattr(op, "description", "") or getattr(op, "summary", "")).strip():
            names.add(reached.removeprefix("mem ") if surface == "cli" else reached)
    return names


def test_ci_runs_exactly_the_readme_test_command() -> None:
    ci_lines = [
        line.strip()
        for line in (ROOT / ".ci" / "run").read_text().splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]
    command = ci_lines[-1]
    assert command == "python3 -m pytest"
    assert f"pip install -e '.[test]' && {command}" in README
    # ... after building the docs with warnings as errors.
    assert ci_lines[-2].startswith("python3 -m mkdocs build --strict "), ci_lines[-2]


def test_readme_is_a_short_door_into_the_docs() -> None:
    lines = README.count("\n")
    assert 150 <= lines <= 250, lines
    linked = set(re.findall(r"\]\((docs/[^)#]+\.md)(?:#[^)]*)?\)", README))
    pages = {str(p.relative_to(ROOT)) for p in DOCS.rglob("*.md")}
    assert linked <= pages, linked - pages  # no link to a page that does not exist
    assert pages <= linked, pages - linked  # and every page is reachable from the README


def test_every_cli_command_is_documented() -> None:
    reference = _doc("reference/cli.md")
    parser = build_parser()
    documented = set()
    for usage in re.findall(r"^\| `mem ([^`]*)`", reference, re.MULTILINE):
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
    # A row may go on with the command's fixed words (`mem hooks install claude-code`); an
    # operation may be documented by the generated operations reference instead.
    missing = {c for c in commands if not any(d == c or d.startswith(f"{c} ") for d in documented)}
    assert not missing - _generated("cli"), missing - _generated("cli")


def test_every_server_setting_has_its_own_heading() -> None:
    from poimen_memory.lsp.config import SECTION, SETTINGS

    configuration = _doc("configuration.md")
    for key in SETTINGS:
        assert f"#### `{SECTION}.{key}`" in configuration, key


def test_every_lsp_command_is_documented() -> None:
    from poimen_memory.lsp import commands

    reference = _doc("reference/lsp.md")
    assert "<!-- poimen:operations surface=lsp -->" in reference
    generated = _generated("lsp")
    for command in commands.ALL:
        # In the hand-written table, or an operation the generated section documents.
        assert f"| `{command}` |" in reference or command in generated, command


def test_the_benchmark_table_is_results_json() -> None:
    results = json.loads((ROOT / "bench" / "results.json").read_text("utf-8"))
    assert markdown_table(results) in _doc("benchmarks.md")


def test_the_readme_benchmark_summary_counts_results_json() -> None:
    results = json.loads((ROOT / "bench" / "results.json").read_text("utf-8"))
    targets = [f for f in results["figures"] if f["target"] != "(info)"]
    summary = re.search(r"(\d+) of the (\d+) figures with a target meet it", README)
    assert summary, "no benchmark summary in the README"
    assert int(summary[1]) == sum(bool(f["pass"]) for f in targets)
    assert int(summary[2]) == len(targets)
    assert "](docs/benchmarks.md)" in README


def test_no_page_asks_for_a_project_a_work_tree_decides() -> None:
    """The one project rule derives the project from the repository: the docs never show
    `--project` as required, and `mem doctor` (which says where it came from) is where a
    newcomer looks first."""
    pages = {str(p.relative_to(ROOT)): p.read_text("utf-8") for p in DOCS.rglob("*.md")}
    pages["README.md"] = README
    for name, text in pages.items():
        for usage in re.findall(r"^\| `(mem [^`]*)`", text, re.MULTILINE):
            assert "--project" not in re.sub(r"\[[^\]]*\]", "", usage), (name, usage)
        assert not re.search(r"--project(`)? is required|project: required", text), name
    assert "## When something looks wrong: `mem doctor`" in _doc("getting-started.md")
    assert "| `mem doctor" in _doc("reference/cli.md")
