"""The benchmark's own tools: the answer floor's echo process and the scaled store."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from bench.corpus import FULL
from bench.lspclient import LspClient

ROOT = Path(__file__).resolve().parent.parent


def test_the_echo_process_answers_every_request_with_its_file(tmp_path: Path) -> None:
    answer = [{"range": {"start": {"line": 3, "character": 0}}, "title": "2 memories · é"}]
    path = tmp_path / "answer.json"
    path.write_text(json.dumps(answer, separators=(",", ":")))
    echo = LspClient(
        [sys.executable, "-m", "bench.echo", str(path)],
        {"PYTHONPATH": str(ROOT)},
        tmp_path,
        tmp_path / "echo.log",
    )
    try:
        echo.notify("initialized", {})  # a notification gets no answer
        assert echo.request("textDocument/codeLens", {}) == answer
        assert echo.request("anything", {"id": 7}) == answer
    finally:
        echo.close()
    assert echo.proc.returncode == 0  # ends on exit, not killed


def test_a_scaled_store_has_more_memories_on_the_same_repository() -> None:
    five = FULL.scaled(5)
    assert (five.l0, five.l1, five.l2) == (5 * FULL.l0, 5 * FULL.l1, 5 * FULL.l2)
    assert (five.commits, five.big_lines, five.files) == (FULL.commits, FULL.big_lines, FULL.files)
    assert five.key != FULL.key  # a store of its own
    assert FULL.scaled(1) is FULL
