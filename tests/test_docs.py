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
