"""The docs site builds with warnings as errors, and its generated reference is complete."""

from __future__ import annotations

import html
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from poimen_memory.settings import Settings

ROOT = Path(__file__).resolve().parent.parent


def _keys(model: type[BaseModel], prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every key of a settings model: nested models' fields as dotted paths."""
    keys: list[tuple[str, ...]] = []
    for name, field in model.model_fields.items():
        if field.exclude:
            continue
        candidates: list[Any] = [field.annotation, *getattr(field.annotation, "__args__", ())]
        nested = next(
            (c for c in candidates if isinstance(c, type) and issubclass(c, BaseModel)), None
        )
        keys += _keys(nested, (*prefix, name)) if nested else [(*prefix, name)]
    return keys


def _text(page: Path) -> str:
    """A built page's text: tags dropped, entities decoded."""
    return html.unescape(re.sub(r"<[^>]+>", "", page.read_text("utf-8")))


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return out


def test_the_site_builds_strict_with_every_page(site: Path) -> None:
    pages = {p.relative_to(ROOT / "docs").with_suffix("") for p in (ROOT / "docs").rglob("*.md")}
    for page in pages:
        built = site / ("index.html" if page.name == "index" else page / "index.html")
        assert built.is_file(), page
        assert "<!-- poimen:" not in built.read_text("utf-8"), page  # every marker was replaced
    assert not list(site.rglob("*.py")), "the build hook was published with the site"


def test_the_configuration_page_has_every_setting(site: Path) -> None:
    text = _text(site / "configuration" / "index.html")
    flat = " ".join(text.split())
    keys = _keys(Settings)
    assert len(keys) >= 10, keys
    for path in keys:
        key = ".".join(path)
        assert f"\n{key}¶" in text or f"\n{key}\n" in text, f"no heading for {key}"
        assert f"POIMEN_{'__'.join(path).upper()}" in text, key
        field: Any = Settings.model_fields[path[0]]
        for part in path[1:]:
            field = field.annotation.model_fields[part]
        if field.description:  # as rendered: code spans lose their backticks
            assert " ".join(field.description.replace("`", "").split()) in flat, key


def test_the_cli_reference_has_every_commands_help(site: Path) -> None:
    from poimen_memory.cli.parser import build_parser

    text = _text(site / "reference" / "cli" / "index.html")
    parser = build_parser()
    subparsers = parser._subparsers._group_actions[0]  # type: ignore[union-attr]
    for name, sub in subparsers.choices.items():
        assert f"usage: mem {name}" in " ".join(text.split()), name
        assert " ".join((sub.description or "").split()) in " ".join(text.split()), name


def test_the_operations_reference_has_every_request_field(site: Path) -> None:
    from poimen_memory.lookup.requests import ByGitRequest, RememberRequest

    for page, model in (("http", ByGitRequest), ("mcp", RememberRequest), ("lsp", ByGitRequest)):
        text = _text(site / "reference" / page / "index.html")
        assert model.__name__ in text, page
        for field in model.model_fields:
            assert f"\n{field}\n" in text, f"{page}: {model.__name__}.{field}"


def test_the_operations_reference_has_every_operation_on_every_surface(site: Path) -> None:
    from poimen_memory.operations import OPERATIONS

    text = " ".join(_text(site / "reference" / "operations" / "index.html").split())
    pages = {
        surface: " ".join(_text(site / "reference" / surface / "index.html").split())
        for surface in ("http", "mcp", "lsp", "cli")
    }
    for op in OPERATIONS:
        reached = {
            "http": f"{op.http.method} {op.http.path}" if op.http else None,
            "mcp": op.mcp_tool,
            "lsp": op.lsp_command,
            "cli": " ".join(("mem", *op.cli.words)) if op.cli else None,
        }
        for surface, name in reached.items():
            if name is None:
                continue
            assert name in text, (op.name, surface)
            assert name in pages[surface], (op.name, surface)  # each surface's own page too
        for model in (op.request, op.response):
            assert model.__name__ in text, (op.name, model.__name__)
            for name, field in model.model_fields.items():
                assert field.description, f"{model.__name__}.{name} has no description"


def _rows(page: Path) -> list[list[str]]:
    """The cells of every table row of a built page, as text."""
    cells = re.compile(r"<t[dh][^>]*>(.*?)</t[dh]>", re.DOTALL)
    return [
        [" ".join(html.unescape(re.sub(r"<[^>]+>", "", c)).split()) for c in cells.findall(row)]
        for row in re.findall(r"<tr>(.*?)</tr>", page.read_text("utf-8"), re.DOTALL)
    ]


def test_the_errors_table_is_each_surfaces_table(site: Path) -> None:
    from poimen_memory.cli import EXIT_STATUS
    from poimen_memory.errors import ErrorKind
    from poimen_memory.http import STATUS
    from poimen_memory.lsp.lookups import ERROR_CODES

    rows = {row[0]: row for row in _rows(site / "reference" / "operations" / "index.html") if row}
    header = rows["kind"]
    for kind in ErrorKind:
        row = dict(zip(header, rows[kind.value], strict=True))
        assert row["CLI exit status"] == str(EXIT_STATUS[kind]), kind
        assert row["HTTP status"] == str(STATUS[kind]), kind
        assert row["LSP error code"] == str(ERROR_CODES[kind]), kind
        assert "isError" in row["MCP"], kind


def test_the_configuration_page_has_every_config_file_key() -> None:
    from poimen_memory.settings import CONFIG_KEYS

    page = (ROOT / "docs" / "configuration.md").read_text("utf-8")
    for key in CONFIG_KEYS:
        assert f"| `{key}` |" in page or f"| `[{key}]` |" in page, key
    # The renamed key is named only to say what it is now.
    for line in page.splitlines():
        if "shared_blame_cache" in line:
            assert "is now [blame] shared_cache" in line, line
    assert "POIMEN_SHARED_BLAME_CACHE" not in page
