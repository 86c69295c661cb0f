"""The Neovim help ships with its tags: ``:help poimen_memory`` works from a plain checkout on
the runtimepath, with no ``:helptags`` run first (E149 otherwise)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from ..editors import require_program
from .test_nvim_plugin import NVIMS, PLUGIN

DOC = PLUGIN / "doc"
# A help tag as :helptags finds it: *name* between blanks (or the line's ends).
TAG = re.compile(r"(?:^|(?<=\s))\*([^\s*|]+)\*(?=\s|$)", re.MULTILINE)


def test_every_help_tag_is_in_doc_tags() -> None:
    defined = sorted(set(TAG.findall((DOC / "poimen_memory.txt").read_text("utf-8"))))
    assert "poimen_memory" in defined
    lines = (DOC / "tags").read_text("utf-8").splitlines()
    entries = [line.split("\t") for line in lines]
    assert all(len(entry) == 3 for entry in entries), lines
    assert [name for name, _, _ in entries] == defined  # every tag, sorted as Vim sorts them
    for name, file, address in entries:
        assert file == "poimen_memory.txt", name
        assert address == f"/*{name}*", name


@pytest.mark.parametrize("nvim", list(NVIMS.values()), ids=list(NVIMS))
def test_help_opens_from_the_shipped_tags(nvim: str, tmp_path: Path) -> None:
    exe = require_program(nvim)
    out = tmp_path / "help.txt"
    lua = tmp_path / "help.lua"
    lua.write_text(
        "vim.opt.runtimepath:append(vim.env.POIMEN_PLUGIN)\n"
        "local ok, err = pcall(vim.cmd, 'help poimen_memory')\n"
        "local f = io.open(vim.env.POIMEN_OUT, 'w')\n"
        "f:write(ok and ('opened ' .. vim.fn.expand('%:t') .. ':' .. vim.fn.getline('.'))"
        " or ('failed ' .. tostring(err)))\n"
        "f:close()\n"
        "vim.cmd('qa!')\n"
    )
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "XDG_DATA_HOME": str(tmp_path / "data"),
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "POIMEN_PLUGIN": str(PLUGIN),
        "POIMEN_OUT": str(out),
    }
    done = subprocess.run(
        [exe, "--headless", "-u", "NONE", "-i", "NONE", "-c", f"luafile {lua}"],
        env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert out.exists(), f"neovim wrote nothing: {done.stdout}\n{done.stderr}"
    shown = out.read_text()
    assert shown.startswith("opened poimen_memory.txt:"), shown
    assert "*poimen_memory*" in shown, shown
